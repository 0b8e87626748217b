//! One controller builder for every operator, typed or dynamic.
//!
//! An operator describes, per watched namespace (or for all of them), what it watches — a
//! [`Wiring`]: its primary kind's cache, the trigger streams of its children (each mapped to
//! the owning object), the caches it reads, and its context — and hands a reconcile function
//! to [`ControllerContext::run_controller`]. The builder does the rest, the same way for all:
//!
//! * one runner per watched namespace ([`crate::runner`]), with the manager's concurrency
//!   and graceful shutdown, over a priority queue ([`crate::queue`]): a user's change goes
//!   ahead of lists, requeues and retries, each object is queued once and never reconciled
//!   twice at once;
//! * readiness: the operator is ready once every cache of every namespace has synced;
//! * no reconcile before every cache of its namespace has synced (the primary's and the
//!   children's): a pipeline that reads an empty child cache takes "absent" for an answer — it
//!   would create what exists, take over a foreign object of the same name, and rewrite every
//!   child on a restart;
//! * re-list safety (see [`crate::cache`]);
//! * a span, metrics and a log line per reconcile ([`observe`]);
//! * the retry policy, by error category ([`RetryPolicy`]): errors the user must fix wait
//!   long (a spec change triggers a reconcile anyway), others back off exponentially per
//!   object, reset by the next success.
use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::{FutureExt, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::Instrument;

pub use crate::cache::Origin;
use crate::cache::{reflect_observed_lazy, ObjectStream, Synced};
use crate::error::{Categorized, ErrorCategory};
use crate::manager::{ControllerContext, Scope};
use crate::metrics::ControllerMetrics;
use crate::queue::QueueConfig;
use crate::runner::{Handoff, Next, Runner};
use crate::status::StatusWriter;

/// A stream of "reconcile this object" requests, each with where it came from (a watch
/// event goes ahead of a list in the queue).
pub type Trigger<K> = BoxStream<'static, (ObjectRef<K>, Origin)>;

/// The watch of an operator's primary kind in one scope.
pub struct Primary<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash,
{
    store: Store<K>,
    stream: ObjectStream<K>,
    synced: Synced,
    dyntype: K::DynamicType,
    forget: Forgetters,
    /// UID bits → what about the object moves when more than its status changed; filled only
    /// with [`Primary::skip_status_only`].
    seen: Seen,
    /// The namespace watched (None: all) and the operator's own label selector: where the
    /// sharder places this kind's objects.
    namespace: Option<String>,
    selector: Option<String>,
    /// Set by the controller when sharding is on, before the watch starts.
    shard: Arc<OnceLock<ShardHook<K>>>,
}

/// What the primary watch of a sharded controller needs: its shard's label selector, and
/// where to tell the runner that an object is to be handed back.
struct ShardHook<K: Resource> {
    selector: String,
    drain_label: String,
    drains: tokio::sync::mpsc::UnboundedSender<ObjectRef<K>>,
    dyntype: K::DynamicType,
}

/// Told the UID of every primary object that goes.
type Forgetters = Arc<Mutex<Vec<StatusWriter>>>;

/// Per object UID, what about it moves when more than its status changed.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<u128, u64>>>);

impl Seen {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u128, u64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `meta` shows more than a status change since last seen (or is new).
    fn moved(&self, meta: &ObjectMeta) -> bool {
        self.moved_by(meta, crate::dynamic::fingerprint(meta))
    }

    /// Whether the object's fingerprint `fp` differs from the one last seen (or it is new).
    fn moved_by(&self, meta: &ObjectMeta, fp: u64) -> bool {
        let Some(uid) = meta.uid.as_deref() else {
            return true;
        };
        self.lock().insert(crate::owned::uid_bits(uid), fp) != Some(fp)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn forget(&self, uid: &str) {
        self.lock().remove(&crate::owned::uid_bits(uid));
    }
}

impl<K> Primary<K>
where
    K: Resource,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Watches `api` (a namespace, or all) with `cfg` (label selector, say).
    pub fn watch(api: Api<K>, dyntype: K::DynamicType, cfg: watcher::Config) -> Self {
        Self::watch_slimmed(api, dyntype, cfg, |_: &mut K| {})
    }

    /// [`Primary::watch`], keeping each object as `slim` leaves it (after `managedFields` are
    /// dropped): the store, the triggers' filters and the reconcile all see the slimmed
    /// object, so an operator that reads less than the whole object caches less.
    pub fn watch_slimmed(
        api: Api<K>,
        dyntype: K::DynamicType,
        cfg: watcher::Config,
        slim: impl FnMut(&mut K) + Send + 'static,
    ) -> Self {
        let forget: Forgetters = Arc::default();
        let told = forget.clone();
        let seen = Seen::default();
        let gone = seen.clone();
        let namespace = api.namespace().map(str::to_string);
        let selector = cfg.label_selector.clone();
        let shard: Arc<OnceLock<ShardHook<K>>> = Arc::default();
        let (hook, watched) = (shard.clone(), shard.clone());
        let (store, stream, synced) = reflect_observed_lazy(
            api,
            dyntype.clone(),
            move || match watched.get() {
                // This replica's shard only: the cache holds no other object of the kind.
                Some(h) => {
                    let mut cfg = cfg;
                    cfg.label_selector = Some(match cfg.label_selector.take() {
                        Some(own) if !own.is_empty() => format!("{own},{}", h.selector),
                        _ => h.selector.clone(),
                    });
                    cfg
                }
                None => cfg,
            },
            move |ev: &watcher::Event<K>| match ev {
                watcher::Event::Delete(o) => {
                    if let Some(uid) = o.meta().uid.as_deref() {
                        for s in told.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                            s.forget(uid);
                        }
                        gone.forget(uid);
                    }
                }
                // A drain request reaches the runner whatever the operator's trigger filter
                // makes of a label change.
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    if let Some(h) = hook.get() {
                        if o.labels().contains_key(&h.drain_label) {
                            let _ = h
                                .drains
                                .send(ObjectRef::from_obj_with(o, h.dyntype.clone()));
                        }
                    }
                }
                _ => {}
            },
            slim,
        );
        Primary {
            store,
            stream,
            synced,
            dyntype,
            forget,
            seen,
            namespace,
            selector,
            shard,
        }
    }

    /// Triggers a reconcile only when more than the object's status changed (its generation,
    /// labels, annotations, finalizers, owners or deletion): the operator's own status write
    /// then does not run its reconcile again. Every object is reconciled when first seen
    /// (after a start, too); a status edited by someone else is corrected on the next change.
    /// For kinds with a `generation` only (without one every change counts).
    pub fn skip_status_only(self) -> Self {
        let seen = self.seen.clone();
        self.filter(move |o: &K| seen.moved(o.meta()))
    }

    /// Like [`Primary::skip_status_only`] with the operator's own idea of what moves: a
    /// reconcile only when `fingerprint` changed since the object was last seen. What is
    /// remembered per object is forgotten when it goes.
    pub fn skip_unmoved_by(self, fingerprint: impl Fn(&K) -> u64 + Send + 'static) -> Self {
        let seen = self.seen.clone();
        self.filter(move |o: &K| seen.moved_by(o.meta(), fingerprint(o)))
    }

    /// `status` forgets every primary object that goes (its memo would otherwise grow with
    /// churn: a reconcile never sees a deletion without a finalizer).
    pub fn forgetting(self, status: &StatusWriter) -> Self {
        self.forget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(status.clone());
        self
    }

    /// The primary objects' cache.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Triggers a reconcile only for the objects `keep` passes (the cache still sees every
    /// change): a predicate such as "the generation moved" keeps an operator's own status
    /// writes from re-running its reconcile.
    pub fn filter(mut self, mut keep: impl FnMut(&K) -> bool + Send + 'static) -> Self {
        self.stream = Box::pin(self.stream.filter(move |r| {
            futures::future::ready(match r {
                Ok((o, _)) => keep(o),
                Err(_) => true,
            })
        }));
        self
    }
}

