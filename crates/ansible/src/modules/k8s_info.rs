//! `kubernetes.core.k8s_info` (and the `k8s` lookup): objects by name or by selectors.
use std::time::Instant;

use kube::api::ListParams;
use kube::Client;
use serde_json::{json, Map, Value as Json};

use super::client;
use super::k8s::{ready, wait_params};
use crate::engine::RunContext;
use crate::kube_api::Discovery;

type Args = Map<String, Json>;

fn selectors(v: Option<&Json>) -> Option<String> {
    match v? {
        Json::String(s) => Some(s.clone()),
        Json::Array(items) => Some(
            items
                .iter()
                .filter_map(|i| i.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    }
}

/// The objects matching `kind`, `api_version`, `name`/`resource_name`, `namespace`,
/// `label_selector(s)`, `field_selector(s)`.
pub async fn find(client: &Client, discovery: &Discovery, a: &Args) -> Result<Vec<Json>, String> {
    let kind = a
        .get("kind")
        .and_then(Json::as_str)
        .ok_or("kind is required")?;
    let api_version = api_version(a);
    let res = discovery.resolve(client, api_version, kind).await?;
    find_in(client, &res, a).await
}

fn api_version(a: &Args) -> &str {
    a.get("api_version")
        .or(a.get("api"))
        .or(a.get("version"))
        .and_then(Json::as_str)
        .unwrap_or("v1")
}

/// The objects of the resolved kind matching the arguments.
async fn find_in(
    client: &Client,
    res: &crate::kube_api::Resolved,
    a: &Args,
) -> Result<Vec<Json>, String> {
    let ns = a
        .get("namespace")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty());
    let api = Discovery::api(client, res, ns);
    let name = a
        .get("name")
        .or(a.get("resource_name"))
        .and_then(Json::as_str);
    if let Some(n) = name {
        return Ok(match api.get_opt(n).await.map_err(|e| e.to_string())? {
            Some(o) => vec![serde_json::to_value(o).unwrap_or(Json::Null)],
            None => Vec::new(),
        });
    }
    let mut lp = ListParams::default();
    if let Some(l) = selectors(a.get("label_selectors").or(a.get("label_selector"))) {
        lp = lp.labels(&l);
    }
    if let Some(f) = selectors(a.get("field_selectors").or(a.get("field_selector"))) {
        lp = lp.fields(&f);
    }
    let list = api.list(&lp).await.map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .map(|mut o| {
            // Items of a list carry no apiVersion/kind; the module adds them.
            o.types = Some(kube::api::TypeMeta {
                api_version: res.resource.api_version.clone(),
                kind: res.resource.kind.clone(),
            });
            serde_json::to_value(o).unwrap_or(Json::Null)
        })
        .collect())
}

/// The module: an API the server does not serve is not an error but `api_found: false`
/// (kubernetes.core's `K8sService.find`), which roles probing for optional APIs rely on.
pub async fn run(a: &Args, ctx: &RunContext) -> Result<Json, String> {
    let client = client(ctx)?;
    let kind = a
        .get("kind")
        .and_then(Json::as_str)
        .ok_or("kind is required")?;
    let api_version = api_version(a);
    let Some(res) = ctx.discovery.resolve_opt(client, api_version, kind).await? else {
        return Ok(json!({
            "changed": false,
            "resources": [],
            "api_found": false,
            "msg": format!("Failed to find API for resource with apiVersion \"{api_version}\" and kind \"{kind}\""),
        }));
    };
    let mut found = find_in(client, &res, a).await?;
    ctx.overlay_own_status(&mut found);
    let wait = a.get("wait").and_then(Json::as_bool).unwrap_or(false);
    if wait {
        let (timeout, sleep) = wait_params(a, ctx);
        let cond = a.get("wait_condition").filter(|c| c.is_object()).cloned();
        let start = Instant::now();
        while found.is_empty() || !found.iter().all(|o| ready(o, cond.as_ref())) {
            if start.elapsed() > timeout {
                return Err("Failed to gather information about the resource(s) in time".into());
            }
            tokio::time::sleep(sleep).await;
            found = find_in(client, &res, a).await?;
            ctx.overlay_own_status(&mut found);
        }
    }
    Ok(json!({"changed": false, "api_found": true, "resources": found}))
}
