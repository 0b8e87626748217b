//! Readiness of any kind (issue 34): a release whose object is a custom kind (its CRD in the
//! chart's `crds/`) is Ready by kstatus' rules — the object's controller has seen its
//! generation (`status.observedGeneration`) and its `Ready`/`Available` conditions, when it
//! has them, are True; `Reconciling` or `Stalled` True is not ready. The custom resource's
//! `Ready` condition follows the object's status as its controller writes it.
mod support;

use bosun_helm_operator::Storage;
use kube::api::{Api, Patch, PatchParams};
use kube::core::DynamicObject;
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-kstatus";

fn ready_message(o: &DynamicObject) -> Option<(String, String)> {
    condition(o, "Ready").map(|c| {
        (
            c["status"].as_str().unwrap_or_default().to_string(),
            c["message"].as_str().unwrap_or_default().to_string(),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_kinds_conditions_and_observed_generation_decide_ready() {
    let env = env("helm-kstatus").await;
    let watches =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts/kstatus-watches.yaml");
    let ops = operators(&watches, Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;

    let gadgets = resource("test.bosun.dev", "v1", "Gadget");
    create(
        &env,
        &gadgets,
        "apiVersion: test.bosun.dev/v1\nkind: Gadget\nmetadata:\n  name: g\nspec: {}\n",
    )
    .await;
    // No status yet: kstatus counts an object its controller has not reported on as current.
    wait_for(&env, &gadgets, "g", 90, "Ready with a fresh Widget", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
            && has(o, "Ready", "True", Some("AllReady"))
    })
    .await;

    let widgets: Api<DynamicObject> = Api::namespaced_with(
        env.admin.clone(),
        &env.ns,
        &resource("kstatus.bosun.dev", "v1", "Widget"),
    );
    let set_status = |status: serde_json::Value| {
        let widgets = widgets.clone();
        async move {
            widgets
                .patch_status(
                    "g-widget",
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await
                .expect("the Widget's controller writes its status")
        }
    };

    // Its controller says it is provisioning: not ready, and the message says why.
    set_status(json!({
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning", "message": "volume pending"}],
    }))
    .await;
    let o = wait_for(&env, &gadgets, "g", 60, "Ready False for the Widget", |o| {
        has(o, "Ready", "False", Some("NotReady"))
    })
    .await;
    let (_, msg) = ready_message(&o).expect("Ready");
    assert!(
        msg.contains("Widget g-widget")
            && msg.contains("Provisioning")
            && msg.contains("volume pending"),
        "the message names the object and its condition: {msg}"
    );

    // Ready True, but the controller has not seen the current generation.
    widgets
        .patch(
            "g-widget",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"touched": "yes"}}, "spec": {"extra": 1}}),
            ),
        )
        .await
        .expect("a spec change someone else made (generation 2)");
    set_status(json!({
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Done"}],
    }))
    .await;
    let o = wait_for(
        &env,
        &gadgets,
        "g",
        60,
        "Ready False: generation not seen",
        |o| ready_message(o).is_some_and(|(s, m)| s == "False" && m.contains("generation")),
    )
    .await;
    assert!(has(&o, "Ready", "False", Some("NotReady")));

    // Available False on a kind without Ready; then Stalled.
    set_status(json!({
        "observedGeneration": 2,
        "conditions": [{"type": "Available", "status": "False", "reason": "NoQuorum"}],
    }))
    .await;
    wait_for(
        &env,
        &gadgets,
        "g",
        60,
        "Ready False: Available False",
        |o| ready_message(o).is_some_and(|(s, m)| s == "False" && m.contains("NoQuorum")),
    )
    .await;
    set_status(json!({
        "observedGeneration": 2,
        "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Stalled", "status": "True", "reason": "QuotaExceeded"}
        ],
    }))
    .await;
    wait_for(&env, &gadgets, "g", 60, "Ready False: Stalled", |o| {
        ready_message(o).is_some_and(|(s, m)| s == "False" && m.contains("QuotaExceeded"))
    })
    .await;

    // Everything current: Ready.
    set_status(json!({
        "observedGeneration": 2,
        "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Stalled", "status": "False"},
            {"type": "Ready", "status": "True"}
        ],
    }))
    .await;
    wait_for(&env, &gadgets, "g", 60, "Ready True again", |o| {
        has(o, "Ready", "True", Some("AllReady"))
    })
    .await;
    op.stop().await;
}
