//! `kubernetes.core.k8s_scale`: sets `spec.replicas` (optionally only from an expected
//! current count) and waits for the new count when asked.
use kube::api::{Patch, PatchParams};
use serde_json::{json, Map, Value as Json};

use super::k8s::{ready, wait_params};
use super::{client, Effects};
use crate::engine::RunContext;
use crate::kube_api::Discovery;

type Args = Map<String, Json>;

pub async fn run(a: &Args, ctx: &RunContext, fx: &mut Effects) -> Result<Json, String> {
    let client = client(ctx)?;
    let def = a.get("resource_definition").and_then(Json::as_object);
    let get = |k: &str, path: &str| {
        a.get(k)
            .and_then(Json::as_str)
            .map(String::from)
            .or_else(|| {
                def.and_then(|d| {
                    Json::Object(d.clone())
                        .pointer(path)
                        .and_then(Json::as_str)
                        .map(String::from)
                })
            })
    };
    let kind = get("kind", "/kind").ok_or("kind is required")?;
    let api_version = get("api_version", "/apiVersion").unwrap_or_else(|| "v1".into());
    let name = get("name", "/metadata/name").ok_or("name is required")?;
    let ns = get("namespace", "/metadata/namespace");
    let replicas = a
        .get("replicas")
        .and_then(|r| {
            r.as_i64()
                .or_else(|| r.as_str().and_then(|s| s.parse().ok()))
        })
        .ok_or("replicas is required")?;
    let res = ctx.discovery.resolve(client, &api_version, &kind).await?;
    let api = Discovery::api(client, &res, ns.as_deref());
    let obj = api.get(&name).await.map_err(|e| e.to_string())?;
    let current = obj
        .data
        .pointer("/spec/replicas")
        .and_then(Json::as_i64)
        .unwrap_or(1);
    if let Some(want) = a.get("current_replicas").and_then(Json::as_i64) {
        if want != current {
            return Ok(
                json!({"changed": false, "result": serde_json::to_value(&obj).unwrap_or(Json::Null)}),
            );
        }
    }
    if current == replicas {
        return Ok(
            json!({"changed": false, "result": serde_json::to_value(&obj).unwrap_or(Json::Null)}),
        );
    }
    let mut after = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .map_err(|e| e.to_string())?;
    fx.touched.push((api_version, kind));
    if a.get("wait").and_then(Json::as_bool).unwrap_or(true) && ctx.client.is_some() {
        let (timeout, sleep) = wait_params(a, ctx);
        let start = std::time::Instant::now();
        while !ready(&serde_json::to_value(&after).unwrap_or(Json::Null), None) {
            if start.elapsed() > timeout {
                return Err("Resource scaling timed out".into());
            }
            tokio::time::sleep(sleep).await;
            after = api.get(&name).await.map_err(|e| e.to_string())?;
        }
    }
    Ok(json!({"changed": true, "result": serde_json::to_value(&after).unwrap_or(Json::Null)}))
}
