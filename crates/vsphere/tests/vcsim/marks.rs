//! Ownership marks and templates on vcsim: a custom field set on a folder and a VM is read
//! back with them; an extraConfig entry given to a clone is on the clone; a real template
//! (`MarkAsTemplate`) clones once a resource pool is given, and the default pool is found.
use bosun_vsphere::{CloneOptions, PowerState, Shape};

use crate::support::{self, TEMPLATE, VM_FOLDER};

const SHAPE: Shape = Shape {
    num_cpus: 1,
    memory_mb: 64,
};

#[tokio::test]
async fn a_custom_field_and_a_clones_extra_config_are_read_back() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let key = client
        .custom_field("bosun.test.owner")
        .await
        .expect("field");
    let again = client
        .custom_field("bosun.test.owner")
        .await
        .expect("field");
    assert_eq!(key, again, "the field is defined once and found after");
    assert_eq!(client.counts().get("AddCustomFieldDef"), 1);

    let parent = client.require_path(VM_FOLDER).await.expect("vm folder");
    let folder = client
        .create_folder(&parent, "marked")
        .await
        .expect("folder");
    client
        .set_field(&folder, key, "uid-1")
        .await
        .expect("mark folder");
    let info = client
        .folder_info(&folder)
        .await
        .expect("read")
        .expect("folder exists");
    assert_eq!(info.name, "marked");
    assert_eq!(
        info.custom_values.get(&key).map(String::as_str),
        Some("uid-1")
    );
    assert!(info.children.is_empty());

    let template = client.require_path(TEMPLATE).await.expect("template");
    let options = CloneOptions {
        extra_config: vec![("bosun.test.owner".into(), "uid-1".into())],
        ..Default::default()
    };
    let vm = client
        .clone_vm_with(&template, &folder, "m-1", SHAPE, &options)
        .await
        .expect("clone");
    let seen = client.vms_in_folder(&folder).await.expect("read");
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0]
            .extra_config
            .get("bosun.test.owner")
            .map(String::as_str),
        Some("uid-1"),
        "{:?}",
        seen[0].extra_config
    );
    assert!(seen[0].custom_values.is_empty(), "not set yet");
    client.set_field(&vm, key, "uid-1").await.expect("mark vm");
    let seen = client.vms(std::slice::from_ref(&vm)).await.expect("read");
    assert_eq!(
        seen[0].custom_values.get(&key).map(String::as_str),
        Some("uid-1")
    );
    let info = client
        .folder_info(&folder)
        .await
        .expect("read")
        .expect("folder");
    assert_eq!(info.children, vec![vm.clone()]);
    assert_eq!(client.names(&info.children).await.expect("names"), ["m-1"]);

    // A folder destroyed is gone, not an error; a VM is no folder.
    client.power_off(&vm).await.ok();
    client.destroy(&folder).await.expect("destroy");
    assert_eq!(client.folder_info(&folder).await.expect("read"), None);
    assert_eq!(client.folder_info(&template).await.expect("read"), None);
}

#[tokio::test]
async fn a_template_clones_into_its_hosts_pool_and_not_without_a_pool() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let source = client.require_path(TEMPLATE).await.expect("source");
    let parent = client.require_path(VM_FOLDER).await.expect("vm folder");
    let tpl = client
        .clone_vm(&source, &parent, "ubuntu-template", SHAPE)
        .await
        .expect("copy");
    let state = client.vms(std::slice::from_ref(&tpl)).await.expect("read");
    if state[0].power_state != Some(PowerState::PoweredOff) {
        client.power_off(&tpl).await.expect("power off");
    }
    client
        .mark_as_template(&tpl)
        .await
        .expect("mark as template");

    let err = client
        .clone_vm(&tpl, &parent, "no-pool", SHAPE)
        .await
        .expect_err("a template needs a pool");
    assert!(err.to_string().contains("pool"), "{err}");

    let pool = client
        .default_pool(&tpl)
        .await
        .expect("read")
        .expect("the host's cluster pool");
    assert_eq!(pool.kind, "ResourcePool");
    let options = CloneOptions {
        pool: Some(pool),
        ..Default::default()
    };
    let vm = client
        .clone_vm_with(&tpl, &parent, "from-template", SHAPE, &options)
        .await
        .expect("clone from the template");
    client.power_on(&vm).await.expect("power on");
}
