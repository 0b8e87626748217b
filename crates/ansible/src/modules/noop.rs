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
}
