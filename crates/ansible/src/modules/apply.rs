//! `k8s` with `apply: true`: kubernetes.core's client-side apply. The desired object carries
//! the `kubectl.kubernetes.io/last-applied-configuration` annotation (compact, sorted JSON);
//! an existing object is sent a merge patch made of the deletions from the last applied
//! configuration to the desired one plus the delta from the live object to the desired one,
//! lists being merged by key where Kubernetes' strategic-merge keys say so (containers by
//! name, ports by port, ...), as the collection's `apply.py` computes it.
use serde_json::{json, Map, Value as Json};

use crate::template::pyjson::{dumps, JsonOpts};
use crate::template::value::from_json;

pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

const POD_SPEC_SUFFIXES: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("volumes", "name"),
    ("imagePullSecrets", "name"),
    ("containers.volumeMounts", "mountPath"),
    ("containers.volumeDevices", "devicePath"),
    ("containers.env", "name"),
    ("containers.ports", "containerPort"),
    ("initContainers.volumeMounts", "mountPath"),
    ("initContainers.volumeDevices", "devicePath"),
    ("initContainers.env", "name"),
    ("initContainers.ports", "containerPort"),
    ("ephemeralContainers.volumeMounts", "mountPath"),
    ("ephemeralContainers.volumeDevices", "devicePath"),
    ("ephemeralContainers.env", "name"),
    ("ephemeralContainers.ports", "containerPort"),
];

const POD_SPEC_PREFIXES: &[&str] = &[
    "Pod.spec",
    "Deployment.spec.template.spec",
    "DaemonSet.spec.template.spec",
    "StatefulSet.spec.template.spec",
    "Job.spec.template.spec",
    "Cronjob.spec.jobTemplate.spec.template.spec",
];

/// The strategic-merge key of the list at `position` (`Kind.path.to.list`).
fn merge_key(position: &str) -> Option<&'static str> {
    match position {
        "Service.spec.ports" => return Some("port"),
        "ServiceAccount.secrets"
        | "ValidatingWebhookConfiguration.webhooks"
        | "MutatingWebhookConfiguration.webhooks" => return Some("name"),
        _ => {}
    }
    POD_SPEC_PREFIXES.iter().find_map(|p| {
        let rest = position.strip_prefix(p)?.strip_prefix('.')?;
        POD_SPEC_SUFFIXES
            .iter()
            .find(|(s, _)| *s == rest)
            .map(|(_, k)| *k)
    })
}

