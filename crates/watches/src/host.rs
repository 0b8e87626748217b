//! The dynamic operator host: one watches entry run as an operator on the shared runtime,
//! whatever its flavour. The primary kind is known only at run time: discovery resolves its
//! plural and scope once (waiting while its CRD is not served yet), the primary watch honours
//! the entry's selector and triggers only when the spec (generation), the deletion state, or
//! — when the flavour reads them — the annotations move, so a status write never re-runs a
//! reconcile. Children of any kind are watched through [`DynamicChildren`] and trigger their
//! owner unless `watchDependentResources: false`. The entry's concurrency, and its reconcile
//! period (or the per-object annotation), apply.
//!
//! A [`Flavor`] (Helm charts, Ansible roles) supplies the reconcile and what it serves
//! (CRD) and needs (RBAC).
use std::fmt::Debug;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::Synced;
use bosun_runtime::controller::Trigger;
use bosun_runtime::dynamic::{Discovery, DynamicChildren, FullKinds, Resolved};
use bosun_runtime::error::Categorized;
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::Rbac;
use bosun_runtime::status::StatusWriter;
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};

use crate::file::{parse_duration, Entry};

/// What a reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing until something changes (or the reconcile period passes).
    AwaitChange,
    /// Again after this long (sooner if the reconcile period is shorter).
    After(Duration),
}

/// A way of running watches entries: Helm charts, Ansible roles.
pub trait Flavor: Send + Sync + Sized + 'static {
    type Error: Categorized + std::error::Error + Send + Sync + 'static;
    /// The per-object annotation that overrides the entry's reconcile period.
    const PERIOD_ANNOTATION: &'static str;
    /// Field manager, Event reporter and log name (`bosun-helm`, say).
    const MANAGER: &'static str;
    /// The reconcile period of an entry that sets none (operator-sdk's defaults: 1 min for
    /// Helm, 10 h for Ansible).
    const DEFAULT_PERIOD: Option<Duration> = None;

    /// The CRD of the entry's kind.
    fn crd(&self) -> CustomResourceDefinition;
    /// What running the entry needs granted.
    fn rbac(&self) -> Rbac;
    /// Whether annotation changes of the primary object trigger a reconcile.
    fn watches_annotations(&self) -> bool {
        false
    }
    /// The finalizer the flavour keeps on every object (if any): its removal by someone
    /// else triggers a reconcile, which puts it back.
    fn finalizer(&self) -> Option<&str> {
        None
    }
    /// Metric families the flavour's runs write, served on `/metrics` with the runtime's
    /// (a key, so several entries of one flavour serve them once).
    fn metrics_text(&self) -> Option<(&'static str, bosun_runtime::metrics::TextSource)> {
        None
    }
    /// Whether child caches keep the fingerprint of the fields the host's applier owns, so
    /// drift (an edit made while the operator was stopped, a removed owner reference) is
    /// repaired on first sight. It costs a watch of whole objects (only metadata is kept).
    fn repairs_drift(&self) -> bool {
        false
    }
    /// Child kinds cached with more than metadata (workloads whose status the flavour
    /// reads), and how they are slimmed.
    fn full_kinds(&self) -> Option<FullKinds> {
        None
    }
    /// What child caches keep of each child's metadata (None: all but `managedFields`).
    /// Kinds of [`Flavor::full_kinds`] are slimmed by its own function.
    fn slim_child_meta(&self) -> Option<fn(&mut ObjectMeta)> {
        None
    }
    /// How the primary cache keeps each object (None: whole, but for `managedFields`). The
    /// reconcile is given the object as kept, so a flavour that slims it restores what it
    /// reads.
    fn slim_primary(&self) -> Option<fn(&mut DynamicObject)> {
        None
    }
    /// The label selector of the child watches (every child carries it).
    fn child_selector(&self, entry: &Entry) -> String {
        child_selector(entry)
    }
    /// Child kinds whose caches start with the controller and count in its readiness,
    /// rather than on the first reconcile that touches them: after a restart with N objects,
    /// a lazily started cache makes every reconcile — a user's new object's included — wait
    /// for its list of all N objects' children, one kind after another.
    fn warm_kinds(&self) -> Vec<GroupVersionKind> {
        Vec::new()
    }
    /// Whether a child's first sighting (its creation) triggers its owner.
    fn child_creates_trigger(&self) -> bool {
        true
    }
    /// Reconcile requests from sources of the flavour's own (the Helm flavour's `valuesFrom`
    /// Secrets and ConfigMaps) for the primary objects in `ns` (all when None); `primaries`
    /// is their cache (of kind `resource`), to map a source's change to the objects it
    /// concerns.
    fn triggers(
        &self,
        _client: &Client,
        _entry: &Entry,
        _ns: Option<&str>,
        _resource: &ApiResource,
        _primaries: Store<DynamicObject>,
    ) -> Vec<Trigger<DynamicObject>> {
        Vec::new()
    }
    /// Reconciles one object of the entry's kind.
    fn reconcile(
        obj: Arc<DynamicObject>,
        host: Arc<Host<Self>>,
    ) -> BoxFuture<'static, Result<Next, Self::Error>>;
}

