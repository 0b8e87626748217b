//! Which templates a VmGroup may clone (audit M13, L10): only those under
//! `BOSUN_VMGROUP_TEMPLATE_ROOTS` when it is set, and never one of the group's own VMs.
use bosun_runtime::conditions::find;
use bosun_testenv::eventually;
use kube::api::DeleteParams;

use crate::support::{env, PARENT};

/// A template outside the allowed root — behind a look-alike prefix, or reached with `..` —
/// is refused with its reason and an Event, and nothing is cloned; one inside is cloned.
#[tokio::test]
async fn only_templates_under_the_allowed_roots_are_cloned() {
    let mut env = env("vg-roots", None).await;
    // Made outside bosun: the allowed folder, and one whose name merely starts like it.
    env.foreign_folder("templates", &["golden"]).await;
    env.foreign_folder("templates-evil", &["evil"]).await;
    env.halt().await;
    env.settings.template_roots = Some(vec![format!("{PARENT}/templates")]);
    env.start_operator().await;

    let outside = [
        ("prefix", format!("{PARENT}/templates-evil/evil")),
        (
            "dotdot",
            format!("{PARENT}/templates/../templates-evil/evil"),
        ),
        ("vcsim", "DC0_H0_VM0".to_string()),
    ];
    for (name, template) in &outside {
        env.create(name, 1, 1, template, 1).await;
    }
    for (name, template) in &outside {
        let vg = env
            .wait_status(name, "ERROR with TemplateNotAllowed", |s| {
                s.phase == "ERROR"
                    && find(&s.conditions, "Degraded")
                        .is_some_and(|c| c.status == "True" && c.reason == "TemplateNotAllowed")
            })
            .await;
        let st = vg.status.expect("status");
        assert!(
            st.last_message.contains(&format!("{PARENT}/templates")),
            "{name} ({template}): the message names the allowed root: {}",
            st.last_message
        );
        assert_eq!(st.current_replicas, 0, "{name}");
        assert_eq!(
            env.vms(name).await,
            None,
            "{name}: no folder, nothing cloned"
        );
        let events = env.events_for(name).await;
        assert!(
            events.iter().any(|(r, _)| r == "TemplateNotAllowed"),
            "{name}: {events:?}"
        );
    }
    // The look-alike folder still holds only what it held.
    assert_eq!(
        env.vm_names_at(&format!("{PARENT}/templates-evil")).await,
        Some(vec!["evil".to_string()])
    );

    // Inside the root, spelled with a doubled slash: cloned.
    env.create("inside", 1, 1, &format!("{PARENT}//templates/golden"), 2)
        .await;
    env.wait_status("inside", "RUNNING with 2", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    env.wait_vms("inside", &["inside-1", "inside-2"], 1, 1)
        .await;
    env.stop().await;
}

/// Without webhooks nothing stops `spec.template` from naming one of the group's own VMs
/// (audit L10): the group refuses it, and deleting the group leaves the template in place.
#[tokio::test]
async fn a_template_in_the_groups_own_folder_survives_the_groups_deletion() {
    let env = env("vg-own-tpl", None).await;
    env.create("web", 1, 1, "DC0_H0_VM0", 2).await;
    env.wait_status("web", "RUNNING with 2", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    env.wait_vms("web", &["web-1", "web-2"], 1, 1).await;
    let own = format!("{}/web-1", env.folder_path("web"));
    env.patch_spec("web", serde_json::json!({"template": own}))
        .await;
    let vg = env
        .wait_status("web", "ERROR: template in its own folder", |s| {
            s.phase == "ERROR" && s.last_message.contains("own folder")
        })
        .await;
    let st = vg.status.expect("status");
    let degraded = find(&st.conditions, "Degraded").expect("Degraded");
    assert_eq!(degraded.reason, "InvalidSpec");

    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let ns = env.ns.clone();
    env.wait_gone(&ns, "web").await;
    assert_eq!(
        env.vm_names_at(&env.folder_path("web")).await,
        Some(vec!["web-1".to_string()]),
        "the template web-1 survives; the group's other VM is gone"
    );
    // The Event follows the finalizer's release: wait for it, not for a time.
    let named = eventually(60, || async {
        let events = env.events_for("web").await;
        events
            .iter()
            .any(|(r, n)| r == "Deleted" && n.contains("web-1, the group's own template"))
            .then_some(())
    })
    .await;
    assert!(
        named.is_some(),
        "the deletion names the VM it kept: {:?}",
        env.events_for("web").await
    );
    env.stop().await;
}