/// What an operator watches and reads in one scope, and its context there.
pub struct Wiring<K: Resource + Clone + 'static, C>
where
    K::DynamicType: Eq + Hash,
{
    primary: Primary<K>,
    triggers: Vec<Trigger<K>>,
    caches: Vec<Synced>,
    /// Child caches the operator starts at run time: they join the controller's registry.
    late: Vec<crate::shard::children::LateJoin>,
    context: Arc<C>,
}

impl<K, C> Wiring<K, C>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    pub fn new(primary: Primary<K>, context: Arc<C>) -> Self {
        Wiring {
            primary,
            triggers: Vec::new(),
            caches: Vec::new(),
            late: Vec::new(),
            context,
        }
    }

    /// Child caches the operator starts while the controller runs (kinds found at run time,
    /// [`crate::dynamic::DynamicChildren`]): each joins this controller's child caches before
    /// its watches start, as those wired above do — counted, selected when sharded, and
    /// relabelled when their owner moves.
    pub fn late_children(mut self, join: crate::shard::children::LateJoin) -> Self {
        self.late.push(join);
        self
    }

    /// Children whose controller owner reference names a `K` trigger that owner. `synced` is
    /// their cache's signal: the operator is not ready before it.
    pub fn owns<Child>(mut self, children: ObjectStream<Child>, synced: &Synced) -> Self
    where
        Child: Resource + Send + 'static,
    {
        let dt = self.primary.dyntype.clone();
        self.triggers.push(
            log_errors(children)
                .filter_map(move |(child, origin)| {
                    futures::future::ready(controller_owner(child.meta(), &dt).map(|r| (r, origin)))
                })
                .boxed(),
        );
        self.caches.push(synced.clone());
        self
    }

    /// Other objects mapped to a `K` by `map` (claims by label, say).
    pub fn watches<O>(
        mut self,
        objects: ObjectStream<O>,
        synced: &Synced,
        map: impl Fn(O) -> Option<ObjectRef<K>> + Send + 'static,
    ) -> Self
    where
        O: Send + 'static,
    {
        self.triggers.push(
            log_errors(objects)
                .filter_map(move |(o, origin)| futures::future::ready(map(o).map(|r| (r, origin))))
                .boxed(),
        );
        self.caches.push(synced.clone());
        self
    }

    /// Any other source of reconcile requests (children of kinds found at run time, say).
    pub fn trigger(mut self, trigger: Trigger<K>) -> Self {
        self.triggers.push(trigger);
        self
    }

    /// A cache the pipeline reads that no trigger above carries.
    pub fn reads(mut self, synced: &Synced) -> Self {
        self.caches.push(synced.clone());
        self
    }
}

