//! What this operator last wrote to each custom resource, kept until the cache shows it.
//!
//! A reconcile often follows the previous one at once (the first sighting of the children it
//! just created triggers their owner) and sees the object from the cache, before the cache
//! has received the status and finalizer this operator wrote a moment ago. Taken at face
//! value, that stale object would make the next run rewrite the status from scratch (a
//! second write, recording the no-op run over the one that created everything) and re-add
//! the finalizer with an outdated resourceVersion (a conflict). So the status and finalizers
//! of each write's response are kept with its resourceVersion, and used instead of the
//! cached ones while the cached object is older.
//!
//! An entry goes when it is no longer needed, which is soon: a watch delivers its events in
//! resourceVersion order, so once the cache has shown *any* object of a namespace at a
//! resourceVersion at or past a write's, it has applied that write too (or the object's
//! deletion). Every object a reconcile is handed moves that namespace's mark forward, and
//! the entries at or below the mark are dropped — those of objects deleted without a
//! finalizer included. The memory held is that of writes in flight. Correctness does not
//! rest on it: status writes are guarded by the resourceVersion (see [`crate::reconcile`]),
//! so a view that is stale after all costs a conflict and a read, never a lost update.
//!
//! resourceVersions are compared as numbers (etcd revisions, as every API server built on
//! etcd serves them); one that does not parse makes the cache the reference.
use std::collections::{BTreeSet, HashMap};
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
struct Inner {
    /// uid → (written resourceVersion, namespace, view).
    written: HashMap<String, (u64, String, View)>,
    /// The same entries by (namespace, resourceVersion), to drop the old ones in order.
    order: BTreeSet<(String, u64, String)>,
    /// Per namespace, the highest resourceVersion the cache has shown.
    seen: HashMap<String, u64>,
}

impl Inner {
    fn remove(&mut self, uid: &str) {
        if let Some((rv, ns, _)) = self.written.remove(uid) {
            self.order.remove(&(ns, rv, uid.to_string()));
        }
    }

    /// Drops the entries of `ns` the cache has caught up with.
    fn prune(&mut self, ns: &str) {
        let Some(&mark) = self.seen.get(ns) else {
            return;
        };
        let gone: Vec<(String, u64, String)> = self
            .order
            .range((ns.to_string(), 0, String::new())..)
            .take_while(|(n, rv, _)| n == ns && *rv <= mark)
            .cloned()
            .collect();
        for (_, _, uid) in gone {
            self.remove(&uid);
        }
    }
}

#[derive(Default)]
pub struct Latest(Mutex<Inner>);

fn rv(obj: &DynamicObject) -> Option<u64> {
    obj.resource_version()?.parse().ok()
}

impl Latest {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `cached`, or what this operator wrote when the cache is older than that.
    pub fn view(&self, cached: &DynamicObject) -> View {
        let from_cache = View::of(cached);
        let Some(uid) = cached.uid() else {
            return from_cache;
        };
        let ns = cached.namespace().unwrap_or_default();
        let mut m = self.lock();
        let c = rv(cached);
        let view = match (m.written.get(&uid), c) {
            (Some((written, _, view)), Some(c)) if c < *written => view.clone(),
            (Some(_), _) => {
                m.remove(&uid);
                from_cache
            }
            (None, _) => from_cache,
        };
        if let Some(c) = c {
            let mark = m.seen.entry(ns.clone()).or_default();
            if c > *mark {
                *mark = c;
                m.prune(&ns);
            }
        }
        view
    }

    /// Records the object a write returned.
    pub fn wrote(&self, response: &DynamicObject) {
        let (Some(uid), Some(v)) = (response.uid(), rv(response)) else {
            return;
        };
        let ns = response.namespace().unwrap_or_default();
        let mut m = self.lock();
        if m.seen.get(&ns).is_some_and(|mark| v <= *mark) {
            return; // the cache is already there
        }
        if m.written.get(&uid).is_none_or(|(old, _, _)| *old < v) {
            m.remove(&uid);
            m.order.insert((ns.clone(), v, uid.clone()));
            m.written.insert(uid, (v, ns, View::of(response)));
        }
    }

    /// Forgets an object that is gone.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Objects whose writes the cache has not shown yet.
    pub fn len(&self) -> usize {
        self.lock().written.len()
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
        named("a", "u1", rv, status, finalizers)
    }

    fn named(name: &str, uid: &str, rv: &str, status: Value, finalizers: &[&str]) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "x.dev/v1", "kind": "K",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv, "finalizers": finalizers},
            "status": status
        }))
        .expect("object")
    }

    #[test]
    fn an_object_seen_later_drops_the_entries_of_earlier_writes() {
        let l = Latest::default();
        // Objects written and then deleted without a finalizer: nothing views them again.
        for i in 0..100u64 {
            l.wrote(&named(
                &format!("o{i}"),
                &format!("u{i}"),
                &(10 + i).to_string(),
                json!({"i": i}),
                &[],
            ));
        }
        assert_eq!(l.len(), 100);
        // The cache shows another object of the namespace, changed after all those writes:
        // it has applied them (a watch delivers events in resourceVersion order).
        let other = named("z", "uz", "500", json!({}), &[]);
        assert_eq!(l.view(&other).status, Some(json!({})));
        assert!(l.is_empty(), "{} entries left", l.len());
        // A write the cache already shows is not kept.
        l.wrote(&named("o1", "u1", "400", json!({}), &[]));
        assert!(l.is_empty());
        // Another namespace's mark says nothing about this one.
        l.wrote(&named("o2", "u2", "600", json!({}), &[]));
        let mut elsewhere = named("y", "uy", "900", json!({}), &[]);
        elsewhere.metadata.namespace = Some("other".into());
        l.view(&elsewhere);
        assert_eq!(l.len(), 1);
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
