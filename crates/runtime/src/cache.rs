//! Watch caches, for typed and `DynamicObject` kinds alike (the kind's `DynamicType` is
//! carried: `()` for k8s-openapi types, an `ApiResource` for kinds found at run time).
//!
//! * [`reflect_with`] builds the cache of an operator's primary resource, with `managedFields`
//!   dropped and a [`Synced`] signal;
//! * [`ChildCache`] holds an operator's children slimmed to what the operator reads (a `strip`
//!   function drops the rest before an object is stored): full objects cost ≈6 KB each,
//!   metadata ≈1.6 KB (measured against this project's API server). Built with
//!   [`ChildCache::watch_owned`], it also keeps the fingerprint of the fields one field
//!   manager owns ([`crate::owned`]), computed from the full object before it is slimmed —
//!   what the applier needs to see drift — in a side table of 16 bytes per object keyed by
//!   UID, and hands it out in the metadata [`ChildCache::meta`] returns;
//! * [`PackedCache`] holds children as [`Packed`] objects: the metadata as it is, the rest of
//!   the slimmed object as its JSON text, decoded again on `get`. k8s-openapi's structs keep
//!   every optional part inline: a Deployment with only four status fields left still took
//!   3.6 KB in the cache, a StatefulSet 5.8 KB (`bench/heap`), against ≈1.7 KB for metadata;
//! * [`MetaCache`] holds metadata only (`PartialObjectMeta`): the API server sends and bosun
//!   parses nothing else — or, built with [`MetaCache::watch_owned`], whole objects are
//!   parsed, fingerprinted like [`ChildCache::watch_owned`] does, and only their metadata is
//!   kept.
//!
//! Readiness is tracked from the watcher's `InitDone` event rather than with
//! `Store::wait_until_ready`: kube-runtime 5's ready signal wakes only the most recent waiter,
//! so a readiness probe waiting on it can starve the controller's own runner of its wake-up.
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{reflector, store::Writer, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;

use crate::apply::Applier;
use crate::owned::{Fingerprint, Owned};

/// Becomes true once the first full list of a watch has been stored. A child cache's signal
/// also carries its [`ChildWatch`]: what the controller it is wired into tells it (a sharded
/// controller's selectors) and asks of it (the children of an object handed back).
#[derive(Clone)]
pub struct Synced {
    rx: watch::Receiver<bool>,
    child: Option<Arc<ChildWatch>>,
}

impl Synced {
    fn of(rx: watch::Receiver<bool>) -> Self {
        Synced { rx, child: None }
    }

    /// A signal set by its sender: for caches that start after the controller is built
    /// (children of kinds known only once discovery answers), so readiness still waits for
    /// them. A dropped sender never reports synced.
    pub fn pending() -> (watch::Sender<bool>, Synced) {
        let (tx, rx) = watch::channel(false);
        (tx, Synced::of(rx))
    }

    /// Waits for the first full list; false when the watch ended before it (its controller
    /// was stopped), so a stale waiter never reports readiness.
    pub async fn wait(&self) -> bool {
        let mut rx = self.rx.clone();
        let synced = rx.wait_for(|s| *s).await.is_ok();
        synced
    }

    /// Makes the child cache behind this signal select `selectors` (a sharded controller's,
    /// [`crate::shard::ShardContext::child_selectors`]) instead of its own selector alone.
    /// The controller does it for every cache wired into it; a cache started by other means
    /// (children of kinds found at run time) calls this before its stream is first polled.
    /// False when this is no child cache's signal, or its selectors were chosen already.
    pub fn select_shard(&self, selectors: crate::shard::ChildSelectors) -> bool {
        self.child.as_ref().is_some_and(|c| c.select(selectors))
    }

    /// The child cache behind this signal, if it is one ([`ChildCache`], [`MetaCache`],
    /// [`PackedCache`]).
    pub(crate) fn child_watch(&self) -> Option<&Arc<ChildWatch>> {
        self.child.as_ref()
    }
}

/// One child cache as its controller sees it. Sharded ([`crate::shard`]), the controller
/// gives it its selectors before its watches start (as it does the primary watch): the
/// children of this replica's objects, and those that carry no shard label of the operator.
/// The cache then runs one watch per selector into one store; unsharded, one watch of its
/// own selector, as before.
pub struct ChildWatch {
    selectors: std::sync::OnceLock<crate::shard::ChildSelectors>,
    /// The kind, the namespace watched (None: all) and the cache's own label selector: where
    /// the sharder looks for a member's children when it takes the member over.
    pub(crate) resource: kube::core::ApiResource,
    pub(crate) namespace: Option<String>,
    pub(crate) own_selector: String,
    /// The cached children of an owner, by its UID: their namespaces and names.
    children_of: OwnedBy,
    /// The cached children operator-sdk's annotations link to an owner (its key and type,
    /// as [`crate::shard::children::annotated_owner`] reads them) and no owner reference does.
    annotated_to: AnnotatedTo,
    len: Box<dyn Fn() -> usize + Send + Sync>,
    /// The fingerprints the cache keeps of its applier's fields, if it keeps them: a hand-off
    /// relabels the children the applier holds fields of under its field manager, so the
    /// label stays among the fields the applier owns and the new member finds them in place.
    fingerprints: std::sync::OnceLock<Fingerprints>,
    /// The UID of a cached object.
    uid_of: UidOf,
}

impl ChildWatch {
    /// The field manager a hand-off relabels the cached child `named` under, so that its
    /// shard label `label` stays with the manager that wrote it and the new member finds the
    /// child in place: the cache's applier's when it keeps its fingerprints and the applier
    /// holds fields of the child, else the one the API server names as the label's owner.
    /// That costs a metadata read per moved child, and only where the cache cannot tell: a
    /// cache that keeps no `managedFields` to save memory (the Ansible flavour's: a role's
    /// `k8s` task writes under the client's default manager, or under a
    /// `server_side_apply.field_manager` of its own), or a child its applier never wrote (a
    /// Helm hook, created by a plain POST). None (the client's default manager) when the
    /// read fails or nobody owns the label.
    pub(crate) async fn label_manager(
        &self,
        client: &kube::Client,
        named: &Named,
        label: &str,
    ) -> Option<String> {
        if let Some(manager) = self.cached_label_manager(named) {
            return Some(manager);
        }
        let (namespace, name) = named;
        let api = crate::shard::kind::api(client.clone(), &self.resource, namespace.as_deref());
        let live = api.get_metadata_opt(name).await.ok().flatten()?;
        crate::owned::label_owner(live.metadata.managed_fields.as_deref()?, label)
            .map(str::to_string)
    }

    /// What the cache alone tells of [`ChildWatch::label_manager`]: its applier's field
    /// manager when it keeps fingerprints and the applier holds fields of the cached child
    /// `named`; None when only a read of the child can tell.
    pub(crate) fn cached_label_manager(&self, (namespace, name): &Named) -> Option<String> {
        let fps = self.fingerprints.get()?;
        let uid = (self.uid_of)(namespace.as_deref().unwrap_or(""), name)?;
        fps.get(&uid).map(|_| fps.manager.to_string())
    }

    fn keeps_fingerprints_of(&self, fps: Option<&Fingerprints>) {
        if let Some(fps) = fps {
            let _ = self.fingerprints.set(fps.clone());
        }
    }

    /// Selects on the shard labels (before the watches start; later, ignored: a watch that
    /// has started keeps what it lists).
    pub(crate) fn select(&self, selectors: crate::shard::ChildSelectors) -> bool {
        self.selectors.set(selectors).is_ok()
    }

    /// A child watch of no cache (no children, nothing counted), for the registry's tests.
    #[cfg(test)]
    pub(crate) fn unstarted(
        resource: kube::core::ApiResource,
        namespace: Option<String>,
        own_selector: &str,
    ) -> Self {
        ChildWatch {
            selectors: std::sync::OnceLock::new(),
            resource,
            namespace,
            own_selector: own_selector.to_string(),
            children_of: Box::new(|_| Vec::new()),
            annotated_to: Box::new(|_, _, _| Vec::new()),
            len: Box::new(|| 0),
            fingerprints: std::sync::OnceLock::new(),
            uid_of: Box::new(|_, _| None),
        }
    }

    /// A child watch of no watch, for the hand-off's tests: `annotated` are the objects it
    /// links to any owner by annotations only, each with its UID; `held`, when given, the
    /// applier whose fingerprints it keeps and the UIDs that applier holds fields of.
    #[cfg(test)]
    pub(crate) fn cached(
        resource: kube::core::ApiResource,
        namespace: Option<String>,
        annotated: Vec<(Named, String)>,
        held: Option<(&Applier, &[&str])>,
    ) -> Self {
        let w = ChildWatch::unstarted(resource, namespace, "");
        if let Some((applier, uids)) = held {
            let fps = Fingerprints::new(applier);
            for uid in uids {
                fps.lock().insert(
                    crate::owned::uid_bits(uid).to_le_bytes(),
                    (1u128.to_le_bytes(), 0),
                );
            }
            w.keeps_fingerprints_of(Some(&fps));
        }
        let names: Vec<Named> = annotated.iter().map(|(n, _)| n.clone()).collect();
        ChildWatch {
            annotated_to: Box::new(move |_, _, _| names.clone()),
            uid_of: Box::new(move |ns, name| {
                annotated
                    .iter()
                    .find(|((n, m), _)| n.as_deref().unwrap_or("") == ns && m == name)
                    .map(|(_, uid)| uid.clone())
            }),
            ..w
        }
    }

    /// The selectors of the watches to run: the sharded pair, or the cache's own.
    pub(crate) fn watches(&self) -> Vec<String> {
        match self.selectors.get() {
            Some(s) => s.both().iter().map(|s| s.to_string()).collect(),
            None => vec![self.own_selector.clone()],
        }
    }

    /// The cached objects whose owner references name `uid`.
    pub(crate) fn children_of(&self, uid: &str) -> Vec<Named> {
        (self.children_of)(uid)
    }

    /// The cached objects linked by operator-sdk's annotations only to the owner `uid`, whose
    /// key (`<namespace>/<name>`) and type (`<Kind>.<group>`) they name.
    pub(crate) fn annotated_to(&self, uid: &str, key: &str, primary_type: &str) -> Vec<Named> {
        (self.annotated_to)(uid, key, primary_type)
    }

    /// Objects cached.
    pub fn len(&self) -> usize {
        (self.len)()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn kind(&self) -> &str {
        &self.resource.kind
    }
}

/// An object's namespace (None: cluster-scoped) and name.
pub(crate) type Named = (Option<String>, String);

/// The cached objects an owner (by UID) has.
type OwnedBy = Box<dyn Fn(&str) -> Vec<Named> + Send + Sync>;

/// The UID of the cached object of a namespace ("" when cluster-scoped) and name.
type UidOf = Box<dyn Fn(&str, &str) -> Option<String> + Send + Sync>;

/// The cached objects an owner (UID, annotation key, type) has by annotations only.
type AnnotatedTo = Box<dyn Fn(&str, &str, &str) -> Vec<Named> + Send + Sync>;

/// Every child cache a controller runs, for `bosun_cached_children{controller,group,kind}`:
/// a replica's share of the children, as `bosun_cached_objects` is of its primary objects.
static CHILD_CACHES: Mutex<Vec<(String, std::sync::Weak<ChildWatch>)>> = Mutex::new(Vec::new());

/// Counts `watch`'s objects as `controller`'s children (the caches of stopped controllers
/// are forgotten).
pub(crate) fn count_children(controller: &str, watch: &Arc<ChildWatch>) {
    let mut all = CHILD_CACHES.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, w)| w.strong_count() > 0);
    if !all
        .iter()
        .any(|(c, w)| c == controller && w.upgrade().is_some_and(|w| Arc::ptr_eq(&w, watch)))
    {
        all.push((controller.to_string(), Arc::downgrade(watch)));
    }
}

