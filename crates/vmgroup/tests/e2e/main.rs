//! The VmGroup operator end to end: the real API server (the operator as its ServiceAccount)
//! and a real vcsim. Every assertion about VMs is read back from vcsim.
mod support;

use bosun_runtime::conditions::find;
use bosun_testenv::eventually;
use bosun_vsphere::PowerState;
use kube::api::DeleteParams;
use kube::ResourceExt;

use support::env;

const TEMPLATE: &str = "DC0_H0_VM0";

#[tokio::test]
async fn a_group_is_created_scaled_repaired_reshaped_and_deleted() {
    let env = env("vg-life", None).await;
    env.create("web", 2, 3, TEMPLATE, 2).await;
    let vg = env
        .wait_status("web", "RUNNING with 2", |s| {
            s.phase == "RUNNING" && s.current_replicas == 2 && s.desired_replicas == 2
        })
        .await;
    let ready = find(&vg.status.as_ref().expect("status").conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllVmsReady")
    );
    assert!(vg
        .finalizers()
        .iter()
        .any(|f| f == bosun_vmgroup::reconcile::FINALIZER));
    env.wait_vms("web", &["web-1", "web-2"], 2, 3).await;

    // Scale up: one more, numbered next.
    env.patch_spec("web", serde_json::json!({"replicas": 3}))
        .await;
    env.wait_status("web", "RUNNING with 3", |s| {
        s.phase == "RUNNING" && s.current_replicas == 3
    })
    .await;
    let vms = env
        .wait_vms("web", &["web-1", "web-2", "web-3"], 2, 3)
        .await;

    // Powered off behind the operator's back: powered on again.
    let web2 = vms
        .iter()
        .find(|v| v.name == "web-2")
        .expect("web-2")
        .vm
        .clone();
    env.vc.power_off(&web2).await.expect("power off outside");
    let on = eventually(60, || async {
        let v = env.vc.vms(std::slice::from_ref(&web2)).await.ok()?;
        (v.first()?.power_state == Some(PowerState::PoweredOn)).then_some(())
    })
    .await;
    assert!(on.is_some(), "web-2 was not powered on again");

    // Scale down: the highest numbers go.
    env.patch_spec("web", serde_json::json!({"replicas": 1}))
        .await;
    env.wait_status("web", "RUNNING with 1", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    env.wait_vms("web", &["web-1"], 2, 3).await;

    // A new shape is applied by reconfiguring.
    env.patch_spec("web", serde_json::json!({"cpu": 1, "memory": 2}))
        .await;
    env.wait_status("web", "RUNNING reshaped", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    env.wait_vms("web", &["web-1"], 1, 2).await;
    let reasons: Vec<String> = env
        .events_for("web")
        .await
        .into_iter()
        .map(|e| e.0)
        .collect();
    for r in ["VmCreated", "VmPoweredOn", "VmRemoved", "VmReconfigured"] {
        assert!(reasons.iter().any(|x| x == r), "{r} in {reasons:?}");
    }

    // Delete: VMs and folder go, then the VmGroup.
    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = eventually(90, || async {
        matches!(env.api().get_opt("web").await, Ok(None)).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the VmGroup was not released by its finalizer"
    );
    assert_eq!(env.vms("web").await, None, "the folder is gone");
    env.stop().await;
}

#[tokio::test]
async fn a_missing_template_is_an_error_with_a_clear_message_and_recovers_on_fix() {
    let env = env("vg-tpl", None).await;
    env.create("db", 1, 1, "no-such-template", 2).await;
    let vg = env.wait_status("db", "ERROR", |s| s.phase == "ERROR").await;
    let st = vg.status.expect("status");
    assert!(
        st.last_message.contains("/DC0/vm/no-such-template")
            && st.last_message.contains("does not exist"),
        "{}",
        st.last_message
    );
    let d = find(&st.conditions, "Degraded").expect("Degraded");
    assert_eq!(
        (d.status.as_str(), d.reason.as_str()),
        ("True", "TemplateNotFound")
    );
    let events = env.events_for("db").await;
    assert!(
        events.iter().any(|e| e.0 == "TemplateNotFound"),
        "{events:?}"
    );
    assert_eq!(
        env.vms("db").await.map(|v| v.len()),
        Some(0),
        "nothing cloned"
    );

    // Corrected: the group comes up.
    env.patch_spec("db", serde_json::json!({"template": TEMPLATE}))
        .await;
    env.wait_status("db", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    env.wait_vms("db", &["db-1", "db-2"], 1, 1).await;
    env.stop().await;
}

#[tokio::test]
async fn a_wrong_password_is_an_error_that_names_the_fix_and_no_secret() {
    let env = env("vg-login", Some("not-the-password")).await;
    env.create("app", 1, 1, TEMPLATE, 1).await;
    let vg = env
        .wait_status("app", "ERROR", |s| s.phase == "ERROR")
        .await;
    let st = vg.status.expect("status");
    let d = find(&st.conditions, "Degraded").expect("Degraded");
    assert_eq!(d.reason, "LoginFailed");
    assert!(
        st.last_message.contains("VC_USER and VC_PASS"),
        "{}",
        st.last_message
    );
    assert!(
        !st.last_message.contains("not-the-password"),
        "{}",
        st.last_message
    );
    env.stop().await;
}

#[tokio::test]
async fn deleting_while_vcenter_hangs_keeps_the_finalizer_until_it_answers() {
    let env = env("vg-down", None).await;
    env.create("job", 1, 1, TEMPLATE, 2).await;
    env.wait_status("job", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    env.sim.pause().expect("pause vcsim");
    env.api()
        .delete("job", &DeleteParams::default())
        .await
        .expect("delete");
    let held = eventually(60, || async {
        let vg = env.api().get("job").await.ok()?;
        let st = vg.status.as_ref()?;
        let d = find(&st.conditions, "Degraded")?;
        (st.phase == "ERROR" && d.reason == "VCenterUnreachable").then_some(vg)
    })
    .await
    .expect("the status says vCenter cannot be reached");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(!held.finalizers().is_empty(), "the finalizer stays");
    let msg = &held.status.as_ref().expect("status").last_message;
    assert!(msg.contains("cannot be deleted yet"), "{msg}");
    env.sim.resume().expect("resume vcsim");
    let gone = eventually(120, || async {
        matches!(env.api().get_opt("job").await, Ok(None)).then_some(())
    })
    .await;
    assert!(gone.is_some(), "released once vCenter answers");
    assert_eq!(env.vms("job").await, None, "the folder is gone");
    env.stop().await;
}
