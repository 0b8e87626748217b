//! `kubernetes.core.k8s` as version 5.4 behaves: definitions from `definition` (dict, list or
//! multi-document YAML text), `src` or `template`; GET, then POST (with ansible-operator's
//! owner reference), PATCH (strategic merge, falling back to merge, or the `merge_type`
//! list; not sent when it would change nothing, see [`super::noop`]), PUT with `force`, or
//! server-side apply; `changed` from the difference between the
//! object before and after, ignoring `metadata.generation`/`resourceVersion`; `wait`.
use std::sync::Arc;
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value as Json};

use super::{client, Effects};
use crate::engine::RunContext;
use crate::kube_api::{Discovery, Resolved};
use crate::template::{value, Scope};

type Args = Map<String, Json>;

fn s<'a>(a: &'a Args, k: &str) -> Option<&'a str> {
    a.get(k).and_then(Json::as_str)
}

fn truthy(a: &Args, k: &str) -> bool {
    a.get(k).is_some_and(|v| match v {
        Json::Bool(b) => *b,
        Json::String(s) => crate::template::filters::to_bool(&minijinja::Value::from(s.as_str())),
        Json::Number(n) => n.as_f64() == Some(1.0),
        _ => false,
    })
}

/// Parses YAML text (possibly several documents) into objects.
pub(crate) fn yaml_objects(text: &str) -> Result<Vec<Json>, String> {
    let docs = crate::yaml::load_all(text)
        .map_err(|e| format!("Failed to load resource definition: {e}"))?;
    Ok(docs
        .iter()
        .map(crate::yaml::NodeExt::to_json)
        .filter(|d| !d.is_null())
        .collect())
}

fn find_file(scope: &Arc<Scope>, sub: &str, name: &str) -> Result<String, String> {
    let p = std::path::Path::new(name);
    let mut cands = vec![];
    if p.is_absolute() {
        cands.push(p.to_path_buf());
    }
    for var in ["role_path", "playbook_dir"] {
        if let Some(base) = scope
            .raw(var)
            .and_then(|v| v.as_str().map(std::path::PathBuf::from))
        {
            cands.push(base.join(sub).join(name));
            cands.push(base.join(name));
        }
    }
    let path = cands
        .into_iter()
        .find(|c| c.is_file())
        .ok_or_else(|| format!("Could not find or access '{name}'"))?;
    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The objects the task names.
fn definitions(a: &Args, scope: &Arc<Scope>) -> Result<Vec<Json>, String> {
    let mut defs = Vec::new();
    let def = a
        .get("definition")
        .or(a.get("resource_definition"))
        .filter(|d| !d.is_null());
    if let Some(d) = def {
        match d {
            Json::String(text) => defs.extend(yaml_objects(text)?),
            Json::Array(items) => defs.extend(items.iter().cloned()),
            Json::Object(_) => defs.push(d.clone()),
            _ => return Err("definition must be a dict, a list or YAML text".into()),
        }
    } else if let Some(src) = s(a, "src") {
        defs.extend(yaml_objects(&find_file(scope, "files", src)?)?);
    } else if let Some(t) = a.get("template").filter(|t| !t.is_null()) {
        let paths: Vec<String> = match t {
            Json::String(p) => vec![p.clone()],
            Json::Object(o) => vec![o
                .get("path")
                .and_then(Json::as_str)
                .ok_or("template needs a path")?
                .to_string()],
            Json::Array(items) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(String::from)
                        .or_else(|| i.get("path").and_then(Json::as_str).map(String::from))
                        .ok_or("template needs a path")
                })
                .collect::<Result<_, _>>()?,
            _ => return Err("template must be a path".into()),
        };
        for p in paths {
            let src = find_file(scope, "templates", &p)?;
            let text = scope
                .templar()
                .render_text(&src, scope)
                .map_err(|e| format!("{p}: {e}"))?;
            defs.extend(yaml_objects(&text)?);
        }
    } else {
        defs.push(json!({}));
    }
    // Parameters fill in what a definition leaves out; List kinds are flattened.
    let mut out = Vec::new();
    for mut d in defs {
        let Some(o) = d.as_object_mut() else {
            return Err("a resource definition must be a mapping".into());
        };
        if let Some(k) = s(a, "kind") {
            o.entry("kind").or_insert(json!(k));
        }
        if let Some(v) = s(a, "api_version").or(s(a, "api")).or(s(a, "version")) {
            o.entry("apiVersion").or_insert(json!(v));
        }
        o.entry("apiVersion").or_insert(json!("v1"));
        let meta = o.entry("metadata").or_insert(json!({}));
        if let Some(m) = meta.as_object_mut() {
            if let Some(n) = s(a, "name") {
                m.entry("name").or_insert(json!(n));
            }
            if let Some(ns) = s(a, "namespace") {
                m.entry("namespace").or_insert(json!(ns));
            }
            if let Some(g) = s(a, "generate_name") {
                m.entry("generateName").or_insert(json!(g));
            }
        }
        let is_list = d
            .get("kind")
            .and_then(Json::as_str)
            .is_some_and(|k| k.ends_with("List"))
            && d.get("items").is_some();
        if is_list {
            for item in d["items"].as_array().cloned().unwrap_or_default() {
                out.push(item);
            }
        } else {
            out.push(d);
        }
    }
    Ok(out)
}

