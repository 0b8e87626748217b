//! `operator_sdk.util.k8s_status`: merges `status` keys and `conditions` (by type) into an
//! object's status. On the run's own CR the request is collected for the host's single
//! status write; on any other object it is PATCHed (`merge-patch` on `/status`) when it
//! changes something, as the module does.
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value as Json};

use super::{client, Effects};
use crate::engine::outcome_types::StatusRequest;
use crate::engine::RunContext;
use crate::kube_api::Discovery;

type Args = Map<String, Json>;

/// Validates and normalizes conditions as the module does (status True/False/Unknown; bools
/// become strings).
fn conditions(v: Option<&Json>, now: &str) -> Result<Vec<Json>, String> {
    let Some(Json::Array(items)) = v else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .map(|c| {
            let mut c = c
                .as_object()
                .cloned()
                .ok_or("each condition must be a mapping")?;
            if !c.contains_key("type") {
                return Err("each condition needs a type".to_string());
            }
            let status = match c.get("status") {
                Some(Json::Bool(true)) => "True".to_string(),
                Some(Json::Bool(false)) => "False".to_string(),
                Some(Json::String(s)) if ["True", "False", "Unknown"].contains(&s.as_str()) => {
                    s.clone()
                }
                Some(Json::String(s)) if s.eq_ignore_ascii_case("true") || s == "yes" => {
                    "True".into()
                }
                Some(Json::String(s)) if s.eq_ignore_ascii_case("false") || s == "no" => {
                    "False".into()
                }
                other => {
                    return Err(format!(
                        "condition status must be True, False or Unknown, got {}",
                        other.map(Json::to_string).unwrap_or_default()
                    ))
                }
            };
            c.insert("status".into(), json!(status));
            c.entry("lastTransitionTime").or_insert(json!(now));
            Ok(Json::Object(c))
        })
        .collect()
}

/// Merges conditions by type: a condition is replaced only when something other than its
/// `lastTransitionTime` changed, and keeps its time when its status did not change.
pub fn merge_conditions(current: &[Json], new: &[Json]) -> Vec<Json> {
    let mut out: Vec<Json> = current.to_vec();
    for c in new {
        match out.iter_mut().find(|x| x["type"] == c["type"]) {
            Some(slot) => {
                let strip = |v: &Json| {
                    let mut v = v.clone();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("lastTransitionTime");
                    }
                    v
                };
                if strip(slot) != strip(c) {
                    let mut c = c.clone();
                    if slot["status"] == c["status"] {
                        c["lastTransitionTime"] = slot["lastTransitionTime"].clone();
                    }
                    *slot = c;
                }
            }
            None => out.push(c.clone()),
        }
    }
    out
}

/// Applies a request to a status object.
pub fn apply(status: Option<&Json>, req: &StatusRequest) -> Json {
    let mut st = if req.replace {
        Map::new()
    } else {
        status
            .and_then(Json::as_object)
            .cloned()
            .unwrap_or_default()
    };
    for (k, v) in &req.status {
        st.insert(k.clone(), v.clone());
    }
    if !req.conditions.is_empty() {
        let cur = st
            .get("conditions")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        st.insert(
            "conditions".into(),
            Json::Array(merge_conditions(&cur, &req.conditions)),
        );
    }
    Json::Object(st)
}

/// Adds a later request to an earlier one.
pub fn merge_request(cur: &mut StatusRequest, next: StatusRequest) {
    if next.replace {
        *cur = next;
        return;
    }
    cur.status.extend(next.status);
    cur.conditions = merge_conditions(&cur.conditions, &next.conditions);
}

pub async fn run(a: &Args, ctx: &RunContext, fx: &mut Effects) -> Result<Json, String> {
    let now = crate::status::transition_time(chrono::Utc::now());
    let kind = a
        .get("kind")
        .and_then(Json::as_str)
        .ok_or("kind is required")?;
    let name = a
        .get("name")
        .and_then(Json::as_str)
        .ok_or("name is required")?;
    let api_version = a
        .get("api_version")
        .or(a.get("api"))
        .or(a.get("version"))
        .and_then(Json::as_str)
        .unwrap_or("v1");
    let ns = a
        .get("namespace")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty());
    let mut status = a
        .get("status")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    let mut conds = conditions(a.get("conditions"), &now)?;
    if let Some(Json::Array(_)) = status.get("conditions") {
        conds.extend(conditions(status.get("conditions"), &now)?);
        status.remove("conditions");
    }
    let replace = a
        .get("replace")
        .or(a.get("force"))
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let req = StatusRequest {
        status,
        conditions: conds,
        replace,
    };
    if let Some(owner) = ctx
        .owner
        .as_ref()
        .filter(|o| o.is(api_version, kind, name, ns))
    {
        let before = ctx.own_status_now().unwrap_or(json!({}));
        let after = apply(Some(&before), &req);
        let changed = after != before;
        fx.status = Some(req);
        let mut result = owner.object.clone();
        result["status"] = after;
        return Ok(json!({"changed": changed, "result": result}));
    }
    let client = client(ctx)?;
    let res = ctx.discovery.resolve(client, api_version, kind).await?;
    if !res.subresources.iter().any(|s| s == "status") {
        return Err(format!("{api_version}/{kind} has no status subresource"));
    }
    let api = Discovery::api(client, &res, ns);
    let obj = api.get(name).await.map_err(|e| e.to_string())?;
    let before = obj.data.get("status").cloned().unwrap_or(json!({}));
    let after = apply(Some(&before), &req);
    if after == before {
        return Ok(
            json!({"changed": false, "result": serde_json::to_value(&obj).unwrap_or(Json::Null)}),
        );
    }
    let updated = if replace {
        let mut o = obj.clone();
        o.data["status"] = after;
        api.replace_status(name, &PostParams::default(), &o)
            .await
            .map_err(|e| e.to_string())?
    } else {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": after})),
        )
        .await
        .map_err(|e| e.to_string())?
    };
    Ok(json!({"changed": true, "result": serde_json::to_value(&updated).unwrap_or(Json::Null)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_merge_by_type() {
        let cur = vec![
            json!({"type": "Ready", "status": "False", "reason": "A", "lastTransitionTime": "t0"}),
            json!({"type": "Custom", "status": "True", "lastTransitionTime": "t0"}),
        ];
        let same_but_time = vec![
            json!({"type": "Ready", "status": "False", "reason": "A", "lastTransitionTime": "t1"}),
        ];
        assert_eq!(merge_conditions(&cur, &same_but_time), cur);
        let new_reason = vec![
            json!({"type": "Ready", "status": "False", "reason": "B", "lastTransitionTime": "t1"}),
        ];
        assert_eq!(
            merge_conditions(&cur, &new_reason)[0]["lastTransitionTime"],
            "t0"
        );
        let flipped = vec![
            json!({"type": "Ready", "status": "True", "reason": "B", "lastTransitionTime": "t1"}),
        ];
        let m = merge_conditions(&cur, &flipped);
        assert_eq!(m[0]["lastTransitionTime"], "t1");
        assert_eq!(m[1]["type"], "Custom");
        let req = StatusRequest {
            status: json!({"phase": "x"})
                .as_object()
                .cloned()
                .expect("test value"),
            conditions: flipped,
            replace: false,
        };
        let st = apply(Some(&json!({"keep": 1, "conditions": cur})), &req);
        assert_eq!(st["keep"], 1);
        assert_eq!(st["phase"], "x");
    }
}
