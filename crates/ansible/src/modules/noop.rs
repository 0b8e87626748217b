//! Whether a `k8s` PATCH would change nothing, so that it need not be sent.
//!
//! kubernetes.core PATCHes every existing object on every run; the API server then stores
//! nothing when the patch is a no-op, and the module reports `changed: false` because the
//! object it gets back equals the one it read. bosun reads the same object first, and when the
//! definition is already contained in it the result of the PATCH is known — the object as
//! read — so the request is skipped and `changed` stays what Ansible reports. A steady
//! reconcile then sends no write at all.
//!
//! "Contained" is decided conservatively; anything it cannot be sure of sends the PATCH:
//! * a mapping is contained when each of its keys is in the live mapping with a contained
//!   value (`null` also matches an absent key: the patch would delete nothing);
//! * strategic merge (built-in kinds): a list is contained when it has the live list's
//!   length and each item is contained in the live item at the same position — the live
//!   items carry the server's defaults (a container's `terminationMessagePath`, a port's
//!   `protocol`), which a patch leaves alone;
//! * JSON merge (custom resources, or `merge_type: merge`): a patch replaces lists whole,
//!   so a list must equal the live one;
//! * keys starting with `$` (strategic-merge directives) and any `json` patch are sent;
//! * scalars are equal as JSON (`1` and `1.0` differ: the PATCH is sent).
//!
//! One case differs from sending the PATCH: a field inside an item of a list that Kubernetes
//! replaces whole under strategic merge (`args`, `tolerations`), added by someone else, is
//! kept where the PATCH would have removed it — bosun cannot tell such a field from a
//! server default without the kind's schema.
use serde_json::Value as Json;

/// How the API server will merge the patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    Strategic,
    Json,
}

impl Merge {
    /// The merge the first of the task's `merge_type`s gets for `api_version`: strategic
    /// merge only where Kubernetes serves it (built-in groups); None for a JSON patch.
    pub fn of(types: &[String], api_version: &str) -> Option<Merge> {
        match types.first().map(String::as_str) {
            Some("strategic-merge") if builtin_group(api_version) => Some(Merge::Strategic),
            // A custom resource refuses strategic merge; the module falls back to `merge`.
            Some("strategic-merge") if types.iter().any(|t| t == "merge") => Some(Merge::Json),
            Some("merge") => Some(Merge::Json),
            _ => None,
        }
    }
}

