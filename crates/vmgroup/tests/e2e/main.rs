//! The VmGroup operator end to end: the real API server (the operator as its ServiceAccount)
//! and a real vcsim. Every assertion about VMs is read back from vcsim.
mod logins;
mod migrate;
mod ownership;
mod support;
mod templates;

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
    // Through the scale subresource, as `kubectl scale vg/web --replicas=3` does.
    env.api()
        .patch_scale(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale");
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

    // Deleted behind the operator's back: cloned again under its number.
    let web3 = vms
        .iter()
        .find(|v| v.name == "web-3")
        .expect("web-3")
        .vm
        .clone();
    env.vc.power_off(&web3).await.expect("power off outside");
    env.vc.destroy(&web3).await.expect("destroy outside");
    let again = env
        .wait_vms("web", &["web-1", "web-2", "web-3"], 2, 3)
        .await;
    assert_ne!(again[2].vm, web3, "a new web-3");

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
async fn a_missing_template_is_an_error_with_a_clear_message_and_recovers_once_it_exists() {
    let env = env("vg-tpl", None).await;
    env.create("db", 1, 1, "golden", 2).await;
    let vg = env.wait_status("db", "ERROR", |s| s.phase == "ERROR").await;
    let st = vg.status.expect("status");
    assert!(
        st.last_message.contains("/DC0/vm/golden") && st.last_message.contains("does not exist"),
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

    // The template appears in vCenter (no Kubernetes event): the retries find it.
    let source = env
        .vc
        .require_path(&format!("{}/{TEMPLATE}", support::PARENT))
        .await
        .expect("vcsim's VM");
    let parent = env.vc.require_path(support::PARENT).await.expect("parent");
    let shape = bosun_vsphere::Shape {
        num_cpus: 1,
        memory_mb: 32,
    };
    env.vc
        .clone_vm(&source, &parent, "golden", shape)
        .await
        .expect("make the template");
    env.wait_status("db", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 2
    })
    .await;
    env.wait_vms("db", &["db-1", "db-2"], 1, 1).await;
    let events = env.events_for("db").await;
    assert!(events.iter().any(|e| e.0 == "Recovered"), "{events:?}");
    env.stop().await;
}

/// A wrong password: LoginFailed naming the fix and not the password; vCenter is asked once
/// for the Secret however many groups retry (the account cannot be locked), and at once when
/// the Secret is corrected.
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

    // No retry storm, however many groups: the refusal is remembered for the Secret, so
    // four more groups and every retry of all five (the runtime's backoff brings several
    // per group) send no second Login while the Secret is unchanged.
    for n in 2..=5 {
        env.create(&format!("app{n}"), 1, 1, TEMPLATE, 1).await;
    }
    for n in 2..=5 {
        let vg = env
            .wait_status(&format!("app{n}"), "ERROR", |s| s.phase == "ERROR")
            .await;
        let st = vg.status.expect("status");
        assert!(
            st.last_message.contains("not tried again"),
            "{}",
            st.last_message
        );
    }
    let op = env.op.clone().expect("operator");
    let logins = || async { op.vcenter_calls().await.get("Login").copied().unwrap_or(0) };
    let r0 = env.reconciles();
    let more = eventually(60, || async {
        (env.reconciles() >= r0 + 15.0).then_some(())
    })
    .await;
    assert!(more.is_some(), "the groups are retried");
    assert_eq!(
        logins().await,
        1,
        "one Login for the Secret, not one per group or retry"
    );

    // The Secret corrected: tried at once, every group recovers, with one more Login.
    env.set_password(&env.sim.password.clone()).await;
    for name in ["app", "app2", "app3", "app4", "app5"] {
        env.wait_status(name, "RUNNING", |s| s.phase == "RUNNING")
            .await;
    }
    assert_eq!(logins().await, 2, "one login for the corrected Secret");
    let announced = env
        .events_for("app")
        .await
        .into_iter()
        .filter(|(r, _)| r == "LoginFailed")
        .count();
    assert_eq!(announced, 1, "the problem is announced once, not per retry");
    env.stop().await;
}

