//! The child caches of one controller, as its hand-off and its sharder round see them: a
//! registry that grows while the controller runs. Coded operators wire their child caches
//! before the controller starts; the Helm and Ansible flavours start one per kind at run time
//! ([`crate::dynamic::DynamicChildren`]: warm kinds with the controller, others on a
//! reconcile's first use). Either way a cache joins the registry through [`ChildRegistry::join`]
//! before its watches start, which is where the one decision is taken: counted in
//! `bosun_cached_children`, and, sharded, given the selectors of [`super::child_selectors`].
//! A hand-off or a takeover then reads the kinds started so far, not a list fixed at start.
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::kind::ChildKind;
use crate::cache::ChildWatch;

/// One controller's child caches (cheap to clone: shared).
#[derive(Clone)]
pub struct ChildRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    controller: String,
    /// Sharded: this replica's member name.
    member: Option<String>,
    watches: Mutex<Vec<Arc<ChildWatch>>>,
}

impl ChildRegistry {
    pub(crate) fn new(controller: &str, member: Option<&str>) -> Self {
        ChildRegistry {
            inner: Arc::new(Inner {
                controller: controller.to_string(),
                member: member.map(str::to_string),
                watches: Mutex::default(),
            }),
        }
    }

    /// Adds a child cache whose watches have not started: counted, and, sharded, selecting
    /// this member's children and the unlabelled ones. False when it was given selectors
    /// already (wired twice): it then keeps those, and is not added again.
    pub(crate) fn join(&self, watch: &Arc<ChildWatch>) -> bool {
        let mut all = self.lock();
        if all.iter().any(|w| Arc::ptr_eq(w, watch)) {
            return false;
        }
        if let Some(member) = &self.inner.member {
            let selectors =
                super::child_selectors(&self.inner.controller, member, &watch.own_selector);
            if !watch.select(selectors) {
                return false;
            }
        }
        crate::cache::count_children(&self.inner.controller, watch);
        all.push(watch.clone());
        true
    }

    /// The child caches joined so far.
    pub(crate) fn watches(&self) -> Vec<Arc<ChildWatch>> {
        self.lock().clone()
    }

    /// Where the sharder looks for a taken-over member's children: each cache's kind,
    /// namespace and own selector, as joined so far.
    pub(crate) fn kinds(&self) -> Vec<ChildKind> {
        self.lock()
            .iter()
            .map(|c| ChildKind {
                resource: c.resource.clone(),
                namespace: c.namespace.clone(),
                selector: c.own_selector.clone(),
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<ChildWatch>>> {
        self.inner.watches.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The link between child caches started at run time and the controller they serve: the
/// operator hands [`LateChildren::wiring`]'s end to its [`crate::Wiring`], keeps the other,
/// and each cache it starts waits for the controller's registry before it joins it.
pub struct LateChildren {
    rx: watch::Receiver<Option<ChildRegistry>>,
}

/// The controller's end of [`LateChildren`]: given the registry when the controller starts.
pub struct LateJoin {
    tx: watch::Sender<Option<ChildRegistry>>,
}

impl LateChildren {
    /// A pair: the caches' end and the wiring's.
    pub fn new() -> (LateChildren, LateJoin) {
        let (tx, rx) = watch::channel(None);
        (LateChildren { rx }, LateJoin { tx })
    }

    /// The registry of the controller these caches serve, once it started; None when the
    /// wiring was dropped without a controller (a cache then runs as an unwired one: its
    /// own selector, uncounted).
    pub async fn registry(&self) -> Option<ChildRegistry> {
        let mut rx = self.rx.clone();
        let r = rx.wait_for(Option::is_some).await.ok()?.clone();
        r
    }
}

impl LateJoin {
    pub(crate) fn attach(&self, registry: &ChildRegistry) {
        self.tx.send_replace(Some(registry.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ChildWatch;
    use kube::core::{ApiResource, GroupVersionKind};

    fn watch(kind: &str, own: &str) -> Arc<ChildWatch> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", kind));
        Arc::new(ChildWatch::unstarted(ar, Some("ns".into()), own))
    }

    #[test]
    fn unsharded_a_cache_joins_once_with_its_own_selector() {
        let r = ChildRegistry::new("op", None);
        let cm = watch("ConfigMap", "app=x");
        assert!(r.join(&cm));
        assert!(!r.join(&cm), "wired twice: joined once");
        assert_eq!(cm.watches(), ["app=x"]);
        let kinds = r.kinds();
        assert_eq!(kinds.len(), 1);
        assert_eq!(
            (kinds[0].resource.kind.as_str(), kinds[0].selector.as_str()),
            ("ConfigMap", "app=x")
        );
    }

    #[test]
    fn sharded_a_cache_selects_its_members_share_and_the_unlabelled_ones() {
        let r = ChildRegistry::new("op", Some("bosun-1"));
        let cm = watch("ConfigMap", "app=x");
        assert!(r.join(&cm));
        assert_eq!(
            cm.watches(),
            [
                "app=x,shard.bosun.dev/op=bosun-1",
                "app=x,!shard.bosun.dev/op"
            ]
        );
        // The sharder lists a member's children with the cache's own selector.
        assert_eq!(r.kinds()[0].selector, "app=x");
        // Selected elsewhere first (wired into another controller): not joined here.
        let other = watch("Secret", "");
        assert!(ChildRegistry::new("other", Some("bosun-1")).join(&other));
        assert!(!r.join(&other));
        assert_eq!(r.watches().len(), 1);
    }

    #[test]
    fn the_registry_grows_and_every_clone_sees_the_kinds_joined_later() {
        let r = ChildRegistry::new("op", None);
        let handoff = r.clone();
        assert!(handoff.kinds().is_empty());
        r.join(&watch("ConfigMap", ""));
        r.join(&watch("Secret", ""));
        let kinds: Vec<String> = handoff
            .kinds()
            .into_iter()
            .map(|k| k.resource.kind)
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
        assert_eq!(handoff.watches().len(), 2);
    }

    #[tokio::test]
    async fn a_late_cache_waits_for_its_controllers_registry() {
        let (late, join) = LateChildren::new();
        let waiting = tokio::spawn(async move { late.registry().await.is_some() });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no controller yet: it waits");
        join.attach(&ChildRegistry::new("op", None));
        assert!(waiting.await.expect("task"), "given the registry");

        // A wiring dropped without a controller: the cache runs unwired, it never hangs.
        let (late, join) = LateChildren::new();
        drop(join);
        assert!(late.registry().await.is_none());
    }
}