fn log_errors<T: Send + 'static>(s: ObjectStream<T>) -> BoxStream<'static, (T, Origin)> {
    s.filter_map(|r| {
        futures::future::ready(match r {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::warn!(error = %e, "watch error (retrying with backoff)");
                None
            }
        })
    })
    .boxed()
}

/// The object that controls `meta` (its controller owner reference), if it is a `K`.
pub fn controller_owner<K: Resource>(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    dyntype: &K::DynamicType,
) -> Option<ObjectRef<K>>
where
    K::DynamicType: Clone,
{
    controller_owner_scoped(meta, dyntype, true)
}

/// [`controller_owner`] for an owner kind that may be cluster-scoped (`owner_namespaced`
/// false): a cluster-scoped owner is referred to without the child's namespace, as
/// controller-runtime's `EnqueueRequestForOwner` does, or the request names no object.
pub fn controller_owner_scoped<K: Resource>(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    dyntype: &K::DynamicType,
    owner_namespaced: bool,
) -> Option<ObjectRef<K>>
where
    K::DynamicType: Clone,
{
    let owner = meta
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    is_kind_of::<K>(&owner.api_version, &owner.kind, dyntype).then(|| {
        owner_ref(
            &owner.name,
            dyntype,
            meta.namespace.as_deref(),
            owner_namespaced,
        )
    })
}

/// Whether an owner reference's `apiVersion`/`kind` names `K`'s kind: group and kind, any
/// version (controller-runtime matches group and kind: an owner reference written under an
/// earlier version of a CRD still names the same objects).
pub(crate) fn is_kind_of<K: Resource>(
    api_version: &str,
    kind: &str,
    dyntype: &K::DynamicType,
) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    kind == K::kind(dyntype) && group == K::group(dyntype)
}

/// A reference to the owner `name` of a child in `child_namespace`.
pub(crate) fn owner_ref<K: Resource>(
    name: &str,
    dyntype: &K::DynamicType,
    child_namespace: Option<&str>,
    owner_namespaced: bool,
) -> ObjectRef<K>
where
    K::DynamicType: Clone,
{
    let r = ObjectRef::new_with(name, dyntype.clone());
    match child_namespace {
        Some(ns) if owner_namespaced => r.within(ns),
        _ => r,
    }
}

/// How long to wait before retrying a failed reconcile, by error category.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// A spec the user must fix: a change triggers a reconcile anyway.
    pub invalid_spec: Duration,
    /// First retry of a conflict with another owner (which may go away without an event).
    pub conflict: Duration,
    /// First retry of an API or transient error.
    pub transient: Duration,
    /// Upper bound of the exponential backoff.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            invalid_spec: Duration::from_secs(300),
            conflict: Duration::from_secs(30),
            transient: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// The delay after the `failures`-th consecutive failure (1-based) of this category.
    pub fn delay(&self, category: ErrorCategory, failures: u32) -> Duration {
        let base = match category {
            ErrorCategory::InvalidSpec => return self.invalid_spec,
            ErrorCategory::Conflict => self.conflict,
            ErrorCategory::Api | ErrorCategory::Transient => self.transient,
        };
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        base.saturating_mul(factor).min(self.max)
    }
}

/// Consecutive failures per object, for the backoff; forgotten on success.
#[derive(Default)]
struct Failures(Mutex<HashMap<(String, String), u32>>);

impl Failures {
    fn key<K: Resource>(obj: &K) -> (String, String) {
        (obj.namespace().unwrap_or_default(), obj.name_any())
    }
    fn record<K: Resource>(&self, obj: &K) -> u32 {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(Self::key(obj)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }
    fn reset<K: Resource>(&self, obj: &K) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !m.is_empty() {
            m.remove(&Self::key(obj));
        }
    }
}

/// What the builder's reconcile wrapper holds.
struct Shared<C, F> {
    context: Arc<C>,
    reconcile: F,
    metrics: ControllerMetrics,
    policy: RetryPolicy,
    failures: Failures,
}

/// True once every cache has synced; false if the controller stops first. Whether this
/// replica leads is the runner's to follow: leading ends and starts again, caches stay.
async fn gate(caches: Vec<Synced>, shutdown: tokio_util::sync::CancellationToken) -> bool {
    let open = async {
        for c in &caches {
            if !c.wait().await {
                return false;
            }
        }
        true
    };
    tokio::select! {
        open = open => open,
        _ = shutdown.cancelled() => false,
    }
}