/// Ansible's `dict_merge`: `b` over `a`, dicts merged recursively.
pub fn dict_merge(a: &Json, b: &Json) -> Json {
    let (Some(am), Some(bm)) = (a.as_object(), b.as_object()) else {
        return b.clone();
    };
    let mut out = am.clone();
    for (k, v) in bm {
        let merged = match out.get(k) {
            Some(cur) if cur.is_object() && v.is_object() => dict_merge(cur, v),
            _ => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Json::Object(out)
}

/// The annotation carrying `desired`, as `json.dumps(desired, separators=(",", ":"), sort_keys=True)`.
pub fn annotate(desired: &Json) -> Result<Json, String> {
    let opts = JsonOpts {
        indent: None,
        sort_keys: true,
        ensure_ascii: true,
        item_sep: ",".into(),
        key_sep: ":".into(),
    };
    let text = dumps(&from_json(desired), &opts)?;
    Ok(json!({"metadata": {"annotations": {LAST_APPLIED: text}}}))
}

/// What to send: `None` when the live object already matches (no request), otherwise the
/// merge patch.
pub fn patch_for(actual: &Json, desired: &Json) -> Result<Option<Json>, String> {
    let last = actual
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Json::as_str);
    let desired_annotated = dict_merge(desired, &annotate(desired)?);
    let Some(last) = last else {
        return Ok(Some(desired_annotated));
    };
    let last: Json =
        serde_json::from_str(last).map_err(|e| format!("invalid {LAST_APPLIED}: {e}"))?;
    let last_annotated = dict_merge(&last, &annotate(&last)?);
    let kind = desired_annotated
        .get("kind")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let patch = merge(&last_annotated, &desired_annotated, actual, &kind)?;
    Ok(if patch.as_object().is_some_and(Map::is_empty) {
        None
    } else {
        Some(patch)
    })
}

fn merge(last: &Json, desired: &Json, actual: &Json, position: &str) -> Result<Json, String> {
    let deletions = deletions(last, desired);
    let delta = delta(last, actual, desired, position)?;
    Ok(dict_merge(&deletions, &delta))
}

fn deletions(last: &Json, desired: &Json) -> Json {
    let mut patch = Map::new();
    for (k, lv) in last.as_object().into_iter().flatten() {
        let dv = desired.get(k).cloned().unwrap_or(Json::Null);
        if lv.is_object() && dv.is_object() {
            let p = deletions(lv, &dv);
            if p.as_object().is_some_and(|m| !m.is_empty()) {
                patch.insert(k.clone(), p);
            }
        } else if *lv != dv {
            patch.insert(k.clone(), dv);
        }
    }
    Json::Object(patch)
}

fn delta(last: &Json, actual: &Json, desired: &Json, position: &str) -> Result<Json, String> {
    let mut patch = Map::new();
    for (k, dv) in desired.as_object().into_iter().flatten() {
        let pos = format!("{position}.{k}");
        let av = actual.get(k).filter(|v| !v.is_null());
        match (av, dv) {
            (None, _) => {
                patch.insert(k.clone(), dv.clone());
            }
            (Some(av), Json::Object(_)) => {
                let p = delta(last.get(k).unwrap_or(&json!({})), av, dv, &pos)?;
                if p.as_object().is_some_and(|m| !m.is_empty()) {
                    patch.insert(k.clone(), p);
                }
            }
            (Some(av), Json::Array(d)) => {
                let empty = vec![];
                let l = last.get(k).and_then(Json::as_array).unwrap_or(&empty);
                let a = av.as_array().cloned().unwrap_or_default();
                let p = list_merge(l, &a, d, &pos)?;
                if !p.is_empty() {
                    patch.insert(
                        k.clone(),
                        Json::Array(p.into_iter().filter(|i| !i.is_null()).collect()),
                    );
                }
            }
            (Some(av), _) if av != dv => {
                patch.insert(k.clone(), dv.clone());
            }
            _ => {}
        }
    }
    Ok(Json::Object(patch))
}

fn by_key<'a>(
    list: &'a [Json],
    key: &str,
    position: &str,
) -> Result<Vec<(&'a Json, &'a Json)>, String> {
    list.iter()
        .map(|item| {
            item.get(key)
                .map(|k| (k, item))
                .ok_or_else(|| format!("Expected key '{key}' not found in position {position}"))
        })
        .collect()
}

fn list_merge(
    last: &[Json],
    actual: &[Json],
    desired: &[Json],
    position: &str,
) -> Result<Vec<Json>, String> {
    let Some(key) = merge_key(position).filter(|_| !last.is_empty()) else {
        return Ok(desired.to_vec());
    };
    let (l, a, d) = (
        by_key(last, key, position)?,
        by_key(actual, key, position)?,
        by_key(desired, key, position)?,
    );
    let find =
        |v: &[(&Json, &Json)], k: &Json| v.iter().find(|(x, _)| *x == k).map(|(_, i)| (*i).clone());
    let mut out = Vec::new();
    for (k, dv) in &d {
        match (find(&a, k), find(&l, k)) {
            (Some(av), Some(lv)) => {
                let p = merge(&lv, dv, &av, position)?;
                out.push(dict_merge(&av, &p));
            }
            _ => out.push((*dv).clone()),
        }
    }
    for (k, av) in &a {
        if find(&d, k).is_none() && find(&l, k).is_none() {
            out.push((*av).clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_way_patch() {
        let last = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1", "gone": "2"}});
        let mut actual = dict_merge(&last, &annotate(&last).expect("annotate"));
        actual["data"]["server"] = json!("kept");
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "3"}});
        let p = patch_for(&actual, &desired).expect("patch").expect("some");
        assert_eq!(p["data"], json!({"gone": null, "x": "3"}));
        assert_eq!(
            p["metadata"]["annotations"][LAST_APPLIED],
            r#"{"apiVersion":"v1","data":{"x":"3"},"kind":"ConfigMap","metadata":{"name":"a"}}"#
        );
        assert_eq!(
            patch_for(&actual, &last).expect("patch"),
            None,
            "nothing to do"
        );
    }

    #[test]
    fn containers_merge_by_name() {
        let c = |img: &str| json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "a", "image": img}]}}}});
        let last = c("x:1");
        let mut actual = dict_merge(&last, &annotate(&last).expect("annotate"));
        actual["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
            json!("/dev/t");
        let p = patch_for(&actual, &c("x:2")).expect("patch").expect("some");
        assert_eq!(
            p["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "x:2", "terminationMessagePath": "/dev/t"}])
        );
    }
}