/// What a flavour's reconcile works with, per watched namespace.
pub struct Host<F: Flavor> {
    pub flavor: Arc<F>,
    pub entry: Arc<Entry>,
    pub client: Client,
    /// The primary kind as the API server serves it.
    pub resource: ApiResource,
    pub namespaced: bool,
    pub discovery: Discovery,
    pub children: DynamicChildren<DynamicObject>,
    pub applier: Applier,
    pub status: StatusWriter,
    pub events: Events,
}

impl<F: Flavor> Host<F> {
    /// The primary objects' API in `namespace` (cluster-wide for a cluster-scoped kind).
    pub fn api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        match (namespace, self.namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            _ => Api::all_with(self.client.clone(), &self.resource),
        }
    }

    /// The API of `obj`'s own kind and namespace.
    pub fn api_of(&self, obj: &DynamicObject) -> Api<DynamicObject> {
        self.api(obj.namespace().as_deref())
    }

    /// Starts the child watches of the kinds a run touched (`(apiVersion, kind)` pairs), as
    /// ansible-operator's proxy does when a role creates an object: never the primary kind
    /// or a blacklisted one, cluster-scoped kinds only with `watchClusterScopedResources`,
    /// none without `watchDependentResources`. A kind that cannot be watched is logged.
    pub async fn watch_touched_kinds<'a>(
        &self,
        touched: impl IntoIterator<Item = &'a (String, String)>,
    ) {
        let entry = &self.entry;
        if !entry.watch_dependent_resources {
            return;
        }
        for (api_version, kind) in touched {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let blacklisted = entry
                .ansible
                .blacklist
                .iter()
                .any(|b| b.group == group && &b.kind == kind);
            if (group == entry.gvk.group && kind == &entry.gvk.kind) || blacklisted {
                continue;
            }
            let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
            let Ok(resolved) = self.discovery.resolve(&gvk).await else {
                continue;
            };
            if !resolved.namespaced && !entry.ansible.watch_cluster_scoped_resources {
                continue;
            }
            if let Err(e) = self.children.cache(&gvk).await {
                tracing::warn!(kind = %kind, error = %e, "cannot watch the children of this kind");
            }
        }
    }

    /// The reconcile period for `obj`: its annotation, else the entry's. An annotation that
    /// does not parse is an error for the flavour to report.
    pub fn period(&self, obj: &DynamicObject) -> Result<Option<Duration>, String> {
        match obj.annotations().get(F::PERIOD_ANNOTATION) {
            Some(v) => parse_duration(v)
                .map(|d| (!d.is_zero()).then_some(d))
                .map_err(|e| format!("annotation {}: {e}", F::PERIOD_ANNOTATION)),
            None => Ok(match self.entry.reconcile_period {
                Some(d) => (!d.is_zero()).then_some(d),
                None => F::DEFAULT_PERIOD,
            }),
        }
    }
}