/// When `action` asks to be run again. kube-runtime's `Action` keeps its delay private and
/// shows it only through `Debug` (`Action { requeue_after: Some(5s) }`, the `Debug` of a
/// `Duration`, which is exact); a test below pins that form, so a kube upgrade that changes
/// it fails there rather than dropping requeues silently.
fn requeue_after(action: &Action) -> Option<Duration> {
    if *action == Action::await_change() {
        return None;
    }
    let text = format!("{action:?}");
    let inner = text
        .split_once("Some(")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(d, _)| d)?;
    let parsed = parse_debug_duration(inner);
    if parsed.is_none() {
        tracing::warn!(action = %text, "unreadable requeue delay: requeued after 5 minutes");
    }
    Some(parsed.unwrap_or(Duration::from_secs(300)))
}

/// A `Duration` from its `Debug` text (`1.5s`, `300ms`, `20µs`, `7ns`), exactly.
fn parse_debug_duration(text: &str) -> Option<Duration> {
    let (number, unit_ns) = [
        ("ns", 1u128),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .into_iter()
    .find_map(|(suffix, ns)| text.strip_suffix(suffix).map(|n| (n, ns)))?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let mut nanos = whole.parse::<u128>().ok()?.checked_mul(unit_ns)?;
    if !frac.is_empty() {
        let digits = u32::try_from(frac.len()).ok()?;
        let scale = 10u128.checked_pow(digits)?;
        nanos = nanos.checked_add(frac.parse::<u128>().ok()?.checked_mul(unit_ns)? / scale)?;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
}

impl ControllerContext {
    /// Runs one controller per watched namespace (one for all namespaces when unscoped),
    /// wired by `wire(namespace)`, reconciling with `reconcile`; marks this operator ready
    /// once every cache has synced. Returns when every controller has stopped (graceful
    /// shutdown).
    pub async fn run_controller<K, C, E, F, Fut>(
        &self,
        mut wire: impl FnMut(Option<&str>) -> Wiring<K, C>,
        reconcile: F,
    ) where
        K: Resource,
        K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Debug + Unpin + Send + Sync,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Categorized + std::error::Error + Send + Sync + 'static,
    {
        let namespaces: Vec<Option<String>> = match &self.scope {
            Scope::All => vec![None],
            Scope::Namespaces(list) => list.iter().cloned().map(Some).collect(),
        };
        let wirings = namespaces.iter().map(|ns| wire(ns.as_deref())).collect();
        self.run_wired(wirings, reconcile).await;
    }

    /// Runs one controller, wired once, whatever the scope: for a cluster-scoped primary
    /// kind, which one controller per watched namespace would each reconcile (every object
    /// seen N times over, runs racing). The wiring watches the children in each namespace
    /// of [`ControllerContext::namespaces`] itself.
    pub async fn run_single_controller<K, C, E, F, Fut>(&self, wiring: Wiring<K, C>, reconcile: F)
    where
        K: Resource,
        K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Debug + Unpin + Send + Sync,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Categorized + std::error::Error + Send + Sync + 'static,
    {
        self.run_wired(vec![wiring], reconcile).await;
    }

    /// The watched namespaces (empty: all).
    pub fn namespaces(&self) -> Vec<String> {
        match &self.scope {
            Scope::All => Vec::new(),
            Scope::Namespaces(list) => list.clone(),
        }
    }

    async fn run_wired<K, C, E, F, Fut>(&self, wirings: Vec<Wiring<K, C>>, reconcile: F)
    where
        K: Resource,
        K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Debug + Unpin + Send + Sync,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Categorized + std::error::Error + Send + Sync + 'static,
    {
        let mut synced = Vec::new();
        let mut runs = Vec::new();
        for w in wirings {
            synced.push(w.primary.synced.clone());
            synced.extend(w.caches.iter().cloned());
            runs.push(self.controller(w, reconcile.clone()));
        }
        let readiness = self.clone();
        tokio::spawn(async move {
            for s in synced {
                if !s.wait().await {
                    return;
                }
            }
            readiness.mark_synced();
        });
        futures::future::join_all(runs).await;
    }

    fn controller<K, C, E, F, Fut>(
        &self,
        w: Wiring<K, C>,
        reconcile: F,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        K: Resource,
        K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Debug + Unpin + Send + Sync,
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Categorized + std::error::Error + Send + Sync + 'static,
    {
        let shared = Arc::new(Shared {
            context: w.context,
            reconcile,
            metrics: self.metrics.clone(),
            policy: RetryPolicy::default(),
            failures: Failures::default(),
        });
        // The child caches: counted in `bosun_cached_children`; sharded, each selects this
        // replica's children and the unlabelled ones (set before its watches start). Those
        // started at run time join the same registry when they start, so a hand-off and the
        // sharder's takeover see every kind started so far.
        let children = crate::shard::children::ChildRegistry::new(
            &self.name,
            self.shard.as_ref().map(|s| s.member()),
            &self.record,
        );
        for c in w.caches.iter().filter_map(|s| s.child_watch()) {
            if !children.join(c) {
                tracing::error!(kind = c.kind(), "a child cache wired twice: not sharded");
            }
        }
        for late in &w.late {
            late.attach(&children);
        }
        self.metrics
            .add_text_fn("cached_children", crate::cache::children_metrics_text);
        let mut caches = vec![w.primary.synced.clone()];
        caches.extend(w.caches);
        let dyntype = w.primary.dyntype.clone();
        let mut sources = SelectAll::new();
        // Sharded: the primary watch selects this replica's shard, drain requests come as
        // triggers of their own, and this controller places its kind's objects whenever this
        // replica holds the sharder Lease.
        let mut handoff = None;
        let mut placing = None;
        if let Some(shard) = &self.shard {
            let labels = crate::shard::Labels::for_operator(&self.name);
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let hook = ShardHook {
                selector: shard.selector(&self.name),
                drain_label: labels.drain.clone(),
                drains: tx,
                dyntype: dyntype.clone(),
            };
            if w.primary.shard.set(hook).is_err() {
                tracing::error!("a primary watch wired twice: not sharded");
            }
            sources.push(tokio_stream_of(rx).map(|r| (r, Origin::Event)).boxed());
            handoff = Some(Handoff {
                confirm: confirm_fn::<K>(
                    self.client.clone(),
                    labels.clone(),
                    kube::core::ApiResource::erase::<K>(&dyntype),
                    shard.member().to_string(),
                ),
                read_share: read_share_fn(
                    self.client.clone(),
                    kube::core::ApiResource::erase::<K>(&dyntype),
                    w.primary.namespace.clone(),
                    share_selector(&labels, shard.member(), w.primary.selector.as_deref()),
                ),
                drain_label: labels.drain.clone(),
                release: release_fn::<K>(
                    self.client.clone(),
                    labels.clone(),
                    kube::core::ApiResource::erase::<K>(&dyntype),
                    children.clone(),
                    shard.member().to_string(),
                    (w.primary.store.clone(), dyntype.clone()),
                ),
            });
            self.metrics
                .add_text_fn("shard_label_writes", crate::shard::kind::metrics_text);
            placing = Some(crate::shard::kind::run(
                shard.clone(),
                labels,
                crate::shard::kind::Scope {
                    resource: kube::core::ApiResource::erase::<K>(&dyntype),
                    namespace: w.primary.namespace.clone(),
                    selector: w.primary.selector.clone(),
                    children: children.clone(),
                },
            ));
        }
        sources.push(
            log_errors(w.primary.stream)
                .map(move |(o, origin)| (ObjectRef::from_obj_with(&o, dyntype.clone()), origin))
                .boxed(),
        );
        for t in w.triggers {
            sources.push(t);
        }
        let runner = Runner {
            store: w.primary.store,
            concurrency: usize::from(self.concurrency.max(1)),
            config: QueueConfig::default(),
            metrics: self.metrics.clone(),
            shutdown: self.shutdown.clone(),
            gate: gate(caches, self.shutdown.clone()).boxed(),
            leading: self.leading.clone(),
            handoff,
        };
        let sharded = self.shard.is_some();
        let work = move |obj: Arc<K>| {
            let shared = shared.clone();
            async move {
                let fut = (shared.reconcile)(obj.clone(), shared.context.clone());
                let fut = observe(&shared.metrics, obj.as_ref(), fut);
                // Sharded: what the reconcile writes carries its object's shard label.
                let result = if sharded {
                    crate::shard::reconciling(obj.meta().labels.as_ref(), fut).await
                } else {
                    fut.await
                };
                match result {
                    Ok(action) => {
                        shared.failures.reset(obj.as_ref());
                        Next::After(requeue_after(&action))
                    }
                    Err(e) => {
                        let n = shared.failures.record(obj.as_ref());
                        Next::Retry(shared.policy.delay(e.category(), n))
                    }
                }
            }
            // The reconcile runs as a task of its own: it keeps the operator's span.
            .instrument(tracing::Span::current())
            .boxed()
        };
        let run = runner.run(sources, work);
        async move {
            match placing {
                None => run.await,
                Some(placing) => {
                    // Placing never ends the controller: it stops with it.
                    let placing = async move {
                        placing.await;
                        std::future::pending::<()>().await
                    };
                    tokio::select! {
                        _ = run => {}
                        _ = placing => {}
                    }
                }
            }
        }
    }
}

/// A receiver as a stream.
fn tokio_stream_of<T: Send + 'static>(
    rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|t| (t, rx)) }).boxed()
}