/// A GOVC_URL-style `VC_HOST` with a user name and password in it is refused, and the
/// password reaches neither the status nor an Event.
#[tokio::test]
async fn credentials_in_vc_host_never_reach_the_status_or_events() {
    let env = env("vg-userinfo", None).await;
    let port = env.sim.url.split(':').nth(2).unwrap_or("1").to_string();
    env.set_secret_key("VC_HOST", &format!("https://u:s3cret@127.0.0.1:{port}"))
        .await;
    env.create("leak", 1, 1, TEMPLATE, 1).await;
    let vg = env
        .wait_status("leak", "ERROR", |s| s.phase == "ERROR")
        .await;
    let st = vg.status.expect("status");
    assert!(
        st.last_message.contains("VC_USER and VC_PASS"),
        "{}",
        st.last_message
    );
    let all = serde_json::to_string(&st).expect("json");
    assert!(!all.contains("s3cret"), "{all}");
    let events = env.events_for("leak").await;
    assert!(!events.is_empty());
    assert!(
        events
            .iter()
            .all(|(r, n)| !r.contains("s3cret") && !n.contains("s3cret")),
        "{events:?}"
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
        // A reconcile that began before the delete may publish its own ERROR first: the
        // state this test asserts is the one written by the deleting reconcile.
        let r = find(&st.conditions, "Ready")?;
        (st.phase == "ERROR" && d.reason == "VCenterUnreachable" && r.reason == "Deleting")
            .then_some(vg)
    })
    .await
    .expect("the status says vCenter cannot be reached and the group is being deleted");
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