/// One watches entry as an operator.
pub struct WatchOperator<F: Flavor> {
    name: String,
    entry: Arc<Entry>,
    flavor: Arc<F>,
}

impl<F: Flavor> WatchOperator<F> {
    pub fn new(entry: Entry, flavor: F) -> Self {
        WatchOperator {
            name: format!("{}.{}", entry.gvk.kind.to_lowercase(), entry.gvk.group),
            entry: Arc::new(entry),
            flavor: Arc::new(flavor),
        }
    }

    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    pub fn flavor(&self) -> &F {
        &self.flavor
    }
}

/// `MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>` (upper case, `.` and `-` as `_`), as
/// ansible-operator reads it.
pub fn concurrency_env_name(entry: &Entry) -> String {
    let up = |s: &str| s.to_uppercase().replace(['.', '-'], "_");
    format!(
        "MAX_CONCURRENT_RECONCILES_{}_{}",
        up(&entry.gvk.kind),
        up(&entry.gvk.group)
    )
}

/// The entry's concurrency: its field, else its environment variable, else `default`.
pub fn concurrency(entry: &Entry, default: u16, env: &dyn Fn(&str) -> Option<String>) -> u16 {
    entry
        .max_concurrent_reconciles
        .or_else(|| env(&concurrency_env_name(entry)).and_then(|v| v.trim().parse().ok()))
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

impl<F: Flavor> Operator for WatchOperator<F> {
    fn name(&self) -> &str {
        &self.name
    }

    /// operator-sdk's controller name, `<kind>-controller` (lowercase), so the dashboards
    /// and alerts written for helm-operator and ansible-operator keep working (review L6).
    fn metrics_name(&self) -> String {
        format!("{}-controller", self.entry.gvk.kind.to_lowercase())
    }

    /// None for a kind of Kubernetes' own groups (a `group: ""` entry watching ConfigMaps):
    /// the API server serves it, and a CRD for it would be refused.
    fn crds(&self) -> Vec<CustomResourceDefinition> {
        if crate::kinds::is_builtin_group(&self.entry.gvk.group) {
            return Vec::new();
        }
        vec![self.flavor.crd()]
    }

    fn rbac(&self) -> Rbac {
        self.flavor.rbac()
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let entry = self.entry.clone();
        let flavor = self.flavor.clone();
        Box::pin(async move {
            let discovery = Discovery::new(ctx.client.clone());
            let Some(resolved) = served_kind(&ctx, &discovery, &entry).await else {
                return Ok(()); // shut down while waiting
            };
            if let Some((key, source)) = flavor.metrics_text() {
                ctx.metrics.add_text_source(key, source);
            }
            let n = concurrency(&entry, ctx.concurrency, &|k| std::env::var(k).ok());
            let ctx = ctx.with_concurrency(n);
            let client = ctx.client.clone();
            if resolved.namespaced {
                ctx.run_controller(
                    |ns| {
                        let children: Vec<String> = ns.into_iter().map(str::to_string).collect();
                        wire(
                            &client, ns, &children, &entry, &flavor, &discovery, &resolved,
                        )
                    },
                    reconcile::<F>,
                )
                .await;
            } else {
                // A cluster-scoped primary is watched cluster-wide whatever the scope: one
                // controller, whose children are watched in each watched namespace (review M3:
                // one controller per namespace reconciled every object N times at once).
                let children = ctx.namespaces();
                let w = wire(
                    &client, None, &children, &entry, &flavor, &discovery, &resolved,
                );
                ctx.run_single_controller(w, reconcile::<F>).await;
            }
            Ok(())
        })
    }
}

/// Waits until the API server serves the entry's kind (its CRD may be applied after bosun
/// starts); None when the operator is shut down first.
async fn served_kind(
    ctx: &ControllerContext,
    discovery: &Discovery,
    entry: &Entry,
) -> Option<Resolved> {
    let mut delay = Duration::from_secs(1);
    loop {
        match discovery.resolve(&entry.gvk).await {
            Ok(r) => return Some(r),
            Err(e) => tracing::warn!(
                kind = %entry.describe(),
                error = %e,
                "kind not served yet (install its CRD: bosun crd --watches ...); retrying"
            ),
        }
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// What about a primary object moves when a reconcile is due: its spec (generation), its
/// deletion, (when the flavour reads them) its annotations, and whether it holds the
/// flavour's finalizer. Status writes move none.
fn fingerprint(obj: &DynamicObject, annotations: bool, finalizer: Option<&str>) -> u64 {
    let mut h = DefaultHasher::new();
    let m = obj.meta();
    m.generation.hash(&mut h);
    m.deletion_timestamp.is_some().hash(&mut h);
    if annotations {
        m.annotations.hash(&mut h);
    }
    if let Some(f) = finalizer {
        m.finalizers.iter().flatten().any(|x| x == f).hash(&mut h);
    }
    if m.generation.is_none() {
        m.resource_version.hash(&mut h);
    }
    h.finish()
}

/// The wiring of one controller: its primary objects in `ns` (all when None), their children
/// in `children_ns` (all when empty).
fn wire<F: Flavor>(
    client: &Client,
    ns: Option<&str>,
    children_ns: &[String],
    entry: &Arc<Entry>,
    flavor: &Arc<F>,
    discovery: &Discovery,
    resolved: &Resolved,
) -> Wiring<DynamicObject, Host<F>> {
    let ar = resolved.resource.clone();
    let api: Api<DynamicObject> = match (ns, resolved.namespaced) {
        (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    let mut cfg = watcher::Config::default();
    if let Some(sel) = entry.selector_string() {
        cfg = cfg.labels(&sel);
    }
    // A reconcile when more than the status moved (spec, labels, annotations, finalizers,
    // owners, deletion: a removed finalizer is put back at once); what is remembered per
    // object, here and in the status writer, is forgotten when the object goes.
    let annotations = flavor.watches_annotations();
    let finalizer = flavor.finalizer().map(str::to_string);
    let status = StatusWriter::new(F::MANAGER);
    let primary = match flavor.slim_primary() {
        Some(slim) => Primary::watch_slimmed(api, ar.clone(), cfg, slim),
        None => Primary::watch(api, ar.clone(), cfg),
    };
    let primary = primary
        .skip_unmoved_by(move |o: &DynamicObject| fingerprint(o, annotations, finalizer.as_deref()))
        .forgetting(&status);
    let (host, trigger) = build_host(
        client,
        children_ns,
        entry,
        flavor,
        discovery,
        resolved,
        status,
    );
    let own = flavor.triggers(client, entry, ns, &ar, primary.store());
    // Before any child cache starts (the warm ones below): each joins the controller's child
    // caches — counted, sharded with their owners, relabelled when an owner moves.
    let late = host.children.wired();
    let warm = warm_children(&host, entry.watch_dependent_resources);
    let mut wiring = Wiring::new(primary, host).late_children(late);
    for t in own {
        wiring = wiring.trigger(t);
    }
    if let Some(synced) = warm {
        wiring = wiring.reads(&synced);
    }
    if entry.watch_dependent_resources {
        wiring.trigger(trigger)
    } else {
        wiring
    }
}

/// Starts the caches of the flavour's [`Flavor::warm_kinds`] at once (their lists run side
/// by side) and signals when all have synced. A kind that cannot be cached (not served) is
/// logged and left to the reconciles, as before.
fn warm_children<F: Flavor>(host: &Arc<Host<F>>, watched: bool) -> Option<Synced> {
    let kinds = host.flavor.warm_kinds();
    if !watched || kinds.is_empty() {
        return None;
    }
    let (tx, synced) = Synced::pending();
    let host = host.clone();
    tokio::spawn(async move {
        let caches = kinds.iter().map(|gvk| host.children.cache(gvk));
        for (gvk, r) in kinds.iter().zip(futures::future::join_all(caches).await) {
            // Not served yet (a kind of the chart's own crds/, say): the reconcile that
            // creates one starts its cache.
            if let Err(e) = r {
                tracing::debug!(kind = %gvk.kind, error = %e, "child cache not started with the controller");
            }
        }
        let _ = tx.send(true);
    });
    Some(synced)
}

/// A host for one-off reconciles outside a controller (tests, tools), for the primary objects
/// and children in `namespace` (all when None): what a controller's wiring holds, without the
/// watch of the primary kind.
pub async fn standalone_host<F: Flavor>(
    client: &Client,
    namespace: Option<&str>,
    entry: Arc<Entry>,
    flavor: Arc<F>,
) -> Result<Arc<Host<F>>, kube::Error> {
    let discovery = Discovery::new(client.clone());
    let resolved = discovery.resolve(&entry.gvk).await?;
    let children: Vec<String> = namespace.into_iter().map(str::to_string).collect();
    let status = StatusWriter::new(F::MANAGER);
    let (host, _) = build_host(
        client, &children, &entry, &flavor, &discovery, &resolved, status,
    );
    Ok(host)
}

fn build_host<F: Flavor>(
    client: &Client,
    children_ns: &[String],
    entry: &Arc<Entry>,
    flavor: &Arc<F>,
    discovery: &Discovery,
    resolved: &Resolved,
    status: StatusWriter,
) -> (
    Arc<Host<F>>,
    bosun_runtime::controller::Trigger<DynamicObject>,
) {
    let ar = resolved.resource.clone();
    let applier = Applier::new(F::MANAGER);
    let (children, trigger) = DynamicChildren::new_with(
        client.clone(),
        discovery.clone(),
        children_ns,
        &flavor.child_selector(entry),
        ar.clone(),
        flavor.full_kinds(),
        flavor.repairs_drift().then(|| applier.clone()),
    );
    children.set_creates_trigger(flavor.child_creates_trigger());
    if let Some(slim) = flavor.slim_child_meta() {
        children.set_slim_meta(slim);
    }
    children.set_primary_namespaced(resolved.namespaced);
    let host = Arc::new(Host {
        flavor: flavor.clone(),
        entry: entry.clone(),
        client: client.clone(),
        resource: ar,
        namespaced: resolved.namespaced,
        discovery: discovery.clone(),
        children,
        applier,
        status,
        events: Events::new(client.clone(), F::MANAGER),
    });
    (host, trigger)
}

/// The label every child of an entry carries, so child watches see only its own objects.
pub const OWNER_KIND_LABEL: &str = "bosun.dev/owner-kind";

/// The child watch selector of an entry: `bosun.dev/owner-kind=<kind>.<group>`.
pub fn child_selector(entry: &Entry) -> String {
    format!("{OWNER_KIND_LABEL}={}", owner_kind_value(entry))
}

/// The value of [`OWNER_KIND_LABEL`] for an entry (a valid label value: ≤ 63 characters).
pub fn owner_kind_value(entry: &Entry) -> String {
    let mut v = format!("{}.{}", entry.gvk.kind.to_lowercase(), entry.gvk.group);
    v.truncate(63);
    v.trim_end_matches(['.', '-', '_']).to_string()
}

async fn reconcile<F: Flavor>(
    obj: Arc<DynamicObject>,
    host: Arc<Host<F>>,
) -> Result<Action, F::Error> {
    let period = host.period(&obj).ok().flatten();
    let next = F::reconcile(obj, host).await?;
    let after = match (next, period) {
        (Next::After(d), Some(p)) => Some(d.min(p)),
        (Next::After(d), None) => Some(d),
        (Next::AwaitChange, p) => p,
    };
    Ok(match after {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

impl<F: Flavor> Debug for Host<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("kind", &self.entry.describe())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{AnsibleOptions, Runner};
    use kube::core::GroupVersionKind;

    fn entry(max: Option<u16>) -> Entry {
        Entry {
            index: 1,
            line: 1,
            gvk: GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
            runner: Runner::Role("r".into()),
            watch_dependent_resources: true,
            selector: None,
            reconcile_period: None,
            max_concurrent_reconciles: max,
            override_values: Default::default(),
            dry_run_server: false,
            upgrade_crds: false,
            values_from: Vec::new(),
            ansible: AnsibleOptions::default(),
        }
    }

    #[test]
    fn concurrency_from_the_entry_then_the_environment_then_the_default() {
        assert_eq!(
            concurrency_env_name(&entry(None)),
            "MAX_CONCURRENT_RECONCILES_BOOKSTORE_CHARTS_EXAMPLE_COM"
        );
        let env = |k: &str| {
            (k == "MAX_CONCURRENT_RECONCILES_BOOKSTORE_CHARTS_EXAMPLE_COM").then(|| "3".to_string())
        };
        assert_eq!(concurrency(&entry(Some(7)), 16, &env), 7);
        assert_eq!(concurrency(&entry(None), 16, &env), 3);
        assert_eq!(concurrency(&entry(None), 16, &|_| None), 16);
        assert_eq!(concurrency(&entry(None), 16, &|_| Some("zero".into())), 16);
    }

    #[test]
    fn owner_kind_label_is_a_valid_label_value() {
        assert_eq!(
            child_selector(&entry(None)),
            "bosun.dev/owner-kind=bookstore.charts.example.com"
        );
        let mut long = entry(None);
        long.gvk.group = format!("{}.example.com", "x".repeat(70));
        let v = owner_kind_value(&long);
        assert!(v.len() <= 63 && !v.ends_with('.'));
    }

    #[test]
    fn status_writes_do_not_move_the_fingerprint() {
        let ar = ApiResource::from_gvk(&entry(None).gvk);
        let mut o = DynamicObject::new("a", &ar);
        o.metadata.generation = Some(1);
        o.metadata.resource_version = Some("1".into());
        let base = fingerprint(&o, false, None);
        o.metadata.resource_version = Some("2".into());
        o.data = serde_json::json!({"status": {"x": 1}});
        assert_eq!(base, fingerprint(&o, false, None));
        o.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        assert_eq!(base, fingerprint(&o, false, None));
        assert_ne!(base, fingerprint(&o, true, None));
        o.metadata.generation = Some(2);
        assert_ne!(base, fingerprint(&o, false, None));
    }

    #[test]
    fn the_flavours_finalizer_removed_moves_the_fingerprint() {
        let ar = ApiResource::from_gvk(&entry(None).gvk);
        let mut o = DynamicObject::new("a", &ar);
        o.metadata.generation = Some(1);
        o.metadata.finalizers = Some(vec!["ours".into(), "theirs".into()]);
        let held = fingerprint(&o, false, Some("ours"));
        o.metadata.finalizers = Some(vec!["ours".into()]);
        assert_eq!(held, fingerprint(&o, false, Some("ours")), "someone else's");
        o.metadata.finalizers = None;
        assert_ne!(held, fingerprint(&o, false, Some("ours")), "ours removed");
        let none = fingerprint(&o, false, None);
        o.metadata.finalizers = Some(vec!["ours".into()]);
        assert_eq!(
            none,
            fingerprint(&o, false, None),
            "a flavour without a finalizer ignores them"
        );
    }
}