/// `bosun_cached_children` in the text exposition: per controller and kind, the children
/// cached in all its namespaces.
pub(crate) fn children_metrics_text() -> String {
    let mut sums: std::collections::BTreeMap<(String, String, String), usize> =
        std::collections::BTreeMap::new();
    for (controller, w) in CHILD_CACHES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        if let Some(w) = w.upgrade() {
            *sums
                .entry((
                    controller.clone(),
                    w.resource.group.clone(),
                    w.resource.kind.clone(),
                ))
                .or_insert(0) += w.len();
        }
    }
    let mut out = String::from(
        "# HELP bosun_cached_children Objects in the controller's child caches, by kind\n\
         # TYPE bosun_cached_children gauge\n",
    );
    for ((controller, group, kind), n) in sums {
        out.push_str(&format!(
            "bosun_cached_children{{controller=\"{controller}\",group=\"{group}\",kind=\"{kind}\"}} {n}\n"
        ));
    }
    out
}

/// A cache's objects as triggers: each created, changed or deleted object, and each object of
/// a (re-)list once the list is stored, with where it came from.
pub type ObjectStream<K> =
    std::pin::Pin<Box<dyn Stream<Item = Result<(K, Origin), watcher::Error>> + Send>>;

/// Where a trigger comes from: what sets its priority in the controller's queue
/// ([`crate::queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A watch event: someone created, changed or deleted the object.
    Event,
    /// A (re-)list: the object is seen again, changed or not.
    List,
}

impl Origin {
    pub fn priority(self) -> crate::queue::Priority {
        match self {
            Origin::Event => crate::queue::Priority::User,
            Origin::List => crate::queue::Priority::Background,
        }
    }
}

/// The `Api` of a namespaced k8s-openapi kind in one namespace, or in all of them when
/// `namespace` is None.
pub fn scoped_api<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// Applies watch events to `writer`'s store, calling `on_init_done` once a (re-)list is
/// complete — after the store holds the listed objects. kube-runtime's reflector keeps a
/// list's objects aside and swaps them in at `InitDone`; signalling before that swap let a
/// waiter on another thread read an empty store (seen: an object re-applied after a restart
/// because the "synced" cache did not show it yet).
fn reflect_tracked<K, S>(
    writer: Writer<K>,
    events: S,
    mut on_init_done: impl FnMut() + Send,
) -> impl Stream<Item = S::Item> + Send
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    reflector(writer, events).inspect(move |ev| {
        if matches!(ev, Ok(watcher::Event::InitDone)) {
            on_init_done();
        }
    })
}

/// Turns reflected watch events into controller triggers, holding back the objects of a
/// (re-)list until its `InitDone`. kube-runtime's reflector keeps a re-list's objects in a
/// side buffer and swaps them into the store only at `InitDone`; a trigger sent earlier makes
/// the controller look up an object that is not in the store yet, and that reconcile is
/// dropped (`ObjectNotFound`) without a retry. Seen here: objects created while a watch was
/// being re-established were never reconciled.
///
/// At `InitDone` the listed objects are read back from the store (`listed`, which then holds
/// exactly them) and cloned one at a time as the controller takes them: holding the list's
/// objects aside here as well would keep a second copy of every object while a list is
/// parsed (the restart peak, measured by `bench/heap`).
fn triggers<K, S>(
    events: S,
    deletes: bool,
    listed: impl Fn() -> Vec<Arc<K>> + Send + 'static,
) -> impl Stream<Item = Result<(K, Origin), watcher::Error>> + Send
where
    K: Clone + Send + Sync + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    triggers_of(events.map(|ev| (0, ev)), deletes, move |_| listed())
}