/// vCenter stops answering while a group runs: ERROR with the reason, a condition and an
/// Event; once it answers again the group is RUNNING and a Recovered Event says so.
#[tokio::test]
async fn an_unreachable_vcenter_is_an_error_and_the_group_recovers() {
    let env = env("vg-unreach", None).await;
    env.create("up", 1, 1, TEMPLATE, 1).await;
    env.wait_status("up", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    env.sim.pause().expect("pause vcsim");
    let vg = env
        .wait_status("up", "ERROR", |s| {
            s.phase == "ERROR"
                && find(&s.conditions, "Degraded").is_some_and(|d| d.reason == "VCenterUnreachable")
        })
        .await;
    let msg = vg.status.expect("status").last_message;
    assert!(msg.contains("check VC_HOST"), "{msg}");
    env.sim.resume().expect("resume vcsim");
    env.wait_status("up", "RUNNING again", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    let reasons: Vec<String> = env
        .events_for("up")
        .await
        .into_iter()
        .map(|e| e.0)
        .collect();
    for r in ["VCenterUnreachable", "Recovered"] {
        assert!(reasons.iter().any(|x| x == r), "{r} in {reasons:?}");
    }
    env.stop().await;
}

/// vCenter refusing at deletion (the password changed since the VMs were made): the VMs stay,
/// so does the VmGroup with its finalizer, and the status says why; once the Secret is right
/// again the VMs and the folder go, then the VmGroup. Nothing is orphaned silently.
#[tokio::test]
async fn deleting_while_vcenter_refuses_keeps_the_finalizer_until_it_accepts() {
    let env = env("vg-refuse", None).await;
    env.create("old", 1, 1, TEMPLATE, 1).await;
    env.wait_status("old", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    env.set_password("changed-meanwhile").await;
    env.api()
        .delete("old", &DeleteParams::default())
        .await
        .expect("delete");
    let held = eventually(60, || async {
        let vg = env.api().get("old").await.ok()?;
        let st = vg.status.as_ref()?;
        let d = find(&st.conditions, "Degraded")?;
        // As above: the status written by the deleting reconcile, not an earlier one's.
        let r = find(&st.conditions, "Ready")?;
        (st.phase == "ERROR" && d.reason == "LoginFailed" && r.reason == "Deleting").then_some(vg)
    })
    .await
    .expect("the status says vCenter refuses");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(!held.finalizers().is_empty(), "the finalizer stays");
    let msg = &held.status.as_ref().expect("status").last_message;
    assert!(
        msg.contains("cannot be deleted yet") && msg.contains("VC_USER and VC_PASS"),
        "{msg}"
    );
    assert!(!msg.contains("changed-meanwhile"), "{msg}");
    assert_eq!(
        env.vms("old").await.map(|v| v.len()),
        Some(1),
        "the VM is still there"
    );
    env.set_password(&env.sim.password.clone()).await;
    let gone = eventually(120, || async {
        matches!(env.api().get_opt("old").await, Ok(None)).then_some(())
    })
    .await;
    assert!(gone.is_some(), "released once vCenter accepts");
    assert_eq!(env.vms("old").await, None, "the folder is gone");
    env.stop().await;
}

/// The operator killed while its clone is in flight (vcsim holds each CloneVM_Task 3 s, so the
/// request is still open): vcsim finishes that clone after the crash, the new operator clones
/// the same number meanwhile, and the group still ends with one VM, not a leftover extra.
#[tokio::test]
async fn an_operator_killed_with_a_clone_in_flight_leaves_no_extra_vm() {
    let mut env =
        support::env_with("vg-inflight", None, &["-method-delay", "CloneVM_Task:3000"]).await;
    env.create("fly", 1, 1, TEMPLATE, 1).await;
    let op = env.op.clone().expect("operator");
    let sent = eventually(60, || async {
        let calls = op.vcenter_calls().await;
        (calls.get("CloneVM_Task").copied().unwrap_or(0) >= 1).then_some(())
    })
    .await;
    assert!(sent.is_some(), "the clone was sent");
    env.kill_and_restart().await;
    assert!(
        env.vms("fly").await.unwrap_or_default().is_empty(),
        "the clone was still in flight at the crash"
    );
    let vms = env.wait_vms("fly", &["fly-1"], 1, 1).await;
    env.wait_status("fly", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    // RUNNING is written after the new operator's clone, if it sent one, has answered (the
    // name taken, it took the VM); the crashed one's clone made the VM. Still one VM.
    let r0 = env.reconciles();
    let more = eventually(60, || async {
        (env.reconciles() >= r0 + 3.0).then_some(())
    })
    .await;
    assert!(more.is_some(), "the new operator reconciles");
    assert_eq!(
        env.vms("fly").await,
        Some(vms),
        "the same one VM, nothing more"
    );
    env.stop().await;
}

/// Clones run in parallel, never more than the bound (4) at a time. vcsim holds each
/// CloneVM_Task 1 s; clones in flight are estimated as CloneVM_Task calls sent less the VMs
/// vcsim shows, counted in that order, which never overestimates: so the bound is asserted
/// soundly, and an estimate of 2 or more shows the clones overlap.
#[tokio::test]
async fn clones_run_in_parallel_up_to_the_bound() {
    let env = support::env_with("vg-par", None, &["-method-delay", "CloneVM_Task:1000"]).await;
    env.create("par", 1, 1, TEMPLATE, 8).await;
    let op = env.op.clone().expect("operator");
    let bound = op.settings.parallel as u64;
    let most = std::sync::atomic::AtomicU64::new(0);
    let done = eventually(90, || async {
        let sent = op
            .vcenter_calls()
            .await
            .get("CloneVM_Task")
            .copied()
            .unwrap_or(0);
        let made = env.vms("par").await.map(|v| v.len() as u64).unwrap_or(0);
        let in_flight = sent.saturating_sub(made);
        assert!(
            in_flight <= bound,
            "{in_flight} clones in flight, bound {bound}"
        );
        most.fetch_max(in_flight, std::sync::atomic::Ordering::Relaxed);
        (made == 8 && sent == 8).then_some(())
    })
    .await;
    assert!(done.is_some(), "8 VMs cloned");
    let most = most.into_inner();
    assert!(
        most >= 2,
        "the clones overlap: at most {most} seen in flight"
    );
    env.wait_vms(
        "par",
        &[
            "par-1", "par-2", "par-3", "par-4", "par-5", "par-6", "par-7", "par-8",
        ],
        1,
        1,
    )
    .await;
    env.stop().await;
}

/// The schema refuses what the seed's markers refuse, at the API server.
#[tokio::test]
async fn bad_specs_are_refused_by_the_api_server() {
    let env = env("vg-bad", None).await;
    let ok = serde_json::json!({"cpu": 1, "memory": 1, "template": TEMPLATE, "replicas": 1});
    let with = |k: &str, v: serde_json::Value| {
        let mut s = ok.clone();
        s[k] = v;
        s
    };
    let without = |k: &str| {
        let mut s = ok.clone();
        s.as_object_mut().expect("object").remove(k);
        s
    };
    let bad = [
        with("cpu", 0.into()),
        with("cpu", 5.into()),
        with("cpu", (-1).into()),
        with("cpu", "two".into()),
        with("memory", 0.into()),
        with("memory", 9.into()),
        with("memory", 1.5.into()),
        with("replicas", 0.into()),
        with("replicas", (-3).into()),
        with("template", "".into()),
        with("template", 7.into()),
        without("cpu"),
        without("memory"),
        without("template"),
        without("replicas"),
        serde_json::json!({}),
    ];
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.admin.clone(),
        &env.ns,
        &kube::api::ApiResource::erase::<bosun_vmgroup::VmGroup>(&()),
    );
    for (i, spec) in bad.iter().enumerate() {
        let obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
            "metadata": {"name": format!("bad-{i}")}, "spec": spec,
        }))
        .expect("object");
        match api.create(&Default::default(), &obj).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{spec}: {s:?}"),
            other => panic!("{spec} was not refused: {other:?}"),
        }
    }
    let ok_obj: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
        "metadata": {"name": "good"}, "spec": ok,
    }))
    .expect("object");
    api.create(&Default::default(), &ok_obj)
        .await
        .expect("the bounds themselves are accepted");
    env.wait_status("good", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    env.wait_vms("good", &["good-1"], 1, 1).await;
    env.stop().await;
}

