//! Issue 33: a VmGroup never changes or destroys what it did not create. Every scenario
//! starts from objects made in vcsim outside bosun, and reads the outcome back from vcsim.
use bosun_runtime::conditions::find;
use bosun_testenv::eventually;
use bosun_vmgroup::owner::{OWNER_FIELD, OWNER_KEY};
use bosun_vsphere::{CloneOptions, PowerState, VmInfo};
use kube::api::DeleteParams;
use kube::ResourceExt;

use crate::support::{self, env_full, Namespaces, PARENT};

const TEMPLATE: &str = "DC0_H0_VM0";

/// vcsim's view of VMs made outside bosun, by reference: name, shape and power unchanged.
async fn unchanged(env: &support::Env, before: &[VmInfo]) {
    let refs: Vec<_> = before.iter().map(|v| v.vm.clone()).collect();
    let mut now = env.vc.vms(&refs).await.expect("read");
    now.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(now.len(), before.len(), "{now:#?}");
    for (b, n) in before.iter().zip(&now) {
        assert_eq!(
            (&b.name, b.num_cpu, b.memory_mb, b.power_state),
            (&n.name, n.num_cpu, n.memory_mb, n.power_state),
            "changed by bosun"
        );
        assert!(n.custom_values.is_empty(), "marked by bosun: {n:?}");
    }
}

/// The issue's scenario, exactly: folder `team-web` holding `keep-me` and `web-1`, both made
/// before any VmGroup; VmGroup `web` in namespace `team`; deleted; `keep-me` still exists.
#[tokio::test]
async fn the_issues_scenario_a_pre_existing_team_web_folder_survives_the_group() {
    let env = env_full(Namespaces::Named(&["team"]), None, &[]).await;
    let before = env.foreign_folder("team-web", &["keep-me", "web-1"]).await;
    env.create("web", 1, 1, TEMPLATE, 2).await;
    let vg = env
        .wait_status("web", "RUNNING with 2", |s| {
            s.phase == "RUNNING" && s.current_replicas == 2
        })
        .await;
    // keep-me and web-1 are not the group's: not reshaped, powered or marked.
    unchanged(&env, &before).await;
    let st = vg.status.expect("status");
    assert!(!st.last_message.contains("keep-me"), "{}", st.last_message);
    let folder = st
        .folder
        .clone()
        .expect("the folder's reference in the status");
    let own = env
        .vc
        .require_path(&format!("{PARENT}/team_web"))
        .await
        .expect("the group's own folder");
    assert_eq!(own.value, folder);
    assert_eq!(
        env.vm_names_at(&format!("{PARENT}/team_web")).await,
        Some(vec!["web-1".to_string(), "web-2".to_string()])
    );

    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone("team", "web").await;
    assert_eq!(
        env.vm_names_at(&format!("{PARENT}/team-web")).await,
        Some(vec!["keep-me".to_string(), "web-1".to_string()]),
        "keep-me and web-1 still exist"
    );
    unchanged(&env, &before).await;
    assert_eq!(
        env.vm_names_at(&format!("{PARENT}/team_web")).await,
        None,
        "the group's own folder is gone"
    );
    env.stop().await;
}