/// [`triggers`] for the events of several watches into one store, each tagged with its
/// watch: at a watch's `InitDone`, `listed(watch)` reads back what that watch listed.
fn triggers_of<K, S>(
    events: S,
    deletes: bool,
    listed: impl Fn(usize) -> Vec<Arc<K>> + Send + 'static,
) -> impl Stream<Item = Result<(K, Origin), watcher::Error>> + Send
where
    K: Clone + Send + Sync + 'static,
    S: Stream<Item = (usize, Result<watcher::Event<K>, watcher::Error>)> + Send,
{
    type Out<K> = Box<dyn Iterator<Item = Result<(K, Origin), watcher::Error>> + Send>;
    events
        .map(move |(source, ev)| {
            let out: Out<K> = match ev {
                Ok(watcher::Event::Apply(o)) => Box::new(std::iter::once(Ok((o, Origin::Event)))),
                Ok(watcher::Event::Delete(o)) if deletes => {
                    Box::new(std::iter::once(Ok((o, Origin::Event))))
                }
                Ok(watcher::Event::InitDone) => Box::new(
                    listed(source)
                        .into_iter()
                        .map(|o| Ok((K::clone(&o), Origin::List))),
                ),
                Ok(_) => Box::new(std::iter::empty()),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            futures::stream::iter(out)
        })
        .flatten()
}

/// The watch events of `api`, shown to `observe` (whole objects), each object as `slim`
/// leaves it.
fn watch_events<K>(
    api: Api<K>,
    cfg: watcher::Config,
    mut observe: impl FnMut(&watcher::Event<K>) + Send + 'static,
    slim: impl FnMut(&mut K) + Send + 'static,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    watcher(api, cfg.page_size(LIST_PAGE))
        .backoff(WatchBackoff::default())
        .inspect(move |r| {
            if let Ok(ev) = r {
                observe(ev)
            }
        })
        .modify(slim)
}

/// How long a failed watch waits before trying again: doubling from 0.5 s to 5 s, reset by
/// the first event that arrives. kube-runtime's default (client-go's: up to 30 s, reset only
/// after two healthy minutes) left bosun up to half a minute behind an API server that came
/// back from a 10 s outage (measured by the chaos suite); five watches retrying every 5 s
/// are no burden to a struggling one.
pub struct WatchBackoff {
    next: Duration,
}

const WATCH_RETRY_MIN: Duration = Duration::from_millis(500);
const WATCH_RETRY_MAX: Duration = Duration::from_secs(5);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: WATCH_RETRY_MIN,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (now * 2).min(WATCH_RETRY_MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_RETRY_MIN;
    }
}

/// Stores watch events, tracks the first full list, and turns the events into triggers.
fn reflect_events<K, S>(
    events: S,
    dyntype: K::DynamicType,
    deletes: bool,
) -> (Store<K>, ObjectStream<K>, Synced)
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let writer = Writer::new(dyntype);
    let reader = writer.as_reader();
    let (tx, rx) = watch::channel(false);
    let events = reflect_tracked(writer, events, move || {
        let _ = tx.send(true);
    });
    let listed = reader.clone();
    let stream = triggers(events, deletes, move || listed.state());
    (reader, Box::pin(stream), Synced::of(rx))
}

/// The store of a child cache: its objects keyed by namespace and name alone. kube-runtime's
/// `Store` keys each object by an `ObjectRef`, which holds the kind's `ApiResource` (five
/// strings, the same for every object of a cache), the namespace, the name, and the
/// object's resourceVersion and UID: ≈0.6 KB a key in nine allocations, more than the
/// slimmed metadata it points to (massif). Here a key is one string. Like kube-runtime's
/// writer, a (re-)list is gathered aside and swapped in whole at its `InitDone`.
///
/// Sharded, one store is filled by two watches (this member's children, and the unlabelled
/// ones), each into a map of its own: a child whose label changes leaves one watch and
/// enters the other, and the two watches' events come in no common order — one map per watch
/// keeps a late event of one from overwriting or deleting what the other showed since. A
/// read prefers the newer of two copies (the higher `resourceVersion`).
pub(crate) struct Compact<T> {
    inner: Arc<std::sync::RwLock<CompactInner<T>>>,
}

struct CompactInner<T> {
    sources: Vec<Source<T>>,
    /// The watches that fill the store: synced once each has listed.
    active: usize,
}

struct Source<T> {
    objects: HashMap<Box<str>, Arc<T>>,
    /// The objects of a list in progress.
    listing: Option<HashMap<Box<str>, Arc<T>>>,
    listed: bool,
}

impl<T> Default for Source<T> {
    fn default() -> Self {
        Source {
            objects: HashMap::new(),
            listing: None,
            listed: false,
        }
    }
}

impl<T> Clone for Compact<T> {
    fn clone(&self) -> Self {
        Compact {
            inner: self.inner.clone(),
        }
    }
}

/// A store key: namespace and name ("" for cluster-scoped kinds), which neither contains.
fn compact_key(namespace: &str, name: &str) -> Box<str> {
    let mut k = String::with_capacity(namespace.len() + 1 + name.len());
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k.into_boxed_str()
}

