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
//! The mark moves only when a reconcile runs, and a converged object whose status write
//! triggers nothing (each CR alone in its namespace, say) would keep its entry — a copy of
//! its status — for good. So entries also expire [`EXPIRY`] after their write, swept by a
//! task that runs while any are held: a cache that far behind is not waited for.
//!
//! resourceVersions are compared as numbers (etcd revisions, as every API server built on
//! etcd serves them); one that does not parse makes the cache the reference.
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

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
    /// (when, uid, resourceVersion) of each write kept, oldest first.
    stamps: VecDeque<(Instant, String, u64)>,
    /// Whether the sweeping task runs.
    sweeping: bool,
    /// [`EXPIRY`], but in tests.
    expiry: Option<Duration>,
}

/// How long an entry is kept at most: the cache shows a write within milliseconds, and a
/// view that is stale after all costs a conflict and a read, never a lost update.
pub const EXPIRY: Duration = Duration::from_secs(10);

impl Inner {
    fn remove(&mut self, uid: &str) {
        if let Some((rv, ns, _)) = self.written.remove(uid) {
            self.order.remove(&(ns, rv, uid.to_string()));
        }
    }

    /// Drops the entries written before `limit`; whether any are left.
    fn expire(&mut self, limit: Instant) -> bool {
        while let Some((at, uid, rv)) = self.stamps.front().cloned() {
            if at > limit {
                break;
            }
            self.stamps.pop_front();
            if self.written.get(&uid).is_some_and(|(v, _, _)| *v == rv) {
                self.remove(&uid);
            }
        }
        if self.written.is_empty() {
            self.stamps.clear();
        }
        !self.stamps.is_empty()
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
pub struct Latest(Arc<Mutex<Inner>>);

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Expires `latest`'s entries every [`EXPIRY`] while it holds any.
async fn sweep(latest: Weak<Mutex<Inner>>, expiry: Duration) {
    loop {
        tokio::time::sleep(expiry).await;
        let Some(m) = latest.upgrade() else { return };
        let mut m = lock(&m);
        let limit = Instant::now()
            .checked_sub(expiry)
            .unwrap_or_else(Instant::now);
        if !m.expire(limit) {
            m.sweeping = false;
            return;
        }
    }
}

fn rv(obj: &DynamicObject) -> Option<u64> {
    obj.resource_version()?.parse().ok()
}

impl Latest {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.0)
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
            m.stamps.push_back((Instant::now(), uid.clone(), v));
            m.written.insert(uid, (v, ns, View::of(response)));
            if !m.sweeping {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    m.sweeping = true;
                    let expiry = m.expiry.unwrap_or(EXPIRY);
                    rt.spawn(sweep(Arc::downgrade(&self.0), expiry));
                }
            }
        }
    }

    /// Drops the entries written before `limit` (what the sweeping task does).
    pub fn expire(&self, limit: Instant) {
        self.lock().expire(limit);
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
    fn entries_expire_after_their_write() {
        let l = Latest::default();
        l.wrote(&named("a", "ua", "10", json!({"a": 1}), &[]));
        let mid = Instant::now();
        l.wrote(&named("b", "ub", "11", json!({"b": 1}), &[]));
        // Rewritten later: its first stamp does not expire the newer write.
        l.wrote(&named("a", "ua", "12", json!({"a": 2}), &[]));
        l.expire(mid);
        assert_eq!(l.len(), 2, "only older writes go");
        l.expire(Instant::now());
        assert!(l.is_empty());
        assert!(l.lock().stamps.is_empty() && l.lock().order.is_empty());
        // Nothing stale is shown once expired: the cache is the reference again.
        let cached = named("a", "ua", "10", json!({"old": true}), &[]);
        assert_eq!(l.view(&cached).status, Some(json!({"old": true})));
    }

    #[tokio::test]
    async fn the_sweeper_empties_an_idle_operator() {
        let l = Latest::default();
        l.lock().expiry = Some(Duration::from_millis(20));
        // Each object alone in its namespace: no later view moves a mark past it.
        for i in 0..50u64 {
            let mut o = named(&format!("o{i}"), &format!("u{i}"), "7", json!({}), &[]);
            o.metadata.namespace = Some(format!("ns{i}"));
            l.wrote(&o);
        }
        assert_eq!(l.len(), 50);
        let deadline = Instant::now() + Duration::from_secs(30);
        while l.lock().sweeping && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(l.is_empty(), "{} entries left", l.len());
        assert!(!l.lock().sweeping, "the sweeper stopped");
    }

    #[test]
    fn unparsable_versions_trust_the_cache() {
        let l = Latest::default();
        l.wrote(&obj("12", json!({"new": true}), &[]));
        let cached = obj("opaque", json!({"old": true}), &[]);
        assert_eq!(l.view(&cached).status, Some(json!({"old": true})));
    }
}