pub async fn run(
    a: &Args,
    scope: &Arc<Scope>,
    ctx: &RunContext,
    fx: &mut Effects,
) -> Result<Json, String> {
    let defs = definitions(a, scope)?;
    let mut results = Vec::new();
    let mut changed = false;
    for d in defs {
        let r = match one(a, d, ctx, fx).await {
            Ok(r) => r,
            Err(e) if truthy(a, "continue_on_error") => {
                json!({"changed": false, "result": {}, "error": {"msg": e}})
            }
            Err(e) => return Err(e),
        };
        changed |= r["changed"].as_bool().unwrap_or(false);
        results.push(r);
    }
    if results.len() == 1 {
        return Ok(results.remove(0));
    }
    Ok(json!({"changed": changed, "result": {"results": results}}))
}

fn to_dynamic(obj: &Json) -> Result<DynamicObject, String> {
    serde_json::from_value(obj.clone()).map_err(|e| format!("invalid resource definition: {e}"))
}

fn to_json(obj: &DynamicObject) -> Json {
    serde_json::to_value(obj).unwrap_or(Json::Null)
}

/// Equal, or differing only in `metadata.generation`/`metadata.resourceVersion`.
pub(crate) fn same_object(a: &Json, b: &Json) -> bool {
    let strip = |v: &Json| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Json::as_object_mut) {
            m.remove("generation");
            m.remove("resourceVersion");
        }
        v
    };
    a == b || strip(a) == strip(b)
}

fn kube_msg(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({}): {}", s.reason, s.code, s.message),
        other => other.to_string(),
    }
}

async fn one(a: &Args, d: Json, ctx: &RunContext, fx: &mut Effects) -> Result<Json, String> {
    one_with(a, d, ctx, fx, ctx.cache.is_some()).await
}