/// The newer of two copies of one object: the higher `resourceVersion` (etcd's revision; the
/// first when either is not a number).
fn newer<'a, T: Resource>(a: &'a Arc<T>, b: &'a Arc<T>) -> &'a Arc<T> {
    let rv = |o: &T| {
        o.meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (rv(a), rv(b)) {
        (Some(x), Some(y)) if y > x => b,
        _ => a,
    }
}

impl<T: Resource> Compact<T> {
    fn new() -> Self {
        Compact {
            inner: Arc::new(std::sync::RwLock::new(CompactInner {
                sources: vec![Source::default()],
                active: 1,
            })),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, CompactInner<T>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, CompactInner<T>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Filled by `n` watches (before any of them starts).
    fn fed_by(&self, n: usize) {
        let mut inner = self.write();
        let n = n.max(1);
        inner.sources.resize_with(n, Source::default);
        inner.active = n;
    }

    fn key_of(o: &T) -> Box<str> {
        let m = o.meta();
        compact_key(
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or(""),
        )
    }

    /// Applies one watch event of watch `source`, as kube-runtime's
    /// `Writer::apply_watcher_event` does. True when this event completed the last first
    /// list: every watch has listed.
    fn apply(&self, source: usize, ev: &watcher::Event<T>) -> bool
    where
        T: Clone,
    {
        let mut inner = self.write();
        if source >= inner.sources.len() {
            inner.sources.resize_with(source + 1, Source::default);
        }
        let src = &mut inner.sources[source];
        match ev {
            watcher::Event::Apply(o) => {
                src.objects.insert(Self::key_of(o), Arc::new(o.clone()));
            }
            watcher::Event::Delete(o) => {
                src.objects.remove(&Self::key_of(o));
            }
            watcher::Event::Init => src.listing = Some(HashMap::new()),
            watcher::Event::InitApply(o) => {
                let key = Self::key_of(o);
                src.listing
                    .get_or_insert_with(HashMap::new)
                    .insert(key, Arc::new(o.clone()));
            }
            watcher::Event::InitDone => {
                if let Some(mut listed) = src.listing.take() {
                    listed.shrink_to_fit();
                    src.objects = listed;
                }
                src.listed = true;
                let active = inner.active;
                return inner.sources.iter().take(active).all(|s| s.listed);
            }
        }
        false
    }

    /// One object (`namespace` empty for a cluster-scoped kind).
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        let key = compact_key(namespace, name);
        let inner = self.read();
        let mut found: Option<&Arc<T>> = None;
        for s in &inner.sources {
            if let Some(o) = s.objects.get(&key) {
                found = Some(match found {
                    Some(f) => newer(f, o),
                    None => o,
                });
            }
        }
        found.cloned()
    }

    /// Every object.
    pub(crate) fn state(&self) -> Vec<Arc<T>> {
        let inner = self.read();
        match inner.sources.as_slice() {
            [one] => one.objects.values().cloned().collect(),
            _ => {
                let mut all: HashMap<&str, &Arc<T>> = HashMap::new();
                for s in &inner.sources {
                    for (k, o) in &s.objects {
                        all.entry(k).and_modify(|f| *f = newer(f, o)).or_insert(o);
                    }
                }
                all.into_values().cloned().collect()
            }
        }
    }

    /// The objects watch `source` holds.
    fn state_of(&self, source: usize) -> Vec<Arc<T>> {
        self.read()
            .sources
            .get(source)
            .map(|s| s.objects.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Objects held (one held by two watches counts once).
    pub(crate) fn len(&self) -> usize {
        let inner = self.read();
        let mut n = 0;
        for (i, s) in inner.sources.iter().enumerate() {
            n += s
                .objects
                .keys()
                .filter(|k| {
                    !inner.sources[..i]
                        .iter()
                        .any(|e| e.objects.contains_key(*k))
                })
                .count();
        }
        n
    }

    /// The namespaces and names of the objects whose owner references name `uid`.
    fn owned_by(&self, uid: &str) -> Vec<Named> {
        let inner = self.read();
        let mut out: Vec<Named> = Vec::new();
        for s in &inner.sources {
            for o in s.objects.values() {
                let m = o.meta();
                let owned = m
                    .owner_references
                    .as_ref()
                    .is_some_and(|refs| refs.iter().any(|r| r.uid == uid));
                if owned {
                    let id = (m.namespace.clone(), m.name.clone().unwrap_or_default());
                    if !out.contains(&id) {
                        out.push(id);
                    }
                }
            }
        }
        out
    }

    /// The namespaces and names of the objects operator-sdk's annotations link to the owner
    /// `key` of `primary_type`, and whose owner references do not name `uid` (those are
    /// [`Compact::owned_by`]'s).
    fn annotated_to(&self, uid: &str, key: &str, primary_type: &str) -> Vec<Named> {
        let inner = self.read();
        let mut out: Vec<Named> = Vec::new();
        for s in &inner.sources {
            for o in s.objects.values() {
                let m = o.meta();
                let linked = crate::shard::children::annotated_owner(m, primary_type)
                    .is_some_and(|k| k == key)
                    && !m
                        .owner_references
                        .as_ref()
                        .is_some_and(|refs| refs.iter().any(|r| r.uid == uid));
                if linked {
                    let id = (m.namespace.clone(), m.name.clone().unwrap_or_default());
                    if !out.contains(&id) {
                        out.push(id);
                    }
                }
            }
        }
        out
    }
}

/// [`reflect_events`] into a [`Compact`] store, from the events of its watches each tagged
/// with the watch's number.
#[cfg(test)]
fn reflect_compact<T, S>(events: S, deletes: bool) -> (Compact<T>, ObjectStream<T>, Synced)
where
    T: Resource + Clone + Debug + Send + Sync + 'static,
    S: Stream<Item = (usize, Result<watcher::Event<T>, watcher::Error>)> + Send + 'static,
{
    let store = Compact::new();
    let (stream, synced) = reflect_into(store.clone(), events, deletes);
    (store, stream, synced)
}

/// [`reflect_compact`] into `store`.
fn reflect_into<T, S>(store: Compact<T>, events: S, deletes: bool) -> (ObjectStream<T>, Synced)
where
    T: Resource + Clone + Debug + Send + Sync + 'static,
    S: Stream<Item = (usize, Result<watcher::Event<T>, watcher::Error>)> + Send + 'static,
{
    let writer = store.clone();
    let (tx, rx) = watch::channel(false);
    let events = events.inspect(move |(source, ev)| {
        if let Ok(ev) = ev {
            if writer.apply(*source, ev) {
                let _ = tx.send(true);
            }
        }
    });
    let listed = store.clone();
    let stream = triggers_of(events, deletes, move |source| listed.state_of(source));
    (Box::pin(stream), Synced::of(rx))
}

/// A child cache's store, its [`ChildWatch`] and its triggers: `start(watch, config)` builds
/// the stream of one of its watches, each object as the cache keeps it.
fn child_store<K, T>(
    namespace: Option<&str>,
    dyntype: &K::DynamicType,
    own_selector: &str,
    start: impl FnMut(
            usize,
            watcher::Config,
        )
            -> futures::stream::BoxStream<'static, Result<watcher::Event<T>, watcher::Error>>
        + Send
        + 'static,
) -> (Compact<T>, ObjectStream<T>, Synced)
where
    K: Resource,
    T: Resource + Clone + Debug + Send + Sync + 'static,
{
    let store: Compact<T> = Compact::new();
    let (owners, linked, counted, uids) =
        (store.clone(), store.clone(), store.clone(), store.clone());
    let slot = Arc::new(ChildWatch {
        selectors: std::sync::OnceLock::new(),
        resource: kube::core::ApiResource::erase::<K>(dyntype),
        namespace: namespace.map(str::to_string),
        own_selector: own_selector.to_string(),
        children_of: Box::new(move |uid| owners.owned_by(uid)),
        annotated_to: Box::new(move |uid, key, t| linked.annotated_to(uid, key, t)),
        len: Box::new(move || counted.len()),
        fingerprints: std::sync::OnceLock::new(),
        uid_of: Box::new(move |ns, name| uids.get(ns, name)?.meta().uid.clone()),
    });
    let events = child_events(slot.clone(), store.clone(), start);
    let (stream, mut synced) = reflect_into(store.clone(), events, true);
    synced.child = Some(slot);
    (store, stream, synced)
}

/// The events of a child cache's watches, started when first polled: one watch of the
/// cache's own selector, or — once a sharded controller chose them ([`ChildWatch::select`])
/// — one per shard selector, each tagged with its number. `start` builds the watch of one
/// selector (and knows its number: a fingerprint table keeps each watch's lists apart).
fn child_events<T>(
    slot: Arc<ChildWatch>,
    store: Compact<T>,
    mut start: impl FnMut(
            usize,
            watcher::Config,
        )
            -> futures::stream::BoxStream<'static, Result<watcher::Event<T>, watcher::Error>>
        + Send
        + 'static,
) -> impl Stream<Item = (usize, Result<watcher::Event<T>, watcher::Error>)> + Send + 'static
where
    T: Resource + Send + Sync + 'static,
{
    futures::stream::once(async move {
        let selectors = slot.watches();
        store.fed_by(selectors.len());
        let watches: Vec<_> = selectors
            .iter()
            .enumerate()
            .map(|(i, sel)| start(i, selector_config(sel)).map(move |ev| (i, ev)))
            .collect();
        futures::stream::select_all(watches)
    })
    .flatten()
}

/// The same event with its object mapped by `f`.
fn map_event<A, B>(ev: watcher::Event<A>, f: &impl Fn(A) -> B) -> watcher::Event<B> {
    use watcher::Event::*;
    match ev {
        Init => Init,
        InitApply(o) => InitApply(f(o)),
        InitDone => InitDone,
        Apply(o) => Apply(f(o)),
        Delete(o) => Delete(f(o)),
    }
}

/// A cache of `api`'s objects for `Controller::for_stream_with(stream, store, dyntype)`: the
/// stream yields created/updated objects and must be polled (the controller does) to fill the
/// store.
pub fn reflect_with<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    cfg: watcher::Config,
) -> (Store<K>, ObjectStream<K>, Synced)
where
    K: Resource,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    reflect_observed(
        api,
        dyntype,
        cfg,
        |_: &watcher::Event<K>| {},
        |_: &mut K| {},
    )
}

/// [`reflect_with`], showing every event to `observe` first, and storing every object as
/// `slim` leaves it.
pub(crate) fn reflect_observed<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    cfg: watcher::Config,
    observe: impl FnMut(&watcher::Event<K>) + Send + 'static,
    mut slim: impl FnMut(&mut K) + Send + 'static,
) -> (Store<K>, ObjectStream<K>, Synced)
where
    K: Resource,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let events = watch_events(api, cfg, observe, move |o: &mut K| {
        o.meta_mut().managed_fields = None;
        slim(o);
    });
    reflect_events(events, dyntype, false)
}

/// [`reflect_observed`] with its watch configuration read when the watch starts (first
/// polled), not when it is built: a controller learns its shard's label selector after the
/// operator built its primary watch.
pub(crate) fn reflect_observed_lazy<K>(
    api: Api<K>,
    dyntype: K::DynamicType,
    cfg: impl FnOnce() -> watcher::Config + Send + 'static,
    observe: impl FnMut(&watcher::Event<K>) + Send + 'static,
    mut slim: impl FnMut(&mut K) + Send + 'static,
) -> (Store<K>, ObjectStream<K>, Synced)
where
    K: Resource,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let events = futures::stream::once(async move {
        watch_events(api, cfg(), observe, move |o: &mut K| {
            o.meta_mut().managed_fields = None;
            slim(o);
        })
    })
    .flatten();
    reflect_events(events, dyntype, false)
}

/// Objects per page of a watch's initial (and re-)LIST: each page is one response body held
/// and parsed at once, and every cache lists at the same moment on a start. kube-runtime's
/// default is 500.
const LIST_PAGE: u32 = 100;

fn selector_config(label_selector: &str) -> watcher::Config {
    let cfg = watcher::Config::default().page_size(LIST_PAGE);
    if label_selector.is_empty() {
        cfg
    } else {
        cfg.labels(label_selector)
    }
}

