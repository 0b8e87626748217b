//! Children whose kinds are known only at run time (whatever a Helm chart or an Ansible role
//! creates): discovery resolved once per kind, and one metadata-only, label-selected watch per
//! kind, added the first time an operator asks for it. Each child event triggers the object
//! that owns it — by its controller owner reference (else by every owner reference to the
//! primary kind, as ansible-operator's references carry no `controller`), or, where an owner
//! reference cannot be
//! used (a cluster-scoped child, or one in another namespace), by operator-sdk's
//! `operator-sdk/primary-resource` (`<namespace>/<name>`) and
//! `operator-sdk/primary-resource-type` (`<Kind>.<group>`) annotations.
//!
//! As operator-sdk's dependent predicate does, an update that changes only a child's status
//! triggers nothing: for kinds with a `generation`, an event whose generation, labels,
//! annotations, owner references and finalizers are unchanged is dropped. Kinds without a
//! generation (ConfigMap, Secret, Service) trigger on every change, since their content
//! moves nothing else.
//!
//! Wired into a controller ([`DynamicChildren::wired`]), each kind's cache joins that
//! controller's child caches before its watches start (it waits for the controller to have
//! started): counted in `bosun_cached_children`, and, sharded, watching this member's
//! children and the unlabelled ones, as a coded operator's child caches do; a move of an
//! object relabels its children of every kind started so far ([`crate::shard::children`]).
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use kube::discovery::Scope as KubeScope;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::apply::Applier;
use crate::cache::{ChildCache, MetaCache};
use crate::controller::{controller_owner_scoped, Trigger};

pub const PRIMARY_RESOURCE_ANNOTATION: &str = "operator-sdk/primary-resource";
pub const PRIMARY_RESOURCE_TYPE_ANNOTATION: &str = "operator-sdk/primary-resource-type";

/// Why a child cache could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ChildCacheError {
    /// Discovery failed, or the API server does not serve the kind.
    #[error("kind {kind} not served: {source}")]
    Discovery { kind: String, source: kube::Error },
    /// The watch ended before its first list completed (the operator is stopping).
    #[error("the watch of {0} stopped before it synced")]
    Stopped(String),
}

/// A kind as the API server serves it.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Discovery, resolved once per kind and remembered: no reconcile pays for it twice.
#[derive(Clone)]
pub struct Discovery {
    client: Client,
    known: Arc<Mutex<HashMap<GroupVersionKind, Resolved>>>,
}

impl Discovery {
    pub fn new(client: Client) -> Self {
        Discovery {
            client,
            known: Arc::default(),
        }
    }

