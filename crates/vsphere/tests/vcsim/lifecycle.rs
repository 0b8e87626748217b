//! A group's life on vcsim: folder, clones, shape, power, one read for all, teardown — and the
//! faults on the way. What is asserted is read back from vcsim, not what the client believes.
use bosun_vsphere::{Client, FaultKind, MoRef, PowerState, Shape};

use crate::support::{self, TEMPLATE, VM_FOLDER};

const SHAPE: Shape = Shape {
    num_cpus: 2,
    memory_mb: 3072,
};

async fn clone_shaped(client: Client, template: MoRef, folder: MoRef, name: String) -> MoRef {
    let vm = client
        .clone_vm(&template, &folder, &name, SHAPE)
        .await
        .expect("clone");
    // vcsim's clone ignores the requested shape and power state.
    client.reconfigure(&vm, SHAPE).await.expect("reconfigure");
    client.power_on(&vm).await.expect("power on");
    vm
}

#[tokio::test]
async fn a_group_of_vms_is_created_read_in_one_retrieval_and_torn_down() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let template = client.require_path(TEMPLATE).await.expect("template");
    let parent = client.require_path(VM_FOLDER).await.expect("vm folder");
    let folder = client
        .create_folder(&parent, "default-group")
        .await
        .expect("folder");
    let again = client.create_folder(&parent, "default-group").await;
    let err = again.expect_err("the folder exists");
    assert_eq!(err.fault_kind(), Some(&FaultKind::DuplicateName), "{err}");
    assert!(err.to_string().contains("default-group"), "{err}");

    const N: usize = 3;
    let mut clones = tokio::task::JoinSet::new();
    for i in 0..N {
        let (c, t, f) = (client.clone(), template.clone(), folder.clone());
        clones.spawn(clone_shaped(c, t, f, format!("default-group-{i}")));
    }
    let mut vms = clones.join_all().await;
    vms.sort();
    assert_eq!(client.counts().get("CloneVM_Task"), N as u64);

    let before = client.counts().get("RetrievePropertiesEx");
    let mut seen = client.vms_in_folder(&folder).await.expect("read the group");
    assert_eq!(
        client.counts().get("RetrievePropertiesEx"),
        before + 1,
        "one retrieval for the whole group"
    );
    seen.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(seen.len(), N, "{seen:?}");
    for (i, vm) in seen.iter().enumerate() {
        assert_eq!(vm.name, format!("default-group-{i}"));
        assert_eq!(vm.num_cpu, Some(2), "{vm:?}");
        assert_eq!(vm.memory_mb, Some(3072), "{vm:?}");
        assert_eq!(vm.power_state, Some(PowerState::PoweredOn), "{vm:?}");
    }
    let mut listed: Vec<MoRef> = seen.iter().map(|v| v.vm.clone()).collect();
    listed.sort();
    assert_eq!(listed, vms);
    let found = client
        .require_path(&format!("{VM_FOLDER}/default-group/default-group-1"))
        .await
        .expect("a clone by its path");
    assert!(vms.contains(&found));

    for vm in &vms {
        client.power_off(vm).await.expect("power off");
    }
    let before = client.counts().get("RetrievePropertiesEx");
    let off = client.vms(&vms).await.expect("read the list");
    assert_eq!(client.counts().get("RetrievePropertiesEx"), before + 1);
    assert!(
        off.iter()
            .all(|v| v.power_state == Some(PowerState::PoweredOff)),
        "{off:?}"
    );

    for vm in &vms {
        client.destroy(vm).await.expect("destroy vm");
    }
    assert!(client
        .vms_in_folder(&folder)
        .await
        .expect("read")
        .is_empty());
    client.destroy(&folder).await.expect("destroy folder");
    assert_eq!(
        client
            .find_by_inventory_path(&format!("{VM_FOLDER}/default-group"))
            .await
            .expect("find"),
        None
    );
    let gone = client
        .destroy(&vms[0])
        .await
        .expect_err("already destroyed");
    assert_eq!(gone.fault_kind(), Some(&FaultKind::NotFound), "{gone}");
    assert!(gone.to_string().contains(&vms[0].value), "{gone}");
}

#[tokio::test]
async fn a_missing_template_is_not_found() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let err = client
        .require_path("/DC0/vm/no-such-template")
        .await
        .expect_err("no such template");
    assert_eq!(err.fault_kind(), Some(&FaultKind::NotFound), "{err}");
    assert!(
        err.to_string().contains("/DC0/vm/no-such-template"),
        "{err}"
    );

    // A reference to nothing, as a deleted template leaves behind: the server's own fault.
    let parent = client.require_path(VM_FOLDER).await.expect("vm folder");
    let ghost = MoRef::new("VirtualMachine", "vm-does-not-exist");
    let err = client
        .clone_vm(&ghost, &parent, "x", SHAPE)
        .await
        .expect_err("no such VM");
    assert!(err.to_string().contains("vm-does-not-exist"), "{err}");
    assert_eq!(err.fault_kind(), Some(&FaultKind::NotFound), "{err}");
}

#[tokio::test]
async fn a_task_failure_carries_its_fault() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let template = client.require_path(TEMPLATE).await.expect("template");
    // The template is powered on in vcsim's default inventory: powering on again fails in
    // the task, not in the call.
    let err = client.power_on(&template).await.expect_err("already on");
    assert_eq!(err.fault_kind(), Some(&FaultKind::InvalidState), "{err}");
    assert!(err.to_string().contains("poweredOn"), "{err}");
}