/// A cache of an operator's children, as objects that `strip` slims down (drop the spec, keep
/// metadata and status, say) before they are stored.
pub struct ChildCache<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash,
{
    held: Held<K>,
}

/// What every cache here holds: the store of what it keeps (whole objects, metadata, packed
/// objects), its sync signal, the kind's dynamic type and, built for an applier, the
/// owned-field fingerprints.
struct Held<T: Resource + 'static>
where
    T::DynamicType: Eq + Hash,
{
    store: Compact<T>,
    synced: Synced,
    dyntype: T::DynamicType,
    fingerprints: Option<Fingerprints>,
}

impl<T: Resource + 'static> Clone for Held<T>
where
    T::DynamicType: Clone + Eq + Hash,
{
    fn clone(&self) -> Self {
        Held {
            store: self.store.clone(),
            synced: self.synced.clone(),
            dyntype: self.dyntype.clone(),
            fingerprints: self.fingerprints.clone(),
        }
    }
}

impl<T: Resource + Clone + 'static> Held<T>
where
    T::DynamicType: Clone + Eq + Hash,
{
    /// One stored object (`namespace` empty for a cluster-scoped kind).
    fn lookup(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.store.get(namespace, name)
    }

    /// One object's metadata, with the owned-field fingerprint as a `managedFields` summary
    /// when the cache keeps fingerprints (what [`crate::apply::Applier`] reads).
    fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        let meta = self.lookup(namespace, name)?.meta().clone();
        Some(summarized(meta, self.fingerprints.as_ref()))
    }
}

/// The part of a cache's interface every cache shares through its [`Held`].
macro_rules! held_by {
    ($cache:ident) => {
        impl<K: Resource + Clone + 'static> Clone for $cache<K>
        where
            K::DynamicType: Clone + Eq + Hash,
        {
            fn clone(&self) -> Self {
                $cache {
                    held: self.held.clone(),
                }
            }
        }

        impl<K: Resource + Clone + 'static> $cache<K>
        where
            K::DynamicType: Clone + Eq + Hash,
        {
            pub fn len(&self) -> usize {
                self.held.store.len()
            }

            pub fn is_empty(&self) -> bool {
                self.held.store.len() == 0
            }

            pub fn synced(&self) -> &Synced {
                &self.held.synced
            }
        }
    };
}

held_by!(ChildCache);
held_by!(MetaCache);
held_by!(PackedCache);

/// The fingerprints of what one field manager owns, per object UID, with the epoch of the
/// (re-)list that last saw the object: objects gone during a watch gap leave at the end of
/// the next list, deleted ones at once.
#[derive(Clone)]
struct Fingerprints {
    manager: Arc<str>,
    /// Told of every object that goes, so its memo does not outlive it.
    applier: Applier,
    /// UID → (fingerprint, epoch), as byte arrays: 36 bytes an entry instead of 48 with
    /// `u128`'s 16-byte alignment.
    table: Arc<Mutex<Table>>,
}

/// UID bits → (fingerprint bits, the watch (low bit) and the epoch of its last list that saw
/// the object).
type Table = HashMap<[u8; 16], ([u8; 16], u32)>;

impl Fingerprints {
    fn new(applier: &Applier) -> Self {
        Fingerprints {
            manager: applier.field_manager().into(),
            applier: applier.clone(),
            table: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the table in step with watch `source` (0 or 1: a sharded cache runs two):
    /// `epoch` counts the lists that watch has seen. Each entry is tagged with the watch and
    /// list that last showed it, so one watch's list or deletion never drops what the other
    /// watch shows (a child whose shard label changed moves from one to the other).
    fn observe<K: Resource + Serialize>(
        &self,
        ev: &watcher::Event<K>,
        source: usize,
        epoch: &mut u32,
    ) {
        let source = u32::from(source != 0);
        let tag = |epoch: u32| (epoch << 1) | source;
        let fp = |o: &K| -> Fingerprint {
            let entries = o.meta().managed_fields.as_deref().unwrap_or_default();
            if !crate::owned::holds(entries, &self.manager) {
                return NOTHING_OWNED;
            }
            serde_json::to_value(o)
                .ok()
                .and_then(|v| crate::owned::live(&v, entries, &self.manager).fingerprint)
                .unwrap_or(NOTHING_OWNED)
        };
        let uid = |o: &K| {
            o.meta()
                .uid
                .as_deref()
                .map(|u| crate::owned::uid_bits(u).to_le_bytes())
        };
        match ev {
            watcher::Event::Init => *epoch = epoch.wrapping_add(1) & (u32::MAX >> 1),
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                if let Some(u) = uid(o) {
                    let f = fp(o).to_le_bytes();
                    self.lock().insert(u, (f, tag(*epoch)));
                }
            }
            watcher::Event::Delete(o) => {
                if let Some(u) = uid(o) {
                    let mut table = self.lock();
                    if table.get(&u).is_some_and(|(_, t)| t & 1 == source) {
                        table.remove(&u);
                        drop(table);
                        self.applier.forget_bits(u128::from_le_bytes(u));
                    }
                }
            }
            watcher::Event::InitDone => {
                let e = tag(*epoch);
                let mut gone = Vec::new();
                self.lock().retain(|u, (_, seen)| {
                    let keep = *seen & 1 != source || *seen == e;
                    if !keep {
                        gone.push(u128::from_le_bytes(*u));
                    }
                    keep
                });
                for u in gone {
                    self.applier.forget_bits(u);
                }
            }
        }
    }

    fn get(&self, uid: &str) -> Option<Fingerprint> {
        self.lock()
            .get(&crate::owned::uid_bits(uid).to_le_bytes())
            .map(|(f, _)| Fingerprint::from_le_bytes(*f))
            .filter(|f| *f != NOTHING_OWNED)
    }
}

/// `meta` with the owned-field fingerprint as a `managedFields` summary (what
/// [`crate::apply::Applier`] reads), for a cache built with fingerprints.
fn summarized(mut meta: ObjectMeta, fingerprints: Option<&Fingerprints>) -> ObjectMeta {
    if let Some(fps) = fingerprints {
        let fingerprint = meta.uid.as_deref().and_then(|u| fps.get(u));
        crate::owned::keep_summary(&mut meta, &fps.manager, Owned { fingerprint });
    }
    meta
}

/// A watch of whole objects whose fingerprints of the fields `applier`'s field manager owns
/// are taken before `keep` turns each object into what the cache stores. The applier is told
/// of every object that goes, so its memo forgets it.
fn watch_fingerprinted<K, T>(
    api: Api<K>,
    dyntype: K::DynamicType,
    label_selector: &str,
    applier: &Applier,
    keep: impl Fn(K) -> T + Send + Sync + 'static,
) -> (Held<T>, ObjectStream<T>)
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
    T: Resource<DynamicType = K::DynamicType> + Clone + Debug + Send + Sync + 'static,
{
    let fps = Fingerprints::new(applier);
    let observer = fps.clone();
    let keep = Arc::new(keep);
    let watched = api.clone();
    let (store, stream, synced) = child_store::<K, _>(
        api.namespace(),
        &dyntype,
        label_selector,
        move |source, cfg| {
            let observer = observer.clone();
            let keep = keep.clone();
            let mut epoch = 0;
            watcher(watched.clone(), cfg)
                .backoff(WatchBackoff::default())
                .inspect(move |r| {
                    if let Ok(ev) = r {
                        observer.observe(ev, source, &mut epoch)
                    }
                })
                .map_ok(move |ev| map_event(ev, &*keep))
                .boxed()
        },
    );
    if let Some(w) = synced.child_watch() {
        w.keeps_fingerprints_of(Some(&fps));
    }
    let held = Held {
        store,
        synced,
        dyntype,
        fingerprints: Some(fps),
    };
    (held, stream)
}

/// Table value for "the manager owns no field of this object".
const NOTHING_OWNED: Fingerprint = 0;

impl<K> ChildCache<K>
where
    K: Resource,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Watches `api` for objects matching `label_selector` (everything when empty). Poll the
    /// returned stream (hand it to the controller) to keep the cache filled; it also yields
    /// deletions, so an owner learns that a child went away.
    pub fn watch_api(
        api: Api<K>,
        dyntype: K::DynamicType,
        label_selector: &str,
        strip: fn(&mut K),
    ) -> (Self, ObjectStream<K>) {
        Self::watching(
            api,
            dyntype,
            label_selector,
            strip,
            None,
            |_: &watcher::Event<K>, _: usize, _: &mut u32| {},
        )
    }