/// The objects of a sharded member's share that it may work: labelled with it, no hand-off
/// asked, within the operator's own selector `own` if it has one.
fn share_selector(labels: &crate::shard::Labels, me: &str, own: Option<&str>) -> String {
    let share = format!("{}={me},!{}", labels.shard, labels.drain);
    match own {
        Some(own) if !own.is_empty() => format!("{own},{share}"),
        _ => share,
    }
}

/// The page size of a read of a member's share: metadata only, about 500 × 1 KiB a page.
const SHARE_PAGE: u32 = 500;

/// A sharded member's read of its share as a term begins: the UIDs of the objects selected by
/// `selector` (see [`share_selector`]) and the version they were read at, by a paged metadata
/// LIST without a `resourceVersion` — a quorum read, so it shows every move the sharder made
/// before it, which the member's watch may not have shown yet (the next pages are read at the
/// first one's version). None when a page failed (a continue token expired too): the runner
/// reads again, whole.
fn read_share_fn(
    client: kube::Client,
    resource: kube::core::ApiResource,
    namespace: Option<String>,
    selector: String,
) -> crate::runner::ReadShare {
    Arc::new(move || {
        let api = crate::shard::kind::api(client.clone(), &resource, namespace.as_deref());
        let selector = selector.clone();
        Box::pin(async move {
            let mut share = crate::runner::Share::default();
            let mut params = kube::api::ListParams::default()
                .labels(&selector)
                .limit(SHARE_PAGE);
            loop {
                let page = match api.list_metadata(&params).await {
                    Ok(page) => page,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read this member's share as its term began (retrying)");
                        return None;
                    }
                };
                if share.resource_version.is_none() {
                    share.resource_version = page.metadata.resource_version;
                }
                let uids = page.items.into_iter().filter_map(|o| o.metadata.uid);
                share.uids.extend(uids);
                match page.metadata.continue_ {
                    Some(token) if !token.is_empty() => params.continue_token = Some(token),
                    _ => return Some(share),
                }
            }
        })
    })
}