/// One object; `cached`: whether the host's cache may stand in for the read before a create
/// (see [`crate::engine::ObjectCache`]).
async fn one_with(
    a: &Args,
    mut d: Json,
    ctx: &RunContext,
    fx: &mut Effects,
    cached: bool,
) -> Result<Json, String> {
    let client = client(ctx)?;
    let api_version = d["apiVersion"].as_str().unwrap_or("v1").to_string();
    let kind = d["kind"]
        .as_str()
        .ok_or("Error: resource definition has no kind")?
        .to_string();
    let res: Resolved = ctx.discovery.resolve(client, &api_version, &kind).await?;
    let name = d
        .pointer("/metadata/name")
        .and_then(Json::as_str)
        .map(String::from);
    let ns = d
        .pointer("/metadata/namespace")
        .and_then(Json::as_str)
        .map(String::from);
    if res.namespaced && ns.is_none() {
        return Err(format!("Namespace is required for {api_version}.{kind}"));
    }
    let api = Discovery::api(client, &res, ns.as_deref());
    let state = s(a, "state").unwrap_or("present");
    // server_side_apply only counts with apply: true, as in the collection.
    let apply = truthy(a, "apply");
    let ssa = a
        .get("server_side_apply")
        .filter(|v| v.is_object() && apply);
    // A create (or a client-side apply's create) of an object the cache certainly lacks
    // skips the read; the original, unmodified definition is kept to start over with a read
    // should the create find the object there after all.
    let skipped = match (&name, &ctx.cache) {
        (Some(n), Some(c)) if cached && state != "absent" && ssa.is_none() => c
            .known_absent(&api_version, &kind, ns.as_deref(), n)
            .await
            .then(|| d.clone()),
        _ => None,
    };
    let existing = match &name {
        Some(_) if skipped.is_some() => None,
        Some(n) => api
            .get_opt(n)
            .await
            .map_err(|e| format!("Failed to retrieve requested object: {}", kube_msg(e)))?,
        None => None,
    };
    if state == "absent" {
        let Some(n) = name else {
            return Err("name is required to delete a resource".into());
        };
        let Some(_) = existing else {
            return Ok(json!({"changed": false, "method": "delete", "result": {}}));
        };
        let opts = a.get("delete_options").cloned().unwrap_or(json!({}));
        let mut dp = DeleteParams::default();
        if let Some(p) = opts.get("propagationPolicy").and_then(Json::as_str) {
            dp.propagation_policy = match p {
                "Foreground" => Some(kube::api::PropagationPolicy::Foreground),
                "Background" => Some(kube::api::PropagationPolicy::Background),
                "Orphan" => Some(kube::api::PropagationPolicy::Orphan),
                other => return Err(format!("unknown propagationPolicy {other}")),
            };
        }
        dp.grace_period_seconds = opts
            .get("gracePeriodSeconds")
            .and_then(Json::as_u64)
            .map(|g| g as u32);
        let r = api
            .delete(&n, &dp)
            .await
            .map_err(|e| format!("Failed to delete object: {}", kube_msg(e)))?;
        let result = r.either(
            |o| to_json(&o),
            |st| {
                let mut j = serde_json::to_value(st).unwrap_or(Json::Null);
                if let Some(o) = j.as_object_mut() {
                    o.insert("kind".into(), json!("Status"));
                    o.insert("apiVersion".into(), json!("v1"));
                }
                j
            },
        );
        if truthy(a, "wait") {
            let (timeout, sleep) = wait_params(a, ctx);
            let start = std::time::Instant::now();
            while api.get_opt(&n).await.map_err(kube_msg)?.is_some() {
                if start.elapsed() > timeout {
                    return Err(format!("\"{kind}\" \"{n}\": Timed out waiting on resource"));
                }
                tokio::time::sleep(sleep).await;
            }
        }
        return Ok(json!({"changed": true, "method": "delete", "result": result}));
    }
    let (method, after) = if let Some(ssa) = ssa {
        let n = name
            .clone()
            .ok_or("name is required for server-side apply")?;
        let manager = ssa
            .get("field_manager")
            .and_then(Json::as_str)
            .unwrap_or("ansible-operator");
        let mut pp = PatchParams::apply(manager);
        if ssa
            .get("force_conflicts")
            .and_then(Json::as_bool)
            .unwrap_or(false)
        {
            pp = pp.force();
        }
        if let Some(o) = &ctx.owner {
            match existing.as_ref().map(to_json) {
                None => o.inject(&mut d, res.namespaced),
                // What the create applied is applied again: an apply without a field this
                // manager applied before removes it (the owner reference, the shard label).
                Some(live) if o.owns(&live) => o.inject(&mut d, res.namespaced),
                Some(_) => {}
            }
        }
        // What the API server would store is what it holds: nothing is sent (see noop.rs).
        let merge = super::noop::Merge::of(&["strategic-merge".into()], &api_version)
            .unwrap_or(super::noop::Merge::Json);
        let in_place = existing
            .as_ref()
            .filter(|ex| super::noop::applied_in_place(&d, &to_json(ex), manager, merge));
        let r = match in_place {
            Some(live) => live.clone(),
            None => api
                .patch(&n, &pp, &Patch::Apply(&d))
                .await
                .map_err(|e| format!("Failed to apply object: {}", kube_msg(e)))?,
        };
        ("apply", r)
    } else if apply {
        let n = name.clone().ok_or("name is required to apply")?;
        match &existing {
            None => {
                let mut desired = super::apply::dict_merge(&d, &super::apply::annotate(&d)?);
                if let Some(o) = &ctx.owner {
                    o.inject(&mut desired, res.namespaced);
                }
                match api
                    .create(&PostParams::default(), &to_dynamic(&desired)?)
                    .await
                {
                    Ok(r) => ("apply", r),
                    Err(kube::Error::Api(st)) if st.code == 409 && skipped.is_some() => {
                        let d = skipped.unwrap_or_default();
                        return Box::pin(one_with(a, d, ctx, fx, false)).await;
                    }
                    Err(e) => return Err(format!("Failed to apply object: {}", kube_msg(e))),
                }
            }
            Some(ex) => match with_labels(
                super::apply::patch_for(&to_json(ex), &d)?,
                ctx,
                &to_json(ex),
            ) {
                None => ("apply", ex.clone()),
                Some(p) => {
                    let r = api
                        .patch(&n, &PatchParams::default(), &Patch::Merge(p))
                        .await
                        .map_err(|e| format!("Failed to apply object: {}", kube_msg(e)))?;
                    ("apply", r)
                }
            },
        }
    } else if existing.is_none() {
        if let Some(o) = &ctx.owner {
            o.inject(&mut d, res.namespaced);
        }
        match api.create(&PostParams::default(), &to_dynamic(&d)?).await {
            Ok(r) => ("create", r),
            // The cache had not shown it yet: read it, as kubernetes.core would have.
            Err(kube::Error::Api(st)) if st.code == 409 && skipped.is_some() => {
                let d = skipped.unwrap_or_default();
                return Box::pin(one_with(a, d, ctx, fx, false)).await;
            }
            // Not found a moment ago, there now (another run, another writer):
            // kubernetes.core warns and reports the create as done, with an empty result.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let n = name.clone().unwrap_or_default();
                let warning = format!("{n} was not found, but creating it returned a 409 Conflict error. This can happen                         if the resource you are creating does not directly create a resource of the same kind.");
                tracing::warn!(kind = %kind, name = %n, "{warning}");
                fx.touched.push((api_version, kind));
                return Ok(
                    json!({"changed": true, "method": "create", "result": {}, "warnings": [warning]}),
                );
            }
            Err(e) => return Err(format!("Failed to create object: {}", kube_msg(e))),
        }
    } else if truthy(a, "force") {
        let n = name.clone().unwrap_or_default();
        if let (Some(m), Some(rv)) = (
            d.get_mut("metadata").and_then(Json::as_object_mut),
            existing
                .as_ref()
                .and_then(|e| e.metadata.resource_version.clone()),
        ) {
            m.entry("resourceVersion").or_insert(json!(rv));
        }
        if let (Some(o), Some(ex)) = (&ctx.owner, &existing) {
            o.label_update(&mut d, &to_json(ex));
        }
        let r = api
            .replace(&n, &PostParams::default(), &to_dynamic(&d)?)
            .await
            .map_err(|e| format!("Failed to replace object: {}", kube_msg(e)))?;
        ("replace", r)
    } else {
        let n = name.clone().unwrap_or_default();
        let types: Vec<String> = match a.get("merge_type") {
            Some(Json::String(t)) => vec![t.clone()],
            Some(Json::Array(ts)) => ts
                .iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect(),
            _ => vec!["strategic-merge".into(), "merge".into()],
        };
        let live = existing.as_ref().map(to_json).unwrap_or(Json::Null);
        if let Some(o) = &ctx.owner {
            match (types.as_slice(), d.as_array_mut()) {
                ([t], Some(ops)) if t == "json" => ops.extend(o.label_ops(&live)),
                _ => {
                    o.label_update(&mut d, &live);
                }
            }
        }
        let noop = super::noop::Merge::of(&types, &api_version)
            .is_some_and(|m| super::noop::contained(&d, &live, m));
        let mut last = String::new();
        let mut done = if noop { existing.clone() } else { None };
        let to_send = if noop { &types[..0] } else { &types[..] };
        for t in to_send {
            let patch = match t.as_str() {
                "strategic-merge" => Patch::Strategic(d.clone()),
                "merge" => Patch::Merge(d.clone()),
                "json" => Patch::Json::<Json>(
                    serde_json::from_value(d.clone()).map_err(|e| format!("json patch: {e}"))?,
                ),
                other => return Err(format!("unknown merge_type {other}")),
            };
            match api.patch(&n, &PatchParams::default(), &patch).await {
                Ok(r) => {
                    done = Some(r);
                    break;
                }
                Err(e) => last = format!("Failed to patch object: {}", kube_msg(e)),
            }
        }
        ("update", done.ok_or(last)?)
    };
    let mut after_json = to_json(&after);
    let mut result = json!({"method": method});
    if truthy(a, "wait") {
        let (timeout, sleep) = wait_params(a, ctx);
        let start = std::time::Instant::now();
        let cond = a.get("wait_condition").filter(|c| c.is_object()).cloned();
        loop {
            if ready(&after_json, cond.as_ref()) {
                break;
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "\"{kind}\" \"{}\": Timed out waiting on resource",
                    name.unwrap_or_default()
                ));
            }
            tokio::time::sleep(sleep).await;
            if let Some(o) = api
                .get_opt(after.metadata.name.as_deref().unwrap_or_default())
                .await
                .map_err(kube_msg)?
            {
                after_json = to_json(&o);
            }
        }
        result["duration"] = json!(start.elapsed().as_secs());
    }
    let changed = match method {
        "create" => true,
        _ => !same_object(
            &existing.as_ref().map(to_json).unwrap_or(json!({})),
            &after_json,
        ),
    };
    // Every kind the role manages, changed or not: after a restart the first (unchanged)
    // run must still set up the dependent watches.
    fx.touched.push((api_version, kind));
    result["changed"] = json!(changed);
    result["result"] = after_json;
    Ok(result)
}