    fn watching(
        api: Api<K>,
        dyntype: K::DynamicType,
        label_selector: &str,
        strip: fn(&mut K),
        fingerprints: Option<Fingerprints>,
        observe: impl FnMut(&watcher::Event<K>, usize, &mut u32) + Send + 'static,
    ) -> (Self, ObjectStream<K>) {
        let observe = Arc::new(Mutex::new(observe));
        let watched = api.clone();
        let (store, stream, synced) = child_store::<K, _>(
            api.namespace(),
            &dyntype,
            label_selector,
            move |source, cfg| {
                let observe = observe.clone();
                let mut epoch = 0;
                watch_events(
                    watched.clone(),
                    cfg,
                    move |ev: &watcher::Event<K>| {
                        (observe.lock().unwrap_or_else(|e| e.into_inner()))(ev, source, &mut epoch)
                    },
                    move |o: &mut K| {
                        o.meta_mut().managed_fields = None;
                        strip(o);
                    },
                )
                .boxed()
            },
        );
        if let Some(w) = synced.child_watch() {
            w.keeps_fingerprints_of(fingerprints.as_ref());
        }
        (
            ChildCache {
                held: Held {
                    store,
                    synced,
                    dyntype,
                    fingerprints,
                },
            },
            stream,
        )
    }

    /// One cached object (`namespace` empty for a cluster-scoped kind).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.held.lookup(namespace, name)
    }

    /// The cached metadata of one object; from a cache built with
    /// [`ChildCache::watch_owned`], with the owned-field fingerprint as a `managedFields`
    /// summary (what [`crate::apply::Applier`] reads).
    pub fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        self.held.meta(namespace, name)
    }

    /// Every cached object.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.held.store.state()
    }
}

impl<K> ChildCache<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// [`ChildCache::watch_api`] for a k8s-openapi kind in `namespace` (all when None).
    pub fn watch(
        client: Client,
        namespace: Option<&str>,
        label_selector: &str,
        strip: fn(&mut K),
    ) -> (Self, ObjectStream<K>) {
        Self::watch_api(scoped_api(client, namespace), (), label_selector, strip)
    }
}

impl<K> ChildCache<K>
where
    K: Resource,
    K: Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// [`ChildCache::watch_api`], keeping for each object the fingerprint of the fields
    /// `applier`'s field manager owns (what the applier compares), computed from the whole
    /// object before `strip` runs: 16 bytes per object in a side table, and one
    /// serialization per event. The applier is told of every object that goes, so its
    /// memo forgets it.
    pub fn watch_api_owned(
        api: Api<K>,
        dyntype: K::DynamicType,
        label_selector: &str,
        strip: fn(&mut K),
        applier: &Applier,
    ) -> (Self, ObjectStream<K>) {
        let fps = Fingerprints::new(applier);
        let observer = fps.clone();
        Self::watching(
            api,
            dyntype,
            label_selector,
            strip,
            Some(fps),
            move |ev: &watcher::Event<K>, source: usize, epoch: &mut u32| {
                observer.observe(ev, source, epoch)
            },
        )
    }
}

impl<K> ChildCache<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
{
    /// [`ChildCache::watch_api_owned`] for a k8s-openapi kind in `namespace` (all when None).
    pub fn watch_owned(
        client: Client,
        namespace: Option<&str>,
        label_selector: &str,
        strip: fn(&mut K),
        applier: &Applier,
    ) -> (Self, ObjectStream<K>) {
        Self::watch_api_owned(
            scoped_api(client, namespace),
            (),
            label_selector,
            strip,
            applier,
        )
    }
}

/// A metadata-only cache (`PartialObjectMeta`): for children whose spec and status the
/// pipeline never reads.
pub struct MetaCache<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash,
{
    held: Held<PartialObjectMeta<K>>,
}

impl<K> MetaCache<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Watches the metadata of `api`'s kind where `api` points (a namespace, or all) for
    /// objects matching `label_selector` (everything when empty).
    pub fn watch_api(
        api: Api<PartialObjectMeta<K>>,
        dyntype: K::DynamicType,
        label_selector: &str,
    ) -> (Self, ObjectStream<PartialObjectMeta<K>>) {
        let watched = api.clone();
        let (store, stream, synced) =
            child_store::<K, _>(api.namespace(), &dyntype, label_selector, move |_, cfg| {
                watch_events(
                    watched.clone(),
                    cfg,
                    |_: &watcher::Event<PartialObjectMeta<K>>| {},
                    |m: &mut PartialObjectMeta<K>| {
                        m.metadata.managed_fields = None;
                    },
                )
                .boxed()
            });
        (
            MetaCache {
                held: Held {
                    store,
                    synced,
                    dyntype,
                    fingerprints: None,
                },
            },
            stream,
        )
    }

    /// The cached metadata of one object (`namespace` is ignored for cluster-scoped kinds
    /// when empty); from a cache built with [`MetaCache::watch_api_owned`], with the
    /// owned-field fingerprint as a `managedFields` summary.
    pub fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        self.held.meta(namespace, name)
    }

    /// The metadata of every cached object.
    pub fn all(&self) -> Vec<Arc<PartialObjectMeta<K>>> {
        self.held.store.state()
    }

    pub fn dyntype(&self) -> &K::DynamicType {
        &self.held.dyntype
    }
}

impl<K> MetaCache<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// A metadata cache fed by a watch of whole objects (`api`), so that the fingerprint of
    /// the fields `applier`'s field manager owns can be computed before only the metadata
    /// is kept: the memory of [`MetaCache::watch_api`] and what the applier needs to see
    /// drift, for the price of parsing whole objects. The applier is told of every object
    /// that goes.
    /// `slim` drops what the operator does not read of the metadata before it is stored.
    pub fn watch_api_owned(
        api: Api<K>,
        dyntype: K::DynamicType,
        label_selector: &str,
        slim: fn(&mut ObjectMeta),
        applier: &Applier,
    ) -> (Self, ObjectStream<PartialObjectMeta<K>>) {
        let (held, stream) =
            watch_fingerprinted(api, dyntype, label_selector, applier, move |mut o: K| {
                let mut metadata = std::mem::take(o.meta_mut());
                metadata.managed_fields = None;
                slim(&mut metadata);
                PartialObjectMeta {
                    types: None,
                    metadata,
                    _phantom: std::marker::PhantomData,
                }
            });
        (MetaCache { held }, stream)
    }
}

impl<K> MetaCache<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// [`MetaCache::watch_api`] for a k8s-openapi kind in `namespace` (all when None).
    pub fn watch(
        client: Client,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> (Self, ObjectStream<PartialObjectMeta<K>>) {
        Self::watch_api(scoped_api(client, namespace), (), label_selector)
    }

    /// [`MetaCache::watch_api_owned`] for a k8s-openapi kind in `namespace` (all when None).
    pub fn watch_owned(
        client: Client,
        namespace: Option<&str>,
        label_selector: &str,
        slim: fn(&mut ObjectMeta),
        applier: &Applier,
    ) -> (Self, ObjectStream<PartialObjectMeta<K>>)
    where
        K: Serialize,
    {
        Self::watch_api_owned(
            scoped_api(client, namespace),
            (),
            label_selector,
            slim,
            applier,
        )
    }
}

/// An object kept as its metadata and, for everything else, the JSON text of the object
/// without its metadata: a few hundred bytes where k8s-openapi's structs hold every optional
/// part inline, used or not. [`Packed::unpack`] gives the object back.
pub struct Packed<K> {
    pub metadata: ObjectMeta,
    body: Box<[u8]>,
    kind: std::marker::PhantomData<fn() -> K>,
}

impl<K> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Packed {
            metadata: self.metadata.clone(),
            body: self.body.clone(),
            kind: std::marker::PhantomData,
        }
    }
}

impl<K> Debug for Packed<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("metadata", &self.metadata)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