/// A sharded member's read of one object that the read of its share at the start of the term
/// did not show (placed on it since, or moved away while its cache still shows it), when the
/// cached object's `resourceVersion` and the read's do not compare: whether the API server
/// (not the cache, which may lag) labels this very object (same UID) with this member and asks
/// no hand-off.
fn confirm_fn<K>(
    client: kube::Client,
    labels: crate::shard::Labels,
    resource: kube::core::ApiResource,
    me: String,
) -> Arc<dyn Fn(Arc<K>) -> futures::future::BoxFuture<'static, Option<bool>> + Send + Sync>
where
    K: Resource + Send + Sync + 'static,
{
    Arc::new(move |obj: Arc<K>| {
        let api = crate::shard::kind::api(client.clone(), &resource, obj.namespace().as_deref());
        let name = obj.name_any();
        let uid = obj.meta().uid.clone();
        let (labels, me) = (labels.clone(), me.clone());
        Box::pin(async move {
            match api.get_metadata_opt(&name).await {
                Ok(Some(live)) => {
                    let l = live.labels();
                    Some(
                        live.metadata.uid == uid
                            && l.get(&labels.shard) == Some(&me)
                            && !l.contains_key(&labels.drain),
                    )
                }
                Ok(None) => Some(false),
                Err(e) => {
                    tracing::warn!(error = %e, object = %name, "could not read an object again as its term began");
                    None
                }
            }
        })
    })
}