/// A client-side apply's patch with the child labels the live object lacks
/// ([`crate::Owner::missing_labels`]) added: they stay out of the last-applied annotation,
/// which records what the role applied.
fn with_labels(patch: Option<Json>, ctx: &RunContext, live: &Json) -> Option<Json> {
    let Some(o) = &ctx.owner else {
        return patch;
    };
    let mut p = match patch {
        Some(p) => p,
        None if o.missing_labels(live).is_some() => json!({}),
        None => return None,
    };
    o.label_update(&mut p, live);
    Some(p)
}

pub(crate) fn wait_params(a: &Args, ctx: &RunContext) -> (Duration, Duration) {
    let num = |k: &str, d: u64| {
        a.get(k)
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(d)
    };
    let timeout = Duration::from_secs(num("wait_timeout", 120)).min(ctx.remaining());
    let sleep = Duration::from_secs(num("wait_sleep", 5).max(1));
    (timeout, sleep)
}

/// kubernetes.core's readiness: the condition asked for, or the kind's own notion of ready.
pub(crate) fn ready(obj: &Json, cond: Option<&Json>) -> bool {
    let conds = obj
        .pointer("/status/conditions")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(c) = cond {
        let ty = c.get("type").and_then(Json::as_str).unwrap_or_default();
        let want = c
            .get("status")
            .map(|s| value::py_str(&value::from_json(s)))
            .unwrap_or_else(|| "True".into());
        let reason = c.get("reason").and_then(Json::as_str);
        return conds.iter().any(|x| {
            x["type"] == ty
                && x["status"].as_str() == Some(want.as_str())
                && reason.is_none_or(|r| x["reason"].as_str() == Some(r))
        });
    }
    let st = &obj["status"];
    let n = |p: &str| obj.pointer(p).and_then(Json::as_i64);
    match obj["kind"].as_str().unwrap_or_default() {
        "Deployment" => {
            let want = n("/spec/replicas").unwrap_or(1);
            n("/status/observedGeneration") >= n("/metadata/generation")
                && st["updatedReplicas"].as_i64().unwrap_or(0) == want
                && st["availableReplicas"].as_i64().unwrap_or(0) == want
                && st["replicas"].as_i64().unwrap_or(0) == want
        }
        "StatefulSet" => {
            st["readyReplicas"].as_i64().unwrap_or(0) == n("/spec/replicas").unwrap_or(1)
        }
        "DaemonSet" => {
            st["numberReady"].as_i64() == st["desiredNumberScheduled"].as_i64()
                && st["desiredNumberScheduled"].is_i64()
        }
        "Pod" => conds
            .iter()
            .any(|x| x["type"] == "Ready" && x["status"] == "True"),
        _ => true,
    }
}