/// A steady group costs two property retrievals per reconcile (its recorded folder with its
/// mark, then its VMs), however many VMs it holds, and no path lookup; nothing is cloned,
/// powered or reconfigured again.
#[tokio::test]
async fn a_steady_group_is_read_in_one_retrieval_per_reconcile() {
    let env = env("vg-calls", None).await;
    env.create("many", 1, 1, TEMPLATE, 4).await;
    env.wait_status("many", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 4
    })
    .await;
    env.wait_vms("many", &["many-1", "many-2", "many-3", "many-4"], 1, 1)
        .await;
    // Steady means the folder is known from the status: until a reconcile has read the status
    // that records it, a reconcile may still look the folder up by path (seen under load).
    env.wait_status("many", "the folder recorded", |s| s.folder.is_some())
        .await;
    let recorded = env.reconciles();
    let settled = eventually(60, || async {
        (env.reconciles() >= recorded + 2.0).then_some(())
    })
    .await;
    assert!(
        settled.is_some(),
        "no reconcile after the folder was recorded"
    );
    // The counts as `/metrics` exports them.
    let calls = || {
        let text = env.metrics.as_ref().map(|m| m.encode()).unwrap_or_default();
        [
            "RetrievePropertiesEx",
            "FindByInventoryPath",
            "CloneVM_Task",
            "PowerOnVM_Task",
            "ReconfigVM_Task",
            "Login",
        ]
        .into_iter()
        .map(|m| {
            let n = bosun_testenv::sum_series(&text, "bosun_vcenter_calls_total", &[("method", m)]);
            (m.to_string(), n as u64)
        })
        .collect::<std::collections::BTreeMap<String, u64>>()
    };
    let (r0, c0) = (env.reconciles(), calls());
    assert!(
        c0["CloneVM_Task"] >= 4,
        "the clones are counted on /metrics: {c0:?}"
    );
    // Resyncs (every second here) bring the reconciles.
    let more = eventually(60, || async {
        (env.reconciles() >= r0 + 5.0).then_some(())
    })
    .await;
    assert!(more.is_some(), "no resync reconciles");
    let (r1, c1) = (env.reconciles(), calls());
    let delta = |m: &str| c1.get(m).copied().unwrap_or(0) - c0.get(m).copied().unwrap_or(0);
    // A reconcile in flight at either snapshot counts at most once more.
    let reconciles = (r1 - r0) as u64 + 1;
    assert!(
        delta("RetrievePropertiesEx") <= 2 * reconciles,
        "{} retrievals for {reconciles} reconciles: {c0:?} -> {c1:?}",
        delta("RetrievePropertiesEx")
    );
    assert_eq!(delta("FindByInventoryPath"), 0, "{c0:?} -> {c1:?}");
    for m in ["CloneVM_Task", "PowerOnVM_Task", "ReconfigVM_Task", "Login"] {
        assert_eq!(delta(m), 0, "{m}: {c0:?} -> {c1:?}");
    }
    assert!(
        delta("RetrievePropertiesEx") >= 4,
        "the group was read: {c0:?} -> {c1:?}"
    );
    env.stop().await;
}