    /// The plural and scope of `gvk`; a kind the API server does not serve is an error (it
    /// is not remembered, so a CRD installed later is found).
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Resolved, kube::Error> {
        if let Some(r) = self.lock().get(gvk) {
            return Ok(r.clone());
        }
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, gvk).await?;
        let r = Resolved {
            resource,
            namespaced: caps.scope == KubeScope::Namespaced,
        };
        self.lock().insert(gvk.clone(), r.clone());
        Ok(r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, Resolved>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The primary object named by the annotations on `meta`, if they name a `P`.
pub fn annotated_primary<P: Resource>(
    meta: &ObjectMeta,
    dyntype: &P::DynamicType,
) -> Option<ObjectRef<P>>
where
    P::DynamicType: Clone,
{
    let ann = meta.annotations.as_ref()?;
    let want_type = primary_resource_type::<P>(dyntype);
    if ann.get(PRIMARY_RESOURCE_TYPE_ANNOTATION)? != &want_type {
        return None;
    }
    let primary = ann.get(PRIMARY_RESOURCE_ANNOTATION)?;
    let r = match primary.split_once('/') {
        Some((ns, name)) if !ns.is_empty() => ObjectRef::new_with(name, dyntype.clone()).within(ns),
        Some((_, name)) => ObjectRef::new_with(name, dyntype.clone()),
        None => ObjectRef::new_with(primary, dyntype.clone()),
    };
    Some(r)
}

/// Every owner reference to a `P` on `meta`, controller or not: ansible-operator's owner
/// references carry no `controller` field, and its dependent watches enqueue every owner of
/// the primary kind.
pub fn plain_owners<P: Resource>(
    meta: &ObjectMeta,
    dyntype: &P::DynamicType,
    owner_namespaced: bool,
) -> Vec<ObjectRef<P>>
where
    P::DynamicType: Clone,
{
    meta.owner_references
        .iter()
        .flatten()
        .filter(|o| crate::controller::is_kind_of::<P>(&o.api_version, &o.kind, dyntype))
        .map(|o| {
            crate::controller::owner_ref(
                &o.name,
                dyntype,
                meta.namespace.as_deref(),
                owner_namespaced,
            )
        })
        .collect()
}

/// `<Kind>.<group>`, as operator-sdk writes it in `operator-sdk/primary-resource-type`.
pub fn primary_resource_type<P: Resource>(dyntype: &P::DynamicType) -> String {
    format!("{}.{}", P::kind(dyntype), P::group(dyntype))
}

/// What about an object's metadata moves when more than its status changed.
pub(crate) fn fingerprint(meta: &ObjectMeta) -> u64 {
    let mut h = DefaultHasher::new();
    meta.generation.hash(&mut h);
    meta.labels.hash(&mut h);
    meta.annotations.hash(&mut h);
    meta.finalizers.hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    for o in meta.owner_references.iter().flatten() {
        (&o.uid, &o.kind, &o.name, o.controller).hash(&mut h);
    }
    if meta.generation.is_none() {
        meta.resource_version.hash(&mut h);
    }
    h.finish()
}

/// A digest of the owned-field fingerprints a cache keeps beside an object (its
/// `managedFields` summary; nothing without them): an edit of a field the operator wrote
/// moves it even when the cache does not keep that field (a label dropped by
/// [`DynamicChildren::set_slim_meta`]).
fn owned_digest(cached: &ObjectMeta) -> u64 {
    let mut h = DefaultHasher::new();
    for e in cached.managed_fields.iter().flatten() {
        e.manager.hash(&mut h);
        e.fields_v1.as_ref().map(|f| f.0.to_string()).hash(&mut h);
    }
    h.finish()
}

/// The cache of one kind of children: metadata only, or (for kinds whose status an operator
/// reads, such as workloads) objects slimmed by the operator's function.
#[derive(Clone)]
pub enum KindCache {
    Meta(MetaCache<DynamicObject>),
    Full(ChildCache<DynamicObject>),
    /// One cache per watched namespace (an operator watching a list of namespaces whose
    /// primary kind is cluster-scoped: one controller, children in each namespace).
    Several(Vec<KindCache>),
}

impl KindCache {
    /// The cached metadata of one object (`namespace` empty for cluster-scoped kinds).
    pub fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        match self {
            KindCache::Meta(c) => c.meta(namespace, name),
            KindCache::Full(c) => c.meta(namespace, name),
            KindCache::Several(cs) => cs.iter().find_map(|c| c.meta(namespace, name)),
        }
    }

    /// The cached (slimmed) object, for kinds cached in full.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        match self {
            KindCache::Meta(_) => None,
            KindCache::Full(c) => c.get(namespace, name),
            KindCache::Several(cs) => cs.iter().find_map(|c| c.get(namespace, name)),
        }
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        match self {
            KindCache::Meta(c) => c.len(),
            KindCache::Full(c) => c.len(),
            KindCache::Several(cs) => cs.iter().map(KindCache::len).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The child watch of a one-namespace cache (a [`KindCache::Several`] has one per part).
    fn child_watch(&self) -> Option<&Arc<crate::cache::ChildWatch>> {
        match self {
            KindCache::Meta(c) => c.synced().child_watch(),
            KindCache::Full(c) => c.synced().child_watch(),
            KindCache::Several(_) => None,
        }
    }

    /// True once every watch behind it has listed; false if one stopped first.
    async fn wait_synced(&self) -> bool {
        match self {
            KindCache::Meta(c) => c.synced().wait().await,
            KindCache::Full(c) => c.synced().wait().await,
            KindCache::Several(cs) => {
                for c in cs {
                    if !Box::pin(c.wait_synced()).await {
                        return false;
                    }
                }
                true
            }
        }
    }
}

/// Which kinds are cached in full (see [`KindCache`]), and how they are slimmed.
#[derive(Clone, Copy)]
pub struct FullKinds {
    pub is_full: fn(&GroupVersionKind) -> bool,
    pub slim: fn(&mut DynamicObject),
}

struct Inner<P: Resource> {
    client: Client,
    full: Option<FullKinds>,
    /// When set, each cache keeps the fingerprint of the fields this applier's manager owns:
    /// the applier then sees drift on first sight (an edit made while the operator was
    /// stopped), not only a changed hash annotation.
    owned: Option<Applier>,
    discovery: Discovery,
    /// The namespaces watched for namespaced children; empty: all.
    namespaces: Vec<String>,
    selector: String,
    primary: P::DynamicType,
    tx: mpsc::UnboundedSender<(ObjectRef<P>, crate::cache::Origin)>,
    caches: tokio::sync::Mutex<HashMap<GroupVersionKind, KindCache>>,
    tasks: Mutex<Vec<AbortHandle>>,
    /// Whether a child seen for the first time triggers its owner.
    creates: Arc<AtomicBool>,
    /// What a metadata-only cache keeps of each child's metadata (set once, before the first
    /// cache starts; see [`DynamicChildren::set_slim_meta`]).
    slim_meta: std::sync::OnceLock<fn(&mut ObjectMeta)>,
    /// Whether the primary kind is namespaced (a cluster-scoped owner is found without the
    /// child's namespace).
    primary_namespaced: Arc<AtomicBool>,
    /// Set when wired into a controller: where each cache joins its child caches.
    late: std::sync::OnceLock<crate::shard::children::LateChildren>,
}

impl<P: Resource> Drop for Inner<P> {
    fn drop(&mut self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

/// Metadata-only caches of an operator's labelled children, one per kind, keyed by kind.
pub struct DynamicChildren<P: Resource> {
    inner: Arc<Inner<P>>,
}

impl<P: Resource> Clone for DynamicChildren<P> {
    fn clone(&self) -> Self {
        DynamicChildren {
            inner: self.inner.clone(),
        }
    }
}

impl<P> DynamicChildren<P>
where
    P: Resource + Send + Sync + 'static,
    P::DynamicType: Clone + Send + Sync + 'static,
{
    /// Children of `P` objects (whose kind `primary` describes) carrying `selector`'s labels,
    /// in `namespace` (all when None; cluster-scoped kinds are always watched cluster-wide).
    /// The returned trigger is for the operator's controller.
    pub fn new(
        client: Client,
        discovery: Discovery,
        namespace: Option<&str>,
        selector: &str,
        primary: P::DynamicType,
    ) -> (Self, Trigger<P>) {
        let namespaces: Vec<String> = namespace.into_iter().map(str::to_string).collect();
        Self::new_with(
            client,
            discovery,
            &namespaces,
            selector,
            primary,
            None,
            None,
        )
    }

    /// [`DynamicChildren::new`], with some kinds cached in full, and (`owned`) the
    /// owned-field fingerprints `owned` compares.
    /// `namespaces` lists the namespaces watched (empty: all).
    pub fn new_with(
        client: Client,
        discovery: Discovery,
        namespaces: &[String],
        selector: &str,
        primary: P::DynamicType,
        full: Option<FullKinds>,
        owned: Option<Applier>,
    ) -> (Self, Trigger<P>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let trigger = tokio_stream_from(rx);
        let inner = Inner {
            client,
            full,
            owned,
            discovery,
            namespaces: namespaces.to_vec(),
            selector: selector.to_string(),
            primary,
            tx,
            caches: Default::default(),
            tasks: Default::default(),
            creates: Arc::new(AtomicBool::new(true)),
            slim_meta: std::sync::OnceLock::new(),
            primary_namespaced: Arc::new(AtomicBool::new(true)),
            late: std::sync::OnceLock::new(),
        };
        (
            DynamicChildren {
                inner: Arc::new(inner),
            },
            trigger,
        )
    }

    /// The cache of `gvk`'s children, started on first use and synced before it is returned.
    pub async fn cache(&self, gvk: &GroupVersionKind) -> Result<KindCache, ChildCacheError> {
        let cache = self.started(gvk).await?;
        if !cache.wait_synced().await {
            return Err(ChildCacheError::Stopped(kind_name(gvk)));
        }
        Ok(cache)
    }

    /// The cache of `gvk`'s children, started on first use (perhaps not synced yet).
    async fn started(&self, gvk: &GroupVersionKind) -> Result<KindCache, ChildCacheError> {
        let mut caches = self.inner.caches.lock().await;
        if let Some(c) = caches.get(gvk) {
            return Ok(c.clone());
        }
        let c = self
            .start(gvk)
            .await
            .map_err(|source| ChildCacheError::Discovery {
                kind: kind_name(gvk),
                source,
            })?;
        caches.insert(gvk.clone(), c.clone());
        Ok(c)
    }

    /// Whether a child seen for the first time (created, or listed when its kind's watch
    /// starts) triggers its owner; by default it does. operator-sdk's dependent predicate
    /// ignores creates: an operator whose reconcile creates its children needs no second
    /// run when they appear, and a restart reconciles every primary object anyway.
    pub fn set_creates_trigger(&self, on: bool) {
        self.inner.creates.store(on, Ordering::Relaxed);
    }

    /// Drops what the operator never reads of a child's metadata before the metadata-only
    /// caches store it (kinds cached in full are slimmed by [`FullKinds::slim`]). Set before
    /// the first cache starts; a later call is ignored. A child's change still triggers its
    /// owner when it moves anything kept, or (with the owned-field fingerprints of
    /// [`DynamicChildren::new_with`]) a field the applier's manager owns, so an edit of a
    /// dropped label the operator wrote is still repaired.
    pub fn set_slim_meta(&self, slim: fn(&mut ObjectMeta)) {
        let _ = self.inner.slim_meta.set(slim);
    }

    /// Tells the children that their primary kind is cluster-scoped (or namespaced, the
    /// default): children then trigger the owner under its own key, not the child's namespace.
    pub fn set_primary_namespaced(&self, namespaced: bool) {
        self.inner
            .primary_namespaced
            .store(namespaced, Ordering::Relaxed);
    }

    /// Whether the caches can show objects of `namespace` ("" for cluster-scoped ones): an
    /// object in a namespace outside the watched ones is never in them, and must be read
    /// from the API server.
    pub fn covers(&self, namespace: &str) -> bool {
        let list = &self.inner.namespaces;
        namespace.is_empty() || list.is_empty() || list.iter().any(|n| n == namespace)
    }

    /// Wires these caches into a controller: hand the result to its
    /// [`crate::Wiring::late_children`]. From then on a cache starts only once that
    /// controller has started, and joins its child caches first (see the module doc). Call it
    /// before the first cache starts; a second call is ignored (its end joins nothing).
    ///
    /// Wired, the caches also keep up with the record of the controller's child kinds
    /// ([`crate::shard::record`]): each kind recorded for it (met on this replica, or read
    /// from a Lease another replica wrote) is started as soon as it is known, leading or
    /// not — so a standby lists what the leader met before it leads. A kind that cannot be
    /// started (not served, its CRD gone) is reported and skipped; one that does not sync
    /// (no RBAC to list it) is reported and left to its watch's retries.
    pub fn wired(&self) -> crate::shard::children::LateJoin {
        let (late, join) = crate::shard::children::LateChildren::new();
        if self.inner.late.set(late.clone()).is_err() {
            tracing::error!("child caches wired into two controllers: the second is ignored");
            return join;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let task = rt.spawn(warm_recorded(Arc::downgrade(&self.inner), late));
            self.inner
                .tasks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(task.abort_handle());
        }
        join
    }

    /// The kinds watched so far.
    pub async fn kinds(&self) -> Vec<GroupVersionKind> {
        self.inner.caches.lock().await.keys().cloned().collect()
    }

    async fn start(&self, gvk: &GroupVersionKind) -> Result<KindCache, kube::Error> {
        let resolved = self.inner.discovery.resolve(gvk).await?;
        // Wired: the controller's registry first, so the watches start selected.
        let registry = match self.inner.late.get() {
            Some(late) => late.registry().await,
            None => None,
        };
        let registry = registry.as_ref();
        let namespaces = &self.inner.namespaces;
        if !resolved.namespaced || namespaces.is_empty() {
            return Ok(self.start_in(gvk, &resolved, None, registry));
        }
        let mut caches: Vec<KindCache> = namespaces
            .iter()
            .map(|ns| self.start_in(gvk, &resolved, Some(ns), registry))
            .collect();
        Ok(match caches.len() {
            1 => caches.remove(0),
            _ => KindCache::Several(caches),
        })
    }

    /// The cache of `gvk`'s children in `namespace` (all when None), joined to `registry`
    /// (when wired), and the task that turns its events into triggers.
    fn start_in(
        &self,
        gvk: &GroupVersionKind,
        resolved: &Resolved,
        namespace: Option<&str>,
        registry: Option<&crate::shard::children::ChildRegistry>,
    ) -> KindCache {
        let inner = &self.inner;
        let ar = resolved.resource.clone();
        let scoped = |c: &Client| -> Api<DynamicObject> {
            match namespace {
                Some(ns) => Api::namespaced_with(c.clone(), ns, &ar),
                None => Api::all_with(c.clone(), &ar),
            }
        };
        let full = inner.full.filter(|f| (f.is_full)(gvk));
        // Each event as the child's metadata and, for kinds cached in full, a digest of
        // what else is kept (their status): a full kind's status change is what its owner
        // waits for (a workload becoming ready).
        type Seen = (ObjectMeta, u64);
        let (cache, stream): (KindCache, crate::cache::ObjectStream<Seen>) = match full {
            Some(f) => {
                let (c, s) = match &inner.owned {
                    Some(applier) => ChildCache::watch_api_owned(
                        scoped(&inner.client),
                        ar.clone(),
                        &inner.selector,
                        f.slim,
                        applier,
                    ),
                    None => ChildCache::watch_api(
                        scoped(&inner.client),
                        ar.clone(),
                        &inner.selector,
                        f.slim,
                    ),
                };
                let s = s.map(|r| {
                    r.map(|(o, origin)| {
                        let mut h = DefaultHasher::new();
                        o.data.to_string().hash(&mut h);
                        ((o.metadata, h.finish()), origin)
                    })
                });
                (KindCache::Full(c), Box::pin(s))
            }
            None => {
                let (c, s) = match &inner.owned {
                    Some(applier) => MetaCache::watch_api_owned(
                        scoped(&inner.client),
                        ar.clone(),
                        &inner.selector,
                        inner.slim_meta.get().copied().unwrap_or(|_| {}),
                        applier,
                    ),
                    None => {
                        let api: Api<PartialObjectMeta<DynamicObject>> = match namespace {
                            Some(ns) => Api::namespaced_with(inner.client.clone(), ns, &ar),
                            None => Api::all_with(inner.client.clone(), &ar),
                        };
                        MetaCache::watch_api(api, ar.clone(), &inner.selector)
                    }
                };
                (
                    KindCache::Meta(c),
                    Box::pin(s.map(|r| r.map(|(o, origin)| ((o.metadata, 0), origin)))),
                )
            }
        };
        // Before the task below first polls the stream: that poll starts the watches, with
        // the selectors chosen here.
        if let Some(registry) = registry {
            if let Some(watch) = cache.child_watch() {
                if !registry.join(watch) {
                    tracing::error!(kind = %gvk.kind, "a child cache joined twice: not sharded");
                }
            }
        }
        let tx = inner.tx.clone();
        let creates = inner.creates.clone();
        let primary = inner.primary.clone();
        let primary_namespaced = inner.primary_namespaced.clone();
        let seen_cache = cache.clone();
        let task = tokio::spawn(async move {
            // Each child's last fingerprint, by UID (as 16 bytes, not its 36-character text).
            let mut seen: HashMap<u128, u64> = HashMap::new();
            let mut stream = stream;
            while let Some(ev) = stream.next().await {
                let ((meta, extra), origin) = match ev {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(error = %e, "child watch error (retrying with backoff)");
                        continue;
                    }
                };
                let meta = &meta;
                let uid = crate::owned::uid_bits(meta.uid.as_deref().unwrap_or_default());
                let cached = seen_cache.meta(
                    meta.namespace.as_deref().unwrap_or(""),
                    meta.name.as_deref().unwrap_or(""),
                );
                let moved = if let Some(cached) = &cached {
                    let fp = fingerprint(meta) ^ extra ^ owned_digest(cached);
                    match seen.insert(uid, fp) {
                        Some(old) => old != fp,
                        None => creates.load(Ordering::Relaxed),
                    }
                } else {
                    seen.remove(&uid);
                    true
                };
                if !moved {
                    continue;
                }
                let namespaced = primary_namespaced.load(Ordering::Relaxed);
                let owners = match controller_owner_scoped::<P>(meta, &primary, namespaced)
                    .or_else(|| annotated_primary::<P>(meta, &primary))
                {
                    Some(r) => vec![r],
                    None => plain_owners::<P>(meta, &primary, namespaced),
                };
                for r in owners {
                    if tx.send((r, origin)).is_err() {
                        return;
                    }
                }
            }
        });
        inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task.abort_handle());
        cache
    }
}

fn kind_name(gvk: &GroupVersionKind) -> String {
    format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
}

/// How long a warmed kind may take to list before it is reported (it goes on syncing).
const WARM_REPORT_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts the cache of every kind recorded for the controller these caches are wired into,
/// now and whenever the record grows (see [`DynamicChildren::wired`]). Holds the caches
/// only while starting one: they stop when their operator drops them.
async fn warm_recorded<P>(
    inner: std::sync::Weak<Inner<P>>,
    late: crate::shard::children::LateChildren,
) where
    P: Resource + Send + Sync + 'static,
    P::DynamicType: Clone + Send + Sync + 'static,
{
    let Some(registry) = late.registry().await else {
        return;
    };
    let mut grown = registry.record().subscribe();
    let mut tried: std::collections::HashSet<GroupVersionKind> = Default::default();
    loop {
        grown.mark_unchanged();
        for gvk in registry.unstarted() {
            if !tried.insert(gvk.clone()) {
                continue;
            }
            let Some(inner) = inner.upgrade() else {
                return;
            };
            let children = DynamicChildren { inner };
            match children.started(&gvk).await {
                Ok(cache) => {
                    drop(children);
                    let controller = registry.controller().to_string();
                    tokio::spawn(async move {
                        match tokio::time::timeout(WARM_REPORT_AFTER, cache.wait_synced()).await {
                            Ok(true) => {
                                tracing::info!(controller = %controller, kind = %gvk.kind, "a recorded child kind warmed")
                            }
                            Ok(false) => {}
                            Err(_) => {
                                tracing::warn!(controller = %controller, kind = %gvk.kind, "a recorded child kind has not listed yet (no RBAC to list it?): its watch retries")
                            }
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(controller = %registry.controller(), error = %e, "a recorded child kind could not be warmed: skipped");
                }
            }
        }
        if grown.changed().await.is_err() {
            return;
        }
    }
}

fn tokio_stream_from<P>(
    mut rx: mpsc::UnboundedReceiver<(ObjectRef<P>, crate::cache::Origin)>,
) -> Trigger<P>
where
    P: Resource + 'static,
    P::DynamicType: Send,
{
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ar() -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk(
            "charts.example.com",
            "v1alpha1",
            "BookStore",
        ))
    }

    fn annotated(primary: &str, type_: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(BTreeMap::from([
                (PRIMARY_RESOURCE_ANNOTATION.to_string(), primary.to_string()),
                (
                    PRIMARY_RESOURCE_TYPE_ANNOTATION.to_string(),
                    type_.to_string(),
                ),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn annotations_name_the_primary() {
        let r = annotated_primary::<DynamicObject>(
            &annotated("shop/store", "BookStore.charts.example.com"),
            &ar(),
        );
        assert_eq!(
            r.map(|r| (r.name, r.namespace)),
            Some(("store".into(), Some("shop".into())))
        );
        let r = annotated_primary::<DynamicObject>(
            &annotated("/cluster-wide", "BookStore.charts.example.com"),
            &ar(),
        );
        assert_eq!(
            r.map(|r| (r.name, r.namespace)),
            Some(("cluster-wide".into(), None))
        );
        assert!(annotated_primary::<DynamicObject>(
            &annotated("shop/store", "Other.charts.example.com"),
            &ar()
        )
        .is_none());
        assert_eq!(
            primary_resource_type::<DynamicObject>(&ar()),
            "BookStore.charts.example.com"
        );
    }

    #[test]
    fn owner_references_without_controller_name_their_owners() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let oref = |kind: &str, name: &str| OwnerReference {
            api_version: "charts.example.com/v1alpha1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            ..Default::default()
        };
        let meta = ObjectMeta {
            namespace: Some("shop".into()),
            owner_references: Some(vec![
                oref("BookStore", "a"),
                oref("Other", "x"),
                oref("BookStore", "b"),
            ]),
            ..Default::default()
        };
        let names: Vec<_> = plain_owners::<DynamicObject>(&meta, &ar(), true)
            .into_iter()
            .map(|r| (r.name, r.namespace))
            .collect();
        assert_eq!(
            names,
            [
                ("a".to_string(), Some("shop".to_string())),
                ("b".to_string(), Some("shop".to_string()))
            ]
        );
    }

    #[test]
    fn status_only_changes_keep_the_fingerprint() {
        let mut m = ObjectMeta {
            generation: Some(3),
            resource_version: Some("10".into()),
            ..Default::default()
        };
        let a = fingerprint(&m);
        m.resource_version = Some("11".into());
        assert_eq!(
            a,
            fingerprint(&m),
            "status update of a kind with a generation"
        );
        m.generation = Some(4);
        assert_ne!(a, fingerprint(&m), "spec change");
        let mut cm = ObjectMeta {
            resource_version: Some("1".into()),
            ..Default::default()
        };
        let b = fingerprint(&cm);
        cm.resource_version = Some("2".into());
        assert_ne!(
            b,
            fingerprint(&cm),
            "a kind without generation: every change counts"
        );
    }
}