/// A folder already at the group's own path, made by someone else, is not adopted: the group
/// stops with FolderNotOwned (condition and Event), nothing in it is changed, and deleting
/// the VmGroup leaves it whole.
#[tokio::test]
async fn an_unmarked_folder_at_the_groups_path_is_never_adopted() {
    let env = support::env("vg-squat", None).await;
    let path_name = format!("{}_web", env.ns);
    let before = env
        .foreign_folder(&path_name, &["keep-me", "web-1", "web-3"])
        .await;
    env.create("web", 2, 2, TEMPLATE, 2).await;
    let vg = env
        .wait_status("web", "ERROR", |s| s.phase == "ERROR")
        .await;
    let st = vg.status.expect("status");
    let d = find(&st.conditions, "Degraded").expect("Degraded");
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        ("True", "FolderNotOwned")
    );
    assert!(st.last_message.contains(OWNER_FIELD), "{}", st.last_message);
    assert_eq!(st.folder, None);
    let events = env.events_for("web").await;
    assert!(events.iter().any(|e| e.0 == "FolderNotOwned"), "{events:?}");
    unchanged(&env, &before).await;

    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone(&env.ns, "web").await;
    unchanged(&env, &before).await;
    let events = env.events_for("web").await;
    assert!(
        events
            .iter()
            .any(|e| e.0 == "ForeignObjectsLeftAlone" && e.1.contains("nothing in it was touched")),
        "{events:?}"
    );
    env.stop().await;
}

/// Namespace `a-b` + group `c` and namespace `a` + group `b-c` get two folders; deleting
/// one group leaves the other's VMs running.
#[tokio::test]
async fn groups_whose_dashed_names_join_alike_never_share_a_folder() {
    let env = env_full(Namespaces::Named(&["a-b", "a"]), None, &[]).await;
    env.create_in("a-b", "c", 1, TEMPLATE, serde_json::json!({}), &[])
        .await;
    env.create_in("a", "b-c", 1, TEMPLATE, serde_json::json!({}), &[])
        .await;
    for (ns, name) in [("a-b", "c"), ("a", "b-c")] {
        let ok = eventually(90, || async {
            let vg = env.api_in(ns).get(name).await.ok()?;
            let s = vg.status?;
            (s.phase == "RUNNING" && s.current_replicas == 1).then_some(())
        })
        .await;
        assert!(ok.is_some(), "{ns}/{name} RUNNING");
    }
    assert_eq!(
        env.vm_names_at(&format!("{PARENT}/a-b_c")).await,
        Some(vec!["c-1".to_string()])
    );
    let other = env.vm_names_at(&format!("{PARENT}/a_b-c")).await;
    assert_eq!(other, Some(vec!["b-c-1".to_string()]));
    env.api_in("a-b")
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone("a-b", "c").await;
    assert_eq!(env.vm_names_at(&format!("{PARENT}/a_b-c")).await, other);
    let vg = env.api_in("a").get("b-c").await.expect("b-c");
    assert_eq!(vg.status.expect("status").current_replicas, 1);
    env.stop().await;
}

/// A VM put by hand into the group's own folder is foreign: a condition and a Warning Event
/// name it, it is never reshaped, powered or destroyed, a number it holds is not cloned over
/// it, and the folder outlives the group because it is not empty.
#[tokio::test]
async fn a_foreign_vm_in_the_groups_folder_is_reported_and_left_alone() {
    let env = support::env("vg-guest", None).await;
    env.create("web", 2, 2, TEMPLATE, 1).await;
    let vg = env
        .wait_status("web", "RUNNING", |s| s.phase == "RUNNING")
        .await;
    let folder = bosun_vsphere::MoRef::new("Folder", &vg.status.expect("st").folder.expect("f"));
    let template = env
        .vc
        .require_path(&format!("{PARENT}/{TEMPLATE}"))
        .await
        .expect("template");
    let shape = bosun_vsphere::Shape {
        num_cpus: 1,
        memory_mb: 32,
    };
    let mut guests = Vec::new();
    for n in ["guest", "web-2"] {
        guests.push(
            env.vc
                .clone_vm(&template, &folder, n, shape)
                .await
                .expect("a VM put there by hand"),
        );
    }
    let mut before = env.vc.vms(&guests).await.expect("read");
    before.sort_by(|a, b| a.name.cmp(&b.name));
    env.patch_spec("web", serde_json::json!({"replicas": 2}))
        .await;
    let vg = env
        .wait_status("web", "the foreign VMs reported", |s| {
            find(&s.conditions, "ForeignObjects").is_some_and(|c| c.status == "True")
        })
        .await;
    let st = vg.status.expect("status");
    let c = find(&st.conditions, "ForeignObjects").expect("ForeignObjects");
    assert_eq!(c.reason, "ForeignObjectsLeftAlone");
    assert!(c.message.contains("guest, web-2"), "{}", c.message);
    assert!(c.message.contains("holds the name: web-2"), "{}", c.message);
    assert_eq!(st.current_replicas, 1, "web-2 is not the group's");
    let events = env.events_for("web").await;
    assert!(
        events.iter().any(|e| e.0 == "ForeignObjectsLeftAlone"),
        "{events:?}"
    );
    unchanged(&env, &before).await;

    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone(&env.ns, "web").await;
    unchanged(&env, &before).await;
    let left = env.vc.folder_info(&folder).await.expect("read");
    let left = left.expect("the folder stays: it holds foreign VMs");
    assert_eq!(left.children.len(), 2, "only the two foreign VMs: {left:?}");
    env.stop().await;
}

