//! Edits made while bosun is stopped — `kubectl set image`, a label removed, an owner
//! reference removed, a Deployment deleted and recreated from a copy with another image —
//! are all repaired when it starts.
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use super::bosun::{Bosun, Flags};
use super::cluster::{names, Env};
use super::Report;

const IMAGE: &str = "akash125/pyapp:latest";

fn image(d: &Deployment) -> Option<String> {
    d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
        .image
        .clone()
}

fn json_patch(v: serde_json::Value) -> anyhow::Result<Patch<()>> {
    Ok(Patch::Json(serde_json::from_value(v)?))
}

pub async fn run(env: &mut Env) -> anyhow::Result<Report> {
    eprintln!("[chaos] drift: edits while bosun is stopped");
    let mut r = Report::new("drift");
    let ns = env.namespace("chaos-drift").await?;
    let stores = names("drift", 3);
    env.create(&ns, &stores).await?;
    let b = Bosun::start(env, "drift", &ns, &Flags::default()).await?;
    env.wait_ready(&ns, &stores, Duration::from_secs(120))
        .await?;
    b.stop().await?;

    let deps: Api<Deployment> = Api::namespaced(env.admin.clone(), &ns);
    let svcs: Api<Service> = Api::namespaced(env.admin.clone(), &ns);
    let pp = |m: &str| PatchParams {
        field_manager: Some(m.into()),
        ..Default::default()
    };
    deps.patch(
        "drift-0-app",
        &pp("kubectl-set"),
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "bookstore", "image": "evil/pyapp:1"}]}}}})),
    )
    .await?;
    svcs.patch(
        "drift-1-app",
        &pp("kubectl-edit"),
        &json_patch(
            json!([{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}]),
        )?,
    )
    .await?;
    svcs.patch(
        "drift-1-mongodb-headless",
        &pp("kubectl-edit"),
        &json_patch(json!([{"op": "remove", "path": "/metadata/ownerReferences"}]))?,
    )
    .await?;
    let mut copy = deps.get("drift-2-app").await?;
    deps.delete("drift-2-app", &DeleteParams::background())
        .await?;
    for _ in 0..100 {
        if deps.get_opt("drift-2-app").await?.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    copy.metadata = ObjectMeta {
        name: copy.metadata.name.clone(),
        labels: copy.metadata.labels.clone(),
        annotations: copy.metadata.annotations.clone(),
        owner_references: copy.metadata.owner_references.clone(),
        ..Default::default()
    };
    copy.status = None;
    if let Some(pod) = copy.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.containers[0].image = Some("evil/pyapp:1".into());
    }
    deps.create(&PostParams::default(), &copy).await?;

    let t0 = Instant::now();
    let b = Bosun::start(env, "drift", &ns, &Flags::default()).await?;
    let mut repaired = false;
    while t0.elapsed() < Duration::from_secs(60) {
        let ok = async {
            let d0 = deps.get("drift-0-app").await.ok()?;
            let d2 = deps.get("drift-2-app").await.ok()?;
            let s1 = svcs.get("drift-1-app").await.ok()?;
            let h1 = svcs.get("drift-1-mongodb-headless").await.ok()?;
            Some(
                image(&d0).as_deref() == Some(IMAGE)
                    && image(&d2).as_deref() == Some(IMAGE)
                    && s1.labels().contains_key("app.kubernetes.io/managed-by")
                    && h1
                        .owner_references()
                        .iter()
                        .any(|o| o.controller == Some(true)),
            )
        }
        .await;
        if ok == Some(true) {
            repaired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    r.check(repaired, "not every edit was repaired within 60 s");
    r.figure(
        "four edits made while stopped, repaired after start (s)",
        format!("{:.1}", t0.elapsed().as_secs_f64()),
    );
    if let Err(e) = env.wait_ready(&ns, &stores, Duration::from_secs(60)).await {
        r.check(false, e.to_string());
    }
    let problems = env.check_children(&ns, &stores).await?;
    r.check(problems.is_empty(), format!("{problems:?}"));
    b.stop().await?;
    Ok(r)
}