/// The operator's vCenter session ended on the server (expiry, an admin): the next reconcile
/// logs in again by itself; the group never shows a problem.
#[tokio::test]
async fn an_ended_session_is_replaced_without_a_problem() {
    let env = env("vg-session", None).await;
    env.create("s", 1, 1, TEMPLATE, 1).await;
    env.wait_status("s", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    let op = env.op.clone().expect("operator");
    let logins = |c: &std::collections::BTreeMap<String, u64>| c.get("Login").copied().unwrap_or(0);
    let before = logins(&op.vcenter_calls().await);
    assert_eq!(before, 1);

    // End every session but the test's own.
    let own = env.vc.session_key().await.expect("own key");
    let sm = env.vc.content().session_manager.clone();
    let found = env
        .vc
        .properties(&[sm], "SessionManager", &["sessionList"])
        .await
        .expect("sessions");
    let keys: Vec<String> = found
        .iter()
        .filter_map(|o| o.props.get("sessionList"))
        .flat_map(|l| l.all("UserSession"))
        .filter_map(|s| s.child_text("key").map(str::to_string))
        .filter(|k| *k != own)
        .collect();
    assert!(
        !keys.is_empty(),
        "the operator's session is listed: {found:?}"
    );
    for k in &keys {
        env.vc.terminate_session(k).await.expect("terminate");
    }

    let again = eventually(60, || async {
        (logins(&op.vcenter_calls().await) == before + 1).then_some(())
    })
    .await;
    assert!(again.is_some(), "the operator logged in again");
    let r0 = env.reconciles();
    let more = eventually(60, || async {
        (env.reconciles() >= r0 + 2.0).then_some(())
    })
    .await;
    assert!(more.is_some());
    let vg = env.api().get("s").await.expect("get");
    let st = vg.status.expect("status");
    assert_eq!(st.phase, "RUNNING", "{st:?}");
    let warnings: Vec<_> = env.events_for("s").await;
    assert!(
        !warnings
            .iter()
            .any(|(r, _)| r == "VCenterRefused" || r == "LoginFailed"),
        "{warnings:?}"
    );
    env.stop().await;
}