impl<K: Resource> Resource for Packed<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<K: Resource + Serialize + DeserializeOwned> Packed<K> {
    /// Splits `object` into its metadata and the JSON text of the rest.
    pub fn pack(mut object: K) -> Result<Self, serde_json::Error> {
        let metadata = std::mem::take(object.meta_mut());
        Ok(Packed {
            metadata,
            body: serde_json::to_vec(&object)?.into_boxed_slice(),
            kind: std::marker::PhantomData,
        })
    }

    /// The object [`Packed::pack`] was given.
    pub fn unpack(&self) -> Result<K, serde_json::Error> {
        let mut object: K = serde_json::from_slice(&self.body)?;
        *object.meta_mut() = self.metadata.clone();
        Ok(object)
    }
}

/// A cache of an operator's children as [`Packed`] objects: slimmed by `strip`, then packed,
/// with the owned-field fingerprint of each whole object kept as [`ChildCache::watch_owned`]
/// keeps it. Reads decode the one object asked for.
pub struct PackedCache<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash,
{
    held: Held<Packed<K>>,
}

impl<K> PackedCache<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// Watches `api` for objects matching `label_selector` (everything when empty); the
    /// stream yields created, updated and deleted objects, and must be polled to fill the
    /// cache. The applier is told of every object that goes.
    pub fn watch_api_owned(
        api: Api<K>,
        dyntype: K::DynamicType,
        label_selector: &str,
        strip: fn(&mut K),
        applier: &Applier,
    ) -> (Self, ObjectStream<Packed<K>>) {
        let dt = dyntype.clone();
        let (held, stream) = watch_fingerprinted(
            api,
            dyntype,
            label_selector,
            applier,
            move |mut o: K| {
                o.meta_mut().managed_fields = None;
                strip(&mut o);
                let metadata = o.meta().clone();
                Packed::pack(o).unwrap_or_else(|e| {
                    // Serializing a typed object fails only for a map with non-string keys;
                    // such an object is kept as its metadata, and `get` reports it.
                    tracing::error!(kind = %K::kind(&dt), error = %e, "could not pack a cached object");
                    Packed {
                        metadata,
                        body: Box::default(),
                        kind: std::marker::PhantomData,
                    }
                })
            },
        );
        (PackedCache { held }, stream)
    }

    /// One cached object, decoded (`namespace` empty for a cluster-scoped kind).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let packed = self.held.lookup(namespace, name)?;
        match packed.unpack() {
            Ok(o) => Some(Arc::new(o)),
            Err(e) => {
                tracing::error!(kind = %K::kind(&self.held.dyntype), %namespace, %name, error = %e, "could not decode a cached object");
                None
            }
        }
    }

    /// The cached metadata of one object, with the owned-field fingerprint as a
    /// `managedFields` summary (what [`crate::apply::Applier`] reads).
    pub fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        self.held.meta(namespace, name)
    }
}

