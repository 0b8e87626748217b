//! What this operator last wrote to each custom resource, kept until the cache shows it.
//!
//! A reconcile often follows the previous one at once (the first sighting of the children it
//! just created triggers their owner) and sees the object from the cache, before the cache
//! has received the status and finalizer this operator wrote a moment ago. Taken at face
//! value, that stale object would make the next run rewrite the status from scratch (a
//! second write, recording the no-op run over the one that created everything) and re-add
//! the finalizer with an outdated resourceVersion (a conflict). So the status and finalizers
//! of each write's response are kept with its resourceVersion, and used instead of the
//! cached ones while the cached object is older; once the cache has caught up the entry is
//! dropped, so the memory held is that of writes in flight.
//!
//! resourceVersions are compared as numbers (etcd revisions, as every API server built on
//! etcd serves them); one that does not parse makes the cache the reference.
use std::collections::HashMap;
use std::sync::Mutex;

use kube::core::DynamicObject;
use kube::ResourceExt;
use serde_json::Value;

/// The state of an object as the reconcile should see it.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub status: Option<Value>,
    pub finalizers: Vec<String>,
    pub resource_version: Option<String>,
}

impl View {
    /// The object as it is.
    pub fn of(obj: &DynamicObject) -> View {
        View {
            status: obj.data.get("status").cloned(),
            finalizers: obj.finalizers().to_vec(),
            resource_version: obj.resource_version(),
        }
    }
}

#[derive(Default)]
pub struct Latest(Mutex<HashMap<String, (u64, View)>>);

fn rv(obj: &DynamicObject) -> Option<u64> {
    obj.resource_version()?.parse().ok()
}

impl Latest {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, View)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `cached`, or what this operator wrote when the cache is older than that.
    pub fn view(&self, cached: &DynamicObject) -> View {
        let from_cache = View::of(cached);
        let Some(uid) = cached.uid() else {
            return from_cache;
        };
        let mut m = self.lock();
        match (m.get(&uid), rv(cached)) {
            (Some((written, view)), Some(c)) if c < *written => view.clone(),
            (Some(_), _) => {
                m.remove(&uid);
                from_cache
            }
            (None, _) => from_cache,
        }
    }

    /// Records the object a write returned.
    pub fn wrote(&self, response: &DynamicObject) {
        let (Some(uid), Some(v)) = (response.uid(), rv(response)) else {
            return;
        };
        let view = View::of(response);
        let mut m = self.lock();
        if m.get(&uid).is_none_or(|(old, _)| *old < v) {
            m.insert(uid, (v, view));
        }
    }

    /// Forgets an object that is gone.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Objects whose writes the cache has not shown yet.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(rv: &str, status: Value, finalizers: &[&str]) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "x.dev/v1", "kind": "K",
            "metadata": {"name": "a", "uid": "u1", "resourceVersion": rv, "finalizers": finalizers},
            "status": status
        }))
        .expect("object")
    }

    #[test]
    fn a_stale_cache_is_read_through_the_last_write() {
        let l = Latest::default();
        let cached = obj("10", json!({"old": true}), &[]);
        assert_eq!(l.view(&cached).status, Some(json!({"old": true})));
        l.wrote(&obj("12", json!({"new": true}), &["f"]));
        let v = l.view(&cached);
        assert_eq!(v.status, Some(json!({"new": true})));
        assert_eq!(v.finalizers, ["f"]);
        assert_eq!(l.len(), 1);
        // An older response does not replace a newer one.
        l.wrote(&obj("11", json!({"older": true}), &[]));
        assert_eq!(l.view(&cached).status, Some(json!({"new": true})));
        // Caught up: the cache is the reference again, and the entry goes.
        let fresh = obj("13", json!({"someone": "else"}), &["f"]);
        assert_eq!(l.view(&fresh).status, Some(json!({"someone": "else"})));
        assert!(l.is_empty());
    }

    #[test]
    fn unparsable_versions_trust_the_cache() {
        let l = Latest::default();
        l.wrote(&obj("12", json!({"new": true}), &[]));
        let cached = obj("opaque", json!({"old": true}), &[]);
        assert_eq!(l.view(&cached).status, Some(json!({"old": true})));
    }
}
