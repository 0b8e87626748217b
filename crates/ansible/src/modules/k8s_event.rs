//! `operator_sdk.util.k8s_event`: creates an Event, or counts one more occurrence of an
//! existing Event of the same name.
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{json, Map, Value as Json};

use super::{client, Effects};
use crate::engine::RunContext;

type Args = Map<String, Json>;

pub async fn run(a: &Args, ctx: &RunContext, fx: &mut Effects) -> Result<Json, String> {
    let client = client(ctx)?;
    let s = |k: &str| a.get(k).and_then(Json::as_str).map(String::from);
    let ns = s("namespace")
        .or_else(|| ctx.owner.as_ref().and_then(|o| o.namespace.clone()))
        .unwrap_or_else(|| "default".into());
    let mut name = s("name").ok_or("name is required")?;
    let now = chrono::Utc::now();
    if a.get("appendTimestamp")
        .and_then(Json::as_bool)
        .unwrap_or(false)
    {
        name = format!("{name}.{}", now.timestamp_nanos_opt().unwrap_or_default());
    }
    let ts = crate::status::transition_time(now);
    let res = ctx.discovery.resolve(client, "v1", "Event").await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &res.resource);
    if let Some(existing) = api.get_opt(&name).await.map_err(|e| e.to_string())? {
        let count = existing
            .data
            .get("count")
            .and_then(Json::as_i64)
            .unwrap_or(1)
            + 1;
        let patched = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"count": count, "lastTimestamp": ts})),
            )
            .await
            .map_err(|e| e.to_string())?;
        let r = serde_json::to_value(&patched).unwrap_or(Json::Null);
        fx.events.push(r.clone());
        return Ok(json!({"changed": true, "result": r}));
    }
    let mut ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": a.get("involvedObject").cloned().unwrap_or(Json::Null),
        "reason": s("reason").unwrap_or_default(),
        "message": s("message").unwrap_or_default(),
        "type": s("type").unwrap_or_else(|| "Normal".into()),
        "count": 1, "firstTimestamp": ts, "lastTimestamp": ts,
    });
    // Only what the task gives, as operator_sdk.util: no default source or reporting component.
    if let Some(src) = a.get("source").filter(|s| !s.is_null()) {
        ev["source"] = src.clone();
    }
    if let Some(rc) = s("reportingComponent") {
        ev["reportingComponent"] = json!(rc);
    }
    // ansible-operator's proxy gives every object a role creates its owner reference (or the
    // primary-resource annotations), Events included.
    if let Some(o) = &ctx.owner {
        o.inject(&mut ev, true);
    }
    let obj: DynamicObject = serde_json::from_value(ev).map_err(|e| e.to_string())?;
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| e.to_string())?;
    let r = serde_json::to_value(&created).unwrap_or(Json::Null);
    fx.events.push(r.clone());
    Ok(json!({"changed": true, "result": r}))
}