impl<K> PackedCache<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
{
    /// [`PackedCache::watch_api_owned`] for a k8s-openapi kind in `namespace` (all when None).
    pub fn watch_owned(
        client: Client,
        namespace: Option<&str>,
        label_selector: &str,
        strip: fn(&mut K),
        applier: &Applier,
    ) -> (Self, ObjectStream<Packed<K>>) {
        Self::watch_api_owned(
            scoped_api(client, namespace),
            (),
            label_selector,
            strip,
            applier,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn packed_objects_decode_to_what_was_packed() {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("a".into());
        c.metadata.namespace = Some("ns".into());
        c.metadata.labels = Some([("l".to_string(), "v".to_string())].into());
        c.data = Some([("k".to_string(), "v\n\"q\"".to_string())].into());
        c.binary_data = Some([("b".to_string(), k8s_openapi::ByteString(vec![0, 1, 255]))].into());
        let p = Packed::pack(c.clone()).expect("pack");
        assert_eq!(p.meta(), &c.metadata, "the metadata is kept as it is");
        assert!(
            !String::from_utf8_lossy(&p.body).contains("\"name\""),
            "the body holds no metadata: {p:?}"
        );
        assert_eq!(p.unpack().expect("unpack"), c);
        assert_eq!(
            Packed::pack(ConfigMap::default())
                .and_then(|p| p.unpack())
                .expect("roundtrip"),
            ConfigMap::default()
        );
    }

    #[tokio::test]
    async fn synced_is_signalled_only_once_the_store_holds_the_list() {
        let cm = |n: &str| {
            let mut c = ConfigMap::default();
            c.metadata.name = Some(n.into());
            c.metadata.namespace = Some("ns".into());
            c
        };
        use watcher::Event::*;
        let events = stream::iter(vec![
            Ok(Init),
            Ok(InitApply(cm("a"))),
            Ok(InitApply(cm("b"))),
            Ok(InitDone),
        ]);
        let writer: Writer<ConfigMap> = Writer::new(());
        let reader = writer.as_reader();
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let probe = (reader.clone(), seen.clone());
        let s = reflect_tracked(writer, events, move || {
            probe.1.store(probe.0.len(), Ordering::SeqCst);
        });
        let n = s.count().await;
        assert_eq!(n, 4);
        assert_eq!(
            seen.load(Ordering::SeqCst),
            2,
            "the store held the list when synced was signalled"
        );
    }

    #[tokio::test]
    async fn the_compact_store_swaps_a_relist_in_whole_and_is_synced_after() {
        let cm = |ns: Option<&str>, n: &str, v: &str| {
            let mut c = ConfigMap::default();
            c.metadata.name = Some(n.into());
            c.metadata.namespace = ns.map(str::to_string);
            c.data = Some([("v".to_string(), v.to_string())].into());
            c
        };
        use watcher::Event::*;
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let (store, stream, synced) = reflect_compact(rx.map(|e| (0, e)), true);
        let mut stream = stream;
        let send = |ev| tx.unbounded_send(Ok(ev)).expect("send");
        let v = |o: Option<Arc<ConfigMap>>| {
            o.and_then(|o| o.data.as_ref().and_then(|d| d.get("v").cloned()))
        };
        // The first list: nothing shows, and the cache is not synced, until its InitDone.
        send(Init);
        send(InitApply(cm(Some("a"), "x", "1")));
        send(InitApply(cm(None, "x", "2")));
        send(InitDone);
        assert_eq!(stream.next().await.map(|r| r.is_ok()), Some(true));
        assert!(synced.wait().await);
        assert_eq!(store.len(), 2);
        // Namespace and name make the key: a cluster-scoped object and a namespaced one of
        // the same name are two objects.
        assert_eq!(v(store.get("a", "x")).as_deref(), Some("1"));
        assert_eq!(v(store.get("", "x")).as_deref(), Some("2"));
        assert_eq!(store.get("b", "x"), None);
        let _ = stream.next().await;
        // Updates and deletes apply as they come.
        send(Apply(cm(Some("a"), "x", "3")));
        let _ = stream.next().await;
        assert_eq!(v(store.get("a", "x")).as_deref(), Some("3"));
        send(Delete(cm(None, "x", "2")));
        let _ = stream.next().await;
        assert_eq!(store.get("", "x"), None);
        // A re-list is gathered aside: the old objects stay until its InitDone, then only
        // the listed ones are left.
        send(Init);
        send(InitApply(cm(Some("b"), "y", "4")));
        send(InitApply(cm(Some("b"), "z", "5")));
        let next = stream.next();
        futures::pin_mut!(next);
        assert!(
            futures::poll!(&mut next).is_pending(),
            "nothing shows before InitDone"
        );
        assert_eq!(v(store.get("a", "x")).as_deref(), Some("3"));
        assert_eq!(store.get("b", "y"), None);
        send(InitDone);
        assert_eq!(next.await.map(|r| r.is_ok()), Some(true));
        assert_eq!(store.get("a", "x"), None, "gone during the watch gap");
        assert_eq!(v(store.get("b", "y")).as_deref(), Some("4"));
        assert_eq!(store.len(), 2);
    }

    /// Sharded, a child cache is filled by two watches (this member's children, the
    /// unlabelled ones). A child relabelled leaves one and enters the other, and the two
    /// watches' events interleave in any order: the store keeps the newer copy, never drops an
    /// object one watch still shows, counts it once, and is synced only once both listed.
    #[tokio::test]
    async fn two_watches_fill_one_store_in_any_order() {
        use watcher::Event::*;
        let cm = |n: &str, rv: &str, v: &str| {
            let mut c = ConfigMap::default();
            c.metadata.name = Some(n.into());
            c.metadata.namespace = Some("ns".into());
            c.metadata.resource_version = Some(rv.into());
            c.data = Some([("v".to_string(), v.to_string())].into());
            c
        };
        let v = |o: Option<Arc<ConfigMap>>| {
            o.and_then(|o| o.data.as_ref().and_then(|d| d.get("v").cloned()))
        };
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let (store, stream, synced) = reflect_compact(rx, true);
        store.fed_by(2);
        let mut stream = stream;
        let send = |source: usize, ev| tx.unbounded_send((source, Ok(ev))).expect("send");
        send(0, Init);
        send(0, InitApply(cm("mine", "10", "m")));
        send(0, InitDone);
        assert_eq!(stream.next().await.map(|r| r.is_ok()), Some(true));
        let not_yet = synced.wait();
        futures::pin_mut!(not_yet);
        assert!(
            futures::poll!(&mut not_yet).is_pending(),
            "one watch of two has listed: not synced"
        );
        send(1, Init);
        send(1, InitApply(cm("old", "5", "o1")));
        send(1, InitDone);
        let _ = stream.next().await;
        assert!(not_yet.await, "both listed");
        assert_eq!(store.len(), 2);

        // "old" gets this member's label: the member watch shows it first, the unlabelled
        // watch's stale update and its deletion come after.
        send(0, Apply(cm("old", "20", "o2")));
        send(1, Apply(cm("old", "15", "stale")));
        for _ in 0..2 {
            let _ = stream.next().await;
        }
        assert_eq!(
            v(store.get("ns", "old")).as_deref(),
            Some("o2"),
            "the newer copy"
        );
        assert_eq!(store.len(), 2, "one object in two watches counts once");
        assert_eq!(store.state().len(), 2);
        send(1, Delete(cm("old", "20", "o2")));
        let _ = stream.next().await;
        assert_eq!(
            v(store.get("ns", "old")).as_deref(),
            Some("o2"),
            "left the unlabelled watch, still in the member's"
        );
        // A user removes the label of "mine": the other way round.
        send(1, Apply(cm("mine", "30", "m2")));
        send(0, Delete(cm("mine", "30", "m2")));
        for _ in 0..2 {
            let _ = stream.next().await;
        }
        assert_eq!(v(store.get("ns", "mine")).as_deref(), Some("m2"));
        // A re-list of one watch replaces only what that watch listed.
        send(0, Init);
        send(0, InitApply(cm("new", "40", "n")));
        send(0, InitDone);
        let _ = stream.next().await;
        assert_eq!(store.get("ns", "old"), None, "gone from the member's watch");
        assert_eq!(v(store.get("ns", "mine")).as_deref(), Some("m2"));
        assert_eq!(v(store.get("ns", "new")).as_deref(), Some("n"));
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn one_watchs_list_or_deletion_keeps_the_fingerprint_the_other_watch_shows() {
        use watcher::Event::*;
        type ConfigMapT = k8s_openapi::api::core::v1::ConfigMap;
        let uid_a = "0ef42889-deb4-11e9-ba56-42010a800256";
        let uid_b = "11111111-2222-3333-4444-555555555555";
        let applier = Applier::new("m");
        let f = Fingerprints::new(&applier);
        let (mut e0, mut e1) = (0, 0);
        for ev in [Init, InitApply(cm(uid_a, true)), InitDone] {
            f.observe(&ev, 0, &mut e0);
        }
        for ev in [Init, InitApply(cm(uid_b, true)), InitDone] {
            f.observe(&ev, 1, &mut e1);
        }
        let want = crate::owned::desired(&serde_json::json!({"data": {"k": "v"}}));
        assert_eq!((f.get(uid_a), f.get(uid_b)), (Some(want), Some(want)));
        // b is labelled: it enters watch 0, then leaves watch 1.
        f.observe(&Apply(cm(uid_b, true)), 0, &mut e0);
        f.observe(&Delete(cm(uid_b, true)), 1, &mut e1);
        assert_eq!(f.get(uid_b), Some(want), "watch 0 shows it");
        // Watch 1 lists again (b not in it): b stays, shown by watch 0.
        for ev in [Init, InitDone] {
            f.observe::<ConfigMapT>(&ev, 1, &mut e1);
        }
        assert_eq!(f.get(uid_b), Some(want));
        assert_eq!(f.get(uid_a), Some(want));
        // Watch 0 lists again without a: a goes.
        for ev in [Init, InitApply(cm(uid_b, true)), InitDone] {
            f.observe(&ev, 0, &mut e0);
        }
        assert_eq!(f.get(uid_a), None);
        assert_eq!(f.lock().len(), 1);
    }

    #[tokio::test]
    async fn relisted_objects_trigger_only_after_init_done() {
        use watcher::Event::*;
        let events = || -> Vec<Result<watcher::Event<u32>, watcher::Error>> {
            vec![
                Ok(Apply(1)),
                Ok(Init),
                Ok(InitApply(2)),
                Ok(InitApply(3)),
                Ok(Delete(4)),
                Ok(InitDone),
                Ok(Apply(5)),
            ]
        };
        // What the store holds once the re-list is swapped in.
        let listed = || vec![Arc::new(2), Arc::new(3)];
        let got: Vec<(u32, Origin)> = triggers(stream::iter(events()), false, listed)
            .map(|r| r.expect("ok"))
            .collect()
            .await;
        use Origin::{Event, List};
        assert_eq!(got, vec![(1, Event), (2, List), (3, List), (5, Event)]);
        let got: Vec<(u32, Origin)> = triggers(stream::iter(events()), true, listed)
            .map(|r| r.expect("ok"))
            .collect()
            .await;
        assert_eq!(
            got,
            vec![(1, Event), (4, Event), (2, List), (3, List), (5, Event)],
            "a list's objects are marked as such, a watch's events as events"
        );
    }

    fn cm(uid: &str, owned: bool) -> k8s_openapi::api::core::v1::ConfigMap {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let mut c = k8s_openapi::api::core::v1::ConfigMap::default();
        c.metadata.uid = Some(uid.into());
        c.data = Some([("k".to_string(), "v".to_string())].into());
        c.metadata.managed_fields = owned.then(|| {
            vec![ManagedFieldsEntry {
                manager: Some("m".into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(serde_json::json!({"f:data": {"f:k": {}}}))),
                ..Default::default()
            }]
        });
        c
    }

    #[test]
    fn fingerprints_follow_the_watch() {
        use watcher::Event::*;
        let uid_a = "0ef42889-deb4-11e9-ba56-42010a800256";
        let uid_b = "11111111-2222-3333-4444-555555555555";
        let applier = Applier::new("m");
        let f = Fingerprints::new(&applier);
        let mut epoch = 0;
        for ev in [
            Init,
            InitApply(cm(uid_a, true)),
            InitApply(cm(uid_b, false)),
            InitDone,
        ] {
            f.observe(&ev, 0, &mut epoch);
        }
        let want = crate::owned::desired(&serde_json::json!({"data": {"k": "v"}}));
        assert_eq!(f.get(uid_a), Some(want));
        assert_eq!(f.get(uid_b), None, "the manager owns nothing there");
        f.observe(&Delete(cm(uid_a, true)), 0, &mut epoch);
        assert_eq!(f.get(uid_a), None);
        // b vanished during a watch gap: the next list drops it.
        f.observe(&Apply(cm(uid_a, true)), 0, &mut epoch);
        for ev in [Init, InitApply(cm(uid_a, true)), InitDone] {
            f.observe(&ev, 0, &mut epoch);
        }
        assert_eq!(f.lock().len(), 1);
        assert_eq!(f.get(uid_a), Some(want));
    }

    #[test]
    fn watch_retries_double_to_five_seconds_and_reset() {
        use kube::runtime::utils::Backoff;
        let mut b = WatchBackoff::default();
        let first: Vec<u64> = b.by_ref().take(6).map(|d| d.as_millis() as u64).collect();
        assert_eq!(first, [500, 1000, 2000, 4000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(500)));
    }
}