/// The operator restarted with another parent folder: the group is found by the folder
/// recorded in its status, nothing is cloned anew, and deletion removes the original VMs.
#[tokio::test]
async fn a_changed_parent_folder_neither_leaks_nor_duplicates_vms() {
    let mut env = support::env("vg-parent", None).await;
    env.create("app", 1, 1, TEMPLATE, 2).await;
    env.wait_status("app", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    let before = env.vms("app").await.expect("folder");
    let parent = env.vc.require_path(PARENT).await.expect("parent");
    let other = env
        .vc
        .create_folder(&parent, "elsewhere")
        .await
        .expect("other parent");
    env.halt().await;
    env.settings.parent_folder = format!("{PARENT}/elsewhere");
    env.start_operator().await;
    let more = eventually(60, || async { (env.reconciles() >= 3.0).then_some(()) }).await;
    assert!(more.is_some(), "the new operator reconciles");
    let calls = env.op.as_ref().expect("op").vcenter_calls().await;
    assert_eq!(calls.get("CloneVM_Task"), None, "nothing cloned: {calls:?}");
    assert_eq!(calls.get("CreateFolder"), None, "no new folder: {calls:?}");
    let st = env.api().get("app").await.expect("app").status.expect("st");
    assert_eq!((st.phase.as_str(), st.current_replicas), ("RUNNING", 2));
    assert_eq!(env.vms("app").await, Some(before), "the same VMs");
    let elsewhere = env.vc.folder_info(&other).await.expect("read").expect("f");
    assert!(elsewhere.children.is_empty(), "{elsewhere:?}");

    env.api()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone(&env.ns, "app").await;
    assert_eq!(
        env.vms("app").await,
        None,
        "the original folder and VMs are gone"
    );
    env.stop().await;
}

/// What a crash right after a clone leaves: the group's folder and a VM carrying the mark the
/// clone task gave it (extraConfig), without the custom field. It is the group's VM: taken,
/// shaped, and given the custom field; nothing cloned again.
#[tokio::test]
async fn a_clone_finished_after_a_crash_is_known_by_its_extra_config_mark() {
    let mut env = support::env("vg-crash", None).await;
    env.halt().await;
    let vg = env
        .create_in(&env.ns, "grp", 2, TEMPLATE, serde_json::json!({}), &[])
        .await;
    let uid = vg.uid().expect("uid");
    let parent = env.vc.require_path(PARENT).await.expect("parent");
    let folder = env
        .vc
        .create_folder(&parent, &format!("{}_grp", env.ns))
        .await
        .expect("folder");
    let key = env.vc.custom_field(OWNER_FIELD).await.expect("field");
    env.vc.set_field(&folder, key, &uid).await.expect("mark");
    let template = env
        .vc
        .require_path(&format!("{PARENT}/{TEMPLATE}"))
        .await
        .expect("template");
    let shape = bosun_vsphere::Shape {
        num_cpus: 1,
        memory_mb: 32,
    };
    let options = CloneOptions {
        extra_config: vec![(OWNER_KEY.to_string(), uid.clone())],
        ..Default::default()
    };
    let left = env
        .vc
        .clone_vm_with(&template, &folder, "grp-1", shape, &options)
        .await
        .expect("clone");
    env.start_operator().await;
    let vms = env.wait_vms("grp", &["grp-1", "grp-2"], 1, 1).await;
    assert_eq!(vms[0].vm, left, "the VM left behind is the group's VM 1");
    let labelled = eventually(30, || async {
        let v = env.vc.vms(std::slice::from_ref(&left)).await.ok()?;
        (v.first()?.custom_values.get(&key) == Some(&uid)).then_some(())
    })
    .await;
    assert!(labelled.is_some(), "the custom field is set on it");
    let calls = env.op.as_ref().expect("op").vcenter_calls().await;
    assert_eq!(
        calls.get("CloneVM_Task"),
        Some(&1),
        "only grp-2 cloned: {calls:?}"
    );
    env.stop().await;
}

/// Issue 33's template case: `spec.template` names a real vSphere template (made with
/// MarkAsTemplate, so it has no resource pool): the clones go into its host's cluster pool.
#[tokio::test]
async fn a_group_clones_from_a_real_vsphere_template() {
    let env = support::env("vg-realtpl", None).await;
    let source = env
        .vc
        .require_path(&format!("{PARENT}/{TEMPLATE}"))
        .await
        .expect("vcsim's VM");
    let parent = env.vc.require_path(PARENT).await.expect("parent");
    let shape = bosun_vsphere::Shape {
        num_cpus: 1,
        memory_mb: 32,
    };
    let tpl = env
        .vc
        .clone_vm(&source, &parent, "ubuntu-template", shape)
        .await
        .expect("copy");
    let seen = env.vc.vms(std::slice::from_ref(&tpl)).await.expect("read");
    if seen[0].power_state != Some(PowerState::PoweredOff) {
        env.vc.power_off(&tpl).await.expect("power off");
    }
    env.vc.mark_as_template(&tpl).await.expect("MarkAsTemplate");
    env.create("ubu", 1, 1, "ubuntu-template", 2).await;
    env.wait_status("ubu", "RUNNING 2/2", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    env.wait_vms("ubu", &["ubu-1", "ubu-2"], 1, 1).await;
    env.stop().await;
}

/// A VM (here a template) that happens to sit at the group's folder path is no folder: the
/// group refuses it as not its own, and deleting the group leaves it (the audit's case c).
#[tokio::test]
async fn a_vm_at_the_groups_folder_path_is_neither_used_nor_destroyed() {
    let env = support::env("vg-vmpath", None).await;
    let source = env
        .vc
        .require_path(&format!("{PARENT}/{TEMPLATE}"))
        .await
        .expect("vcsim's VM");
    let parent = env.vc.require_path(PARENT).await.expect("parent");
    let shape = bosun_vsphere::Shape {
        num_cpus: 1,
        memory_mb: 32,
    };
    let squatter = env
        .vc
        .clone_vm(&source, &parent, &format!("{}_web", env.ns), shape)
        .await
        .expect("a VM named like the folder");
    env.vc.mark_as_template(&squatter).await.expect("template");
    env.create("web", 1, 1, TEMPLATE, 1).await;
    let vg = env
        .wait_status("web", "ERROR", |s| s.phase == "ERROR")
        .await;
    let st = vg.status.expect("st");
    let d = find(&st.conditions, "Degraded").expect("Degraded");
    assert_eq!(d.reason, "FolderNotOwned");
    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone(&env.ns, "web").await;
    let still = env
        .vc
        .vms(std::slice::from_ref(&squatter))
        .await
        .expect("read");
    assert_eq!(still.len(), 1, "the template at the path still exists");
    env.stop().await;
}