/// Hands an object back: relabels its children (those this replica caches) with the member
/// the drain names, then writes that member on the object and removes the drain label — or,
/// when the drain names no other member, removes the labels of both (the children are then
/// cached by every replica, the sharder places the object). Children first: once the object
/// carries the new member's label, that member reconciles it, and its caches must show
/// every child by then (else its applier would refuse to create what exists unseen).
/// Through the operators' (fenced) client; the runner calls it only when no reconcile of
/// the object runs, so no child is written by two replicas at once. The object's write
/// carries the `resourceVersion` the drain was seen at: a hand-off decided on a stale view
/// (the object moved on since) is refused, and done again once the watch shows it.
fn release_fn<K>(
    client: kube::Client,
    labels: crate::shard::Labels,
    resource: kube::core::ApiResource,
    children: crate::shard::children::ChildRegistry,
    me: String,
    (store, dyntype): (Store<K>, K::DynamicType),
) -> Arc<dyn Fn(Arc<K>) -> futures::future::BoxFuture<'static, Next> + Send + Sync>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let discovery = crate::dynamic::Discovery::new(client.clone());
    let primary_type = crate::shard::children::primary_type(&resource);
    Arc::new(move |obj: Arc<K>| {
        let listed = (
            children.clone(),
            discovery.clone(),
            me.clone(),
            obj.meta().clone(),
            primary_type.clone(),
        );
        let api = crate::shard::kind::api(client.clone(), &resource, obj.namespace().as_deref());
        let name = obj.name_any();
        let target =
            crate::shard::handoff_target(obj.labels().get(&labels.drain).map(String::as_str), &me)
                .map(str::to_string);
        let kids: Vec<_> = obj
            .meta()
            .uid
            .as_deref()
            .map(|uid| {
                children
                    .watches()
                    .iter()
                    .flat_map(|c| c.children_of(uid).into_iter().map(move |n| (c.clone(), n)))
                    .collect()
            })
            .unwrap_or_default();
        let child_body = serde_json::json!({
            "metadata": { "labels": { labels.shard.clone(): target.clone() } }
        });
        let shard_label = labels.shard.clone();
        let body = serde_json::json!({
            "metadata": {
                "resourceVersion": obj.resource_version(),
                "labels": { labels.shard.clone(): target.clone(), labels.drain.clone(): null }
            }
        });
        let client = client.clone();
        let (store, key) = (
            store.clone(),
            ObjectRef::from_obj_with(obj.as_ref(), dyntype.clone()),
        );
        let seen_at = obj.resource_version();
        async move {
            // Children no cache here indexes by owner: of a kind recorded on another replica
            // (listed), or linked to the object by annotations only (scanned in the caches).
            let (registry, discovery, me, owner, primary_type) = listed;
            if !registry
                .relabel_listed(&client, &discovery, &me, &owner, &primary_type, target.as_deref())
                .await
            {
                return Next::Retry(Duration::from_secs(1));
            }
            let relabelled = futures::future::join_all(kids.iter().map(|(watch, named)| {
                let (ar, (ns, child)) = (&watch.resource, named);
                let api = crate::shard::kind::api(client.clone(), ar, ns.as_deref());
                let (body, client, shard) = (&child_body, &client, &shard_label);
                async move {
                    // Under the field manager that owns the label: it stays that writer's
                    // (with the new value), so the new member's applier finds the child in place.
                    let params = kube::api::PatchParams {
                        field_manager: watch.label_manager(client, named, shard).await,
                        ..Default::default()
                    };
                    match api
                        .patch_metadata(child, &params, &kube::api::Patch::Merge(body))
                        .await
                    {
                        Ok(_) => Ok(()),
                        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                        Err(e) => {
                            tracing::warn!(error = %e, kind = %ar.kind, child = %child, "could not relabel a child on a hand-off; retrying");
                            Err(())
                        }
                    }
                }
            }))
            .await;
            if relabelled.iter().any(Result::is_err) {
                return Next::Retry(Duration::from_secs(1));
            }
            match api
                .patch_metadata(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&body))
                .await
            {
                Ok(_) => {
                    tracing::info!(name = %name, to = ?target, children = kids.len(), "handed over");
                    left_the_cache(&store, &key, seen_at.as_deref()).await;
                    Next::After(None)
                }
                // Gone, or changed since the drain was seen: the watch shows what is now.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Next::After(None),
                Err(e) => {
                    tracing::warn!(error = %e, name = %name, "could not hand an object back; retrying");
                    Next::Retry(Duration::from_secs(1))
                }
            }
        }
        .boxed()
    })
}

/// Waits until this replica's cache no longer holds the object at the version the hand-off
/// was decided on: written away, it leaves the shard's selection, and the hand-off ends once
/// the watch shows that — so what the runner reports when work ends (`bosun_cached_objects`)
/// counts the object on its new member only, even when this replica has nothing else to do.
/// Bounded: a watch that lags longer leaves the count to the next work that ends.
async fn left_the_cache<K>(store: &Store<K>, key: &ObjectRef<K>, seen_at: Option<&str>)
where
    K: Resource + Clone,
    K::DynamicType: Eq + Hash + Clone,
{
    let still_there = || {
        store
            .get(key)
            .is_some_and(|o| o.resource_version().as_deref() == seen_at)
    };
    let wait = async {
        while still_there() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(30), wait).await;
}