/// Kubernetes' own groups: the core group, the dotless ones (`apps`, `batch`, `policy`,
/// `autoscaling`) and `*.k8s.io`. Aggregated and custom groups have dots elsewhere.
fn builtin_group(api_version: &str) -> bool {
    match api_version.split_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

/// True when patching `live` with `desired` under `merge` would leave it as it is.
pub fn contained(desired: &Json, live: &Json, merge: Merge) -> bool {
    contained_at(desired, live, merge, 0)
}

/// Deeper than serde_json's parser goes: such a value did not come from the API server, so
/// "not contained" (the PATCH is sent) rather than a deep recursion.
const MAX_DEPTH: usize = 128;

fn contained_at(desired: &Json, live: &Json, merge: Merge, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match (desired, live) {
        (Json::Object(d), Json::Object(l)) => d.iter().all(|(k, v)| {
            !k.starts_with('$')
                && match l.get(k) {
                    Some(lv) => contained_at(v, lv, merge, depth + 1),
                    None => v.is_null(),
                }
        }),
        (Json::Array(d), Json::Array(l)) => match merge {
            Merge::Json => d == l,
            Merge::Strategic => {
                d.len() == l.len()
                    && d.iter()
                        .zip(l)
                        .all(|(a, b)| contained_at(a, b, merge, depth + 1))
            }
        },
        _ => desired == live,
    }
}

/// Whether a server-side apply of `desired` by `manager` would leave `live` (with its
/// `managedFields`) as it is, so that it need not be sent: the manager applied before (an
/// `Apply` entry), every field its last apply set is still in `desired` (else the apply
/// removes it), and `desired` is contained in `live` (see [`contained`]; `merge` as the kind
/// merges lists). A field of `desired` that another writer holds with the same value is then
/// not taken into the manager's set: the one thing the skipped apply would have changed, and
/// what a sharded member's relabel of a child leaves (the label written as an `Update` under
/// the manager's name, with the value `desired` carries) — so a move costs one write, not a
/// second one to take the label back.
pub fn applied_in_place(desired: &Json, live: &Json, manager: &str, merge: Merge) -> bool {
    let applied = live
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .find(|e| {
            e.get("manager").and_then(Json::as_str) == Some(manager)
                && e.get("operation").and_then(Json::as_str) == Some("Apply")
                && e.get("subresource")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .is_empty()
        });
    let Some(fields) = applied.and_then(|e| e.get("fieldsV1")) else {
        return false;
    };
    covers(fields, desired, 0) && contained(desired, live, merge)
}

/// Whether every field of the `fieldsV1` set `fields` is in `desired`: `f:<name>` a key,
/// `k:<key fields>` the list item with those fields (those it has), `v:<value>` that list value, `i:<n>`
/// that index; anything else is not known to be there.
fn covers(fields: &Json, desired: &Json, depth: usize) -> bool {
    let Some(fields) = fields.as_object() else {
        return false;
    };
    if depth > MAX_DEPTH {
        return false;
    }
    fields.iter().all(|(k, sub)| {
        if k == "." {
            return true;
        }
        let at = if let Some(name) = k.strip_prefix("f:") {
            desired.get(name)
        } else if let Some(key) = k.strip_prefix("k:") {
            serde_json::from_str::<Json>(key).ok().and_then(|key| {
                let key = key.as_object()?.clone();
                // A key field the definition leaves out is one the server defaults (a
                // port's `protocol`).
                desired.as_array()?.iter().find(|item| {
                    key.iter()
                        .all(|(f, v)| item.get(f).is_none_or(|i| same_scalar(i, v)))
                })
            })
        } else if let Some(value) = k.strip_prefix("v:") {
            serde_json::from_str::<Json>(value)
                .ok()
                .and_then(|v| desired.as_array()?.iter().find(|i| same_scalar(i, &v)))
        } else if let Some(i) = k.strip_prefix("i:") {
            i.parse::<usize>()
                .ok()
                .and_then(|i| desired.as_array()?.get(i))
        } else {
            None
        };
        at.is_some_and(|at| covers(sub, at, depth + 1))
    })
}

/// Equal as the API server compares keys and set values: numbers by value (`80` and `80.0`).
fn same_scalar(a: &Json, b: &Json) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live() -> Json {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "7",
                            "labels": {"x": "1"}},
               "spec": {"replicas": 1, "template": {"spec": {"containers": [
                   {"name": "c", "image": "i:1", "imagePullPolicy": "Always",
                    "terminationMessagePath": "/dev/termination-log",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
               "status": {"replicas": 1}})
    }

    #[test]
    fn a_definition_inside_the_live_object_needs_no_patch() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "a", "namespace": "n"},
                       "spec": {"replicas": 1, "template": {"spec": {"containers": [
                           {"name": "c", "image": "i:1", "imagePullPolicy": "Always",
                            "ports": [{"containerPort": 80}]}]}}}});
        assert!(contained(&d, &live(), Merge::Strategic));
        // Under JSON merge the container list would be replaced by the shorter items.
        assert!(!contained(&d, &live(), Merge::Json));
    }

    #[test]
    fn any_difference_sends_the_patch() {
        let cases = [
            json!({"spec": {"replicas": 2}}),
            json!({"spec": {"replicas": 1.0}}),
            json!({"spec": {"replicas": "1"}}),
            json!({"metadata": {"annotations": {}}}),
            json!({"metadata": {"labels": {"x": "1", "y": "2"}}}),
            json!({"metadata": {"labels": {"x": null}}}),
            json!({"spec": {"template": {"spec": {"containers": []}}}}),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}, {"name": "d"}]}}}}),
            json!({"spec": {"$patch": "replace"}}),
            json!({"spec": {"paused": false}}),
        ];
        for d in cases {
            assert!(!contained(&d, &live(), Merge::Strategic), "{d}");
        }
        assert!(contained(
            &json!({"metadata": {"annotations": null}}),
            &live(),
            Merge::Strategic
        ));
    }

    #[test]
    fn the_merge_follows_the_kind_and_the_merge_types() {
        let default = vec!["strategic-merge".to_string(), "merge".to_string()];
        assert_eq!(Merge::of(&default, "v1"), Some(Merge::Strategic));
        assert_eq!(Merge::of(&default, "apps/v1"), Some(Merge::Strategic));
        assert_eq!(
            Merge::of(&default, "networking.k8s.io/v1"),
            Some(Merge::Strategic)
        );
        assert_eq!(
            Merge::of(&default, "charts.example.com/v1"),
            Some(Merge::Json)
        );
        assert_eq!(Merge::of(&["json".into()], "v1"), None);
        assert_eq!(
            Merge::of(&["strategic-merge".into()], "charts.example.com/v1"),
            None
        );
        assert_eq!(Merge::of(&["merge".into()], "apps/v1"), Some(Merge::Json));
    }

    #[test]
    fn hostile_nesting_is_answered_without_recursion_limits() {
        let deep = (0..500).fold(json!(1), |acc, _| json!({ "a": acc }));
        assert!(!contained(&deep, &deep, Merge::Json));
    }

    /// A Service a role applied under `role`, then relabelled by a sharded member under
    /// `role`'s name (an `Update`).
    fn applied_service() -> Json {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "s", "namespace": "n",
                            "labels": {"shard.bosun.dev/op": "r2"},
                            "managedFields": [
                   {"manager": "role", "operation": "Apply", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {
                        "f:metadata": {"f:ownerReferences": {"k:{\"uid\":\"u\"}": {}}},
                        "f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:port": {}, "f:targetPort": {}}},
                                   "f:selector": {}}}},
                   {"manager": "role", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {
                        "f:metadata": {"f:labels": {"f:shard.bosun.dev/op": {}}}}}],
                            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x",
                                                 "uid": "u"}]},
               "spec": {"clusterIP": "10.0.0.1",
                        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}],
                        "selector": {"app": "s"}}})
    }

    fn desired_service() -> Json {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "s", "namespace": "n",
                            "labels": {"shard.bosun.dev/op": "r2"},
                            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x",
                                                 "uid": "u"}]},
               "spec": {"ports": [{"port": 80, "targetPort": 8080}],
                        "selector": {"app": "s"}}})
    }

    #[test]
    fn a_relabelled_child_is_applied_in_place() {
        assert!(applied_in_place(
            &desired_service(),
            &applied_service(),
            "role",
            Merge::Strategic
        ));
    }

    #[test]
    fn an_apply_that_changes_or_removes_anything_is_sent() {
        let live = applied_service();
        // The label's value differs (a child of an object that moved again).
        let mut d = desired_service();
        d["metadata"]["labels"]["shard.bosun.dev/op"] = json!("r0");
        assert!(!applied_in_place(&d, &live, "role", Merge::Strategic));
        // A field the last apply set is left out: the apply removes it.
        let mut d = desired_service();
        d["spec"].as_object_mut().map(|s| s.remove("selector"));
        assert!(!applied_in_place(&d, &live, "role", Merge::Strategic));
        // The keyed port is gone from the definition.
        let mut d = desired_service();
        d["spec"]["ports"] = json!([{"port": 81, "targetPort": 8080}]);
        assert!(!applied_in_place(&d, &live, "role", Merge::Strategic));
        // Another manager never applied here: its first apply takes the fields.
        assert!(!applied_in_place(
            &desired_service(),
            &live,
            "someone",
            Merge::Strategic
        ));
        // A value someone else changed.
        let mut edited = applied_service();
        edited["spec"]["selector"]["app"] = json!("t");
        assert!(!applied_in_place(
            &desired_service(),
            &edited,
            "role",
            Merge::Strategic
        ));
    }
}