/// Wraps one reconcile: a span carrying namespace/name, the duration histogram, and the
/// outcome counted by error category.
pub async fn observe<K, T, E>(
    metrics: &ControllerMetrics,
    obj: &K,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E>
where
    K: Resource,
    E: Categorized + std::fmt::Display,
{
    let meta = obj.meta();
    let span = tracing::info_span!(
        "reconcile",
        namespace = meta.namespace.as_deref().unwrap_or(""),
        name = meta.name.as_deref().unwrap_or(""),
    );
    let guard = metrics.reconcile_started();
    let res = fut.instrument(span.clone()).await;
    match &res {
        Ok(_) => guard.success(),
        Err(e) => {
            let c = e.category();
            span.in_scope(|| match c {
                ErrorCategory::InvalidSpec | ErrorCategory::Conflict => {
                    tracing::info!(category = c.as_str(), error = %e, "reconcile stopped on user input")
                }
                _ => tracing::warn!(category = c.as_str(), error = %e, "reconcile failed"),
            });
            guard.failure(c);
        }
    }
    res
}

/// For a kube-runtime `Controller::run` stream: logs what `observe` did not (a trigger for
/// an object missing from the cache, a queue or watch error); reconcile failures are already
/// logged and counted there.
pub fn log_unobserved<T, E1, E2>(res: &Result<T, kube::runtime::controller::Error<E1, E2>>)
where
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    match res {
        Ok(_) | Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
        Err(e) => tracing::warn!(error = %e, "controller stream error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

    #[test]
    fn only_more_than_a_status_change_moves_a_primary() {
        let seen = Seen::default();
        let mut m = ObjectMeta {
            uid: Some("0f6c3b5e-4c5f-4d8a-9d5e-1b2c3d4e5f60".into()),
            generation: Some(1),
            resource_version: Some("10".into()),
            ..Default::default()
        };
        assert!(seen.moved(&m), "first sight");
        m.resource_version = Some("11".into());
        assert!(
            !seen.moved(&m),
            "its status written: same generation and metadata"
        );
        m.finalizers = Some(vec!["f".into()]);
        assert!(seen.moved(&m), "a finalizer added");
        m.generation = Some(2);
        assert!(seen.moved(&m), "a spec change");
        assert!(!seen.moved(&m));
        seen.forget("0f6c3b5e-4c5f-4d8a-9d5e-1b2c3d4e5f60");
        assert!(seen.moved(&m), "deleted and seen again (a recreation)");
        assert!(seen.moved(&ObjectMeta::default()), "no UID: always");
    }

    #[test]
    fn an_operator_fingerprint_is_remembered_until_the_object_goes() {
        let seen = Seen::default();
        let m = ObjectMeta {
            uid: Some("1f6c3b5e-4c5f-4d8a-9d5e-1b2c3d4e5f60".into()),
            ..Default::default()
        };
        assert!(seen.moved_by(&m, 7), "first sight");
        assert!(!seen.moved_by(&m, 7));
        assert!(seen.moved_by(&m, 8));
        assert_eq!(seen.len(), 1);
        seen.forget("1f6c3b5e-4c5f-4d8a-9d5e-1b2c3d4e5f60");
        assert_eq!(seen.len(), 0, "nothing kept for an object that went");
    }

    #[test]
    fn the_requeue_delay_is_read_back_from_an_action() {
        for d in [
            Duration::from_secs(300),
            Duration::from_millis(1500),
            Duration::from_millis(250),
            Duration::from_micros(20),
            Duration::from_nanos(7),
            Duration::from_secs(86_400),
        ] {
            assert_eq!(requeue_after(&Action::requeue(d)), Some(d), "{d:?}");
        }
        assert_eq!(requeue_after(&Action::await_change()), None);
    }

    #[test]
    fn backoff_grows_per_category_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(ErrorCategory::Api, 1), Duration::from_secs(1));
        assert_eq!(p.delay(ErrorCategory::Api, 2), Duration::from_secs(2));
        assert_eq!(p.delay(ErrorCategory::Transient, 4), Duration::from_secs(8));
        assert_eq!(p.delay(ErrorCategory::Api, 30), Duration::from_secs(300));
        assert_eq!(p.delay(ErrorCategory::Conflict, 1), Duration::from_secs(30));
        assert_eq!(
            p.delay(ErrorCategory::Conflict, 3),
            Duration::from_secs(120)
        );
        assert_eq!(
            p.delay(ErrorCategory::InvalidSpec, 9),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn failures_count_per_object_until_success() {
        let f = Failures::default();
        let mut d = Deployment::default();
        d.metadata.name = Some("a".into());
        d.metadata.namespace = Some("ns".into());
        assert_eq!(f.record(&d), 1);
        assert_eq!(f.record(&d), 2);
        f.reset(&d);
        assert_eq!(f.record(&d), 1);
    }

    fn owned(kind: &str, api_version: &str, controller: bool) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "owner".into(),
                uid: "u".into(),
                controller: Some(controller),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn controller_owner_matches_kind_and_group_for_typed_and_dynamic_owners() {
        let r = controller_owner::<Deployment>(&owned("Deployment", "apps/v1", true), &());
        assert_eq!(
            r.map(|r| (r.name, r.namespace)),
            Some(("owner".to_string(), Some("ns".to_string())))
        );
        assert!(
            controller_owner::<Deployment>(&owned("Deployment", "apps/v1", false), &()).is_none()
        );
        assert!(
            controller_owner::<Deployment>(&owned("Deployment", "other/v1", true), &()).is_none()
        );

        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "charts.example.com",
            "v1alpha1",
            "BookStore",
        ));
        let r = controller_owner::<DynamicObject>(
            &owned("BookStore", "charts.example.com/v1alpha1", true),
            &ar,
        );
        assert_eq!(r.map(|r| r.name), Some("owner".to_string()));
        assert_eq!(
            controller_owner::<DynamicObject>(
                &owned("BookStore", "charts.example.com/v1", true),
                &ar
            )
            .map(|r| r.name),
            Some("owner".to_string()),
            "another version of the same kind (a CRD that moved on)"
        );
        assert!(controller_owner::<DynamicObject>(
            &owned("BookStore", "other.example.com/v1alpha1", true),
            &ar
        )
        .is_none());
        // A cluster-scoped owner of a namespaced child: the request names no namespace.
        let r = controller_owner_scoped::<DynamicObject>(
            &owned("BookStore", "charts.example.com/v1alpha1", true),
            &ar,
            false,
        );
        assert_eq!(
            r.map(|r| (r.name, r.namespace)),
            Some(("owner".to_string(), None))
        );
    }
}
