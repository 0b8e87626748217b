//! Placing one kind's objects: run by every controller when sharding is on, active while
//! this replica holds the sharder Lease.
//!
//! A task of its own watches the metadata of every object of the kind in the controller's
//! scope (the operator's own label selector kept); on each round of the coordinator this
//! decides each object's step ([`super::place`]) from that cache and writes it: a merge patch
//! of the labels carrying the `resourceVersion` the decision was made on, so a decision on a
//! stale view fails instead of overwriting a member's hand-off. An object written (or refused
//! as stale) is not decided again before the watch shows it past that version, however far
//! the watch lags behind a loaded API server; moves between live members go at most
//! [`MOVING`] at a time. `bosun_shard_label_writes_total{label,result}` counts the writes.
//!
//! Children follow their owner. A move between live members is handed over by the member
//! (the drain label names where the object goes; the member relabels the children it caches,
//! then the object). A member taken over (`kill -9`, or a graceful leave) is not there to do
//! it: for each such member the sharder lists the children of the controller's child kinds
//! that carry its label, relabels an object's children with the object's new member before
//! it writes the object (so that member's caches show them when it first reconciles it), and
//! relabels any other child labelled with that member after its owner (or removes the label
//! when no owner of it is placed). The member's Lease is kept while a child carries its name.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};

use super::place::{decide, Seen, Step};
use super::{Labels, MemberView, ShardContext};

/// Writes in flight at once while placing (a first placement labels every object).
const PLACING: usize = 16;
/// Objects at most handed back (drained) at once per kind, between live members.
const MOVING: usize = 64;

static KINDS: AtomicU64 = AtomicU64::new(0);

/// Where the placed objects are: the kind (any kind, typed or not, is placed through its
/// metadata), the controller's namespace (None: all), the operator's own label selector.
pub(crate) struct Scope {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub selector: Option<String>,
    /// The controller's child caches: the kinds whose objects follow their owner, as
    /// started so far on this replica (read each round: the Helm and Ansible flavours start
    /// kinds while they run).
    pub children: super::children::ChildRegistry,
}

/// One child kind of a controller: where its cache looks (namespace, None: all) and with
/// which selector of its own (empty: none).
#[derive(Clone, Debug)]
pub(crate) struct ChildKind {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub selector: String,
}

/// Children relabelled on their own, each with the member it goes to (None: no label).
type Leftovers = Vec<(Orphan, Option<String>)>;

/// A child labelled with a member that was taken over.
#[derive(Clone, Debug)]
struct Orphan {
    kind: usize,
    /// Its owner's key (`<namespace>/<name>`, or `<name>`) as operator-sdk's annotations name
    /// it, for a child no owner reference links (cluster-scoped, or in another namespace).
    annotated: Option<String>,
    namespace: Option<String>,
    name: String,
    owners: Vec<String>,
    /// The field manager that owns its shard label: the relabel writes under that name.
    manager: Option<String>,
}

type Meta = PartialObjectMeta<DynamicObject>;

/// `resource`'s objects in `namespace` (all when None), or where `object` is.
pub(crate) fn api(
    client: kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<Meta> {
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    }
}

pub(crate) async fn run(shard: ShardContext, labels: Labels, scope: Scope) {
    let id = KINDS.fetch_add(1, Ordering::Relaxed);
    let mut views = shard.view.clone();
    loop {
        if views.wait_for(Option::is_some).await.is_err() {
            return;
        }
        // The watch runs as a task of its own, never paused by a round: a round awaits up to
        // one write per object, and a watch read only between rounds fell behind the
        // sharder's own writes — each round then decided again on the labels of before them,
        // and every one of those writes failed on its stale resourceVersion (at N = 1000, tens
        // of thousands of 409s that held the API server for minutes).
        let watch = Watch::start(&shard, &scope);
        let mut written = Written::default();
        let mut rounds = Rounds::default();
        let discovery = crate::dynamic::Discovery::new(shard.sharder_client.clone());
        loop {
            // A new view every retry period (its takeover deadline is new each time): this
            // is the round's clock, and most rounds have nothing new to decide.
            if views.changed().await.is_err() {
                shard.reports.forget(id);
                return;
            }
            let view = views.borrow_and_update().clone();
            let Some(view) = view else { break };
            if !watch.synced.load(Ordering::SeqCst) {
                continue;
            }
            // Read before the store: an event applied after this is decided next round.
            let generation = watch.generation.load(Ordering::SeqCst);
            let now = view.at(std::time::Instant::now());
            if !rounds.due(generation, &now) {
                count_round(&labels.shard, Work::Skipped);
                continue;
            }
            count_round(&labels.shard, Work::Decided);
            let settled = place(
                &shard,
                &labels,
                (&scope, &discovery),
                id,
                &watch.store,
                &view,
                &mut written,
            )
            .await;
            rounds.ended(generation, &now, settled);
        }
        shard.reports.forget(id);
    }
}

/// The kind's metadata cache, kept current by a task that stops when this is dropped.
struct Watch {
    store: Store<Meta>,
    synced: Arc<AtomicBool>,
    /// Counts the events applied to `store`: the same count, the same objects.
    generation: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start(shard: &ShardContext, scope: &Scope) -> Watch {
        let api = api(
            shard.sharder_client.clone(),
            &scope.resource,
            scope.namespace.as_deref(),
        );
        let mut cfg = watcher::Config::default().page_size(100);
        if let Some(s) = &scope.selector {
            cfg = cfg.labels(s);
        }
        let writer = reflector::store::Writer::<Meta>::new(scope.resource.clone());
        let store = writer.as_reader();
        let synced = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let (flag, changes) = (synced.clone(), generation.clone());
        // Whether the event on its way to the store changes what placing reads: judged
        // against the stored copy before the reflector applies it, counted after.
        let (before, moves) = (store.clone(), Arc::new(AtomicBool::new(false)));
        let (judged, ar) = (moves.clone(), scope.resource.clone());
        let task = tokio::spawn(async move {
            let stream = watcher(api, cfg)
                .default_backoff()
                .modify(slim)
                .inspect(move |ev| {
                    if let Ok(ev) = ev {
                        let old = |o: &Meta| before.get(&ObjectRef::from_obj_with(o, ar.clone()));
                        judged.store(moves_placing(ev, old), Ordering::SeqCst);
                    }
                });
            let events = reflector::reflector(writer, stream);
            futures::pin_mut!(events);
            // The reflector applied each event to the store before it yields it.
            while let Some(ev) = events.next().await {
                if moves.swap(false, Ordering::SeqCst) {
                    changes.fetch_add(1, Ordering::SeqCst);
                }
                match ev {
                    Ok(watcher::Event::InitDone) => flag.store(true, Ordering::SeqCst),
                    Err(e) => tracing::warn!(error = %e, "sharder watch error (retrying)"),
                    Ok(_) => {}
                }
            }
        });
        Watch {
            store,
            synced,
            generation,
            task,
        }
    }
}

/// Whether `ev` changes what placing reads of the kind (`old`: the stored copy of an object):
/// an object new, gone or relabelled, or a (re-)list swapped in. Most events of a busy kind
/// are status and spec writes, which move only the `resourceVersion`; a write the sharder
/// is waiting to see is not missed for that (see [`Rounds`]).
fn moves_placing(ev: &watcher::Event<Meta>, old: impl Fn(&Meta) -> Option<Arc<Meta>>) -> bool {
    match ev {
        watcher::Event::Apply(o) => old(o)
            .is_none_or(|p| p.meta().uid != o.meta().uid || p.meta().labels != o.meta().labels),
        watcher::Event::Delete(_) | watcher::Event::InitDone => true,
        watcher::Event::Init | watcher::Event::InitApply(_) => false,
    }
}

/// Keeps of an object's metadata only what placing reads (its name, namespace, UID,
/// `resourceVersion`, labels and deletion): the sharder's replica caches every object of the
/// kind, and their managed fields and annotations (a `kubectl apply`'s copy of the whole
/// object among them) are most of each one's metadata.
fn slim(o: &mut Meta) {
    let m = &mut o.metadata;
    m.managed_fields = None;
    m.annotations = None;
    m.owner_references = None;
    m.finalizers = None;
    m.generate_name = None;
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Per object UID, the `resourceVersion` its last label write was decided on. The object is
/// not decided again until the watch shows it past that version: a write sent (or refused
/// as stale) is never sent again on the same view of the object, however far the watch lags.
#[derive(Default)]
struct Written(HashMap<String, String>);

impl Written {
    /// Forgets the objects that went, or that the watch shows past the version written.
    fn prune(&mut self, current: &HashMap<&str, &str>) {
        self.0
            .retain(|uid, rv| current.get(uid.as_str()) == Some(&rv.as_str()));
    }

    /// Whether `uid` at `rv` was written and the watch has not shown the result yet.
    fn pending(&self, uid: &str, rv: &str) -> bool {
        self.0.get(uid).is_some_and(|w| w == rv)
    }
}

/// When a round has something new to decide. A round decides every object of the kind (and
/// its `steps` are O(N)); one on the same objects as placing reads them (the store's
/// generation, [`moves_placing`]) and the same live members as a settled round would decide
/// nothing, and is skipped. A round is settled when it wrote nothing and waits to see no
/// write of before: until then each round decides (a write refused as stale is decided again
/// once the watch shows the object's newer version, which may differ only in its
/// `resourceVersion`). A takeover is always decided (its children are listed, its deadline
/// moves).
#[derive(Default)]
struct Rounds {
    /// The generation and live members of the last settled round.
    settled: Option<(u64, Vec<String>)>,
}

impl Rounds {
    fn due(&self, generation: u64, view: &MemberView) -> bool {
        !view.taken.is_empty()
            || view.holding
            || self
                .settled
                .as_ref()
                .is_none_or(|(g, live)| *g != generation || *live != view.live)
    }

    /// After a round decided on `generation` and `view`: `settled` when it sent nothing and
    /// no write of before waits to be seen.
    fn ended(&mut self, generation: u64, view: &MemberView, settled: bool) {
        // A round that held first placements is not settled: they are placed once it ends.
        self.settled = (settled && view.taken.is_empty() && !view.holding)
            .then(|| (generation, view.live.clone()));
    }
}

/// Places the objects of `store` for one round; true when it had nothing to write and no
/// write waits to be seen by the watch (settled: see [`Rounds`]).
async fn place(
    shard: &ShardContext,
    labels: &Labels,
    (scope, discovery): (&Scope, &crate::dynamic::Discovery),
    id: u64,
    store: &Store<Meta>,
    view: &MemberView,
    written: &mut Written,
) -> bool {
    let objects = store.state();
    let mut on: HashSet<String> = objects
        .iter()
        .filter_map(|o| o.labels().get(&labels.shard).cloned())
        .collect();
    let now = view.at(std::time::Instant::now());
    // The child kinds of this round: an orphan names its kind by its place in this list.
    let mut kinds = scope.children.kinds();
    if !now.taken.is_empty() {
        kinds.extend(recorded_kinds(scope, discovery).await);
    }
    let primary_type = super::children::primary_type(&scope.resource);
    let orphans = taken_children(shard, labels, (&kinds, &primary_type), &now).await;
    // A member's takeover is held while a child still carries its name.
    on.extend(orphans.keys().cloned());
    shard.reports.report(id, on);
    let current: HashMap<&str, &str> = objects
        .iter()
        .filter_map(|o| {
            Some((
                o.meta().uid.as_deref()?,
                o.meta().resource_version.as_deref()?,
            ))
        })
        .collect();
    written.prune(&current);
    let view = view.at(std::time::Instant::now());
    let steps = steps(&objects, labels, &view, written);
    let (by_owner, leftover) = children_plan(&orphans, &objects, labels, &view, &steps);
    relabel_leftovers(shard, labels, &kinds, leftover).await;
    let outcomes: Vec<_> = futures::stream::iter(steps)
        .map(|(o, step)| {
            let view = &view;
            let kinds = &kinds;
            let kids = o
                .meta()
                .uid
                .as_deref()
                .and_then(|u| by_owner.get(u))
                .cloned()
                .unwrap_or_default();
            async move {
                // Its children first: the member it goes to must cache them when it starts.
                if let Step::Assign(to) = &step {
                    if !takeover_held(&o, labels, view)
                        || !relabel(shard, labels, kinds, &kids, Some(to)).await
                    {
                        return (o, false);
                    }
                }
                let sent = write(shard, labels, scope, &o, step, view).await;
                (o, sent)
            }
        })
        .buffer_unordered(PLACING)
        .collect()
        .await;
    let settled = outcomes.is_empty() && written.0.is_empty();
    for (o, sent) in outcomes {
        if sent {
            if let (Some(uid), Some(rv)) = (o.meta().uid.clone(), o.resource_version()) {
                written.0.insert(uid, rv);
            }
        }
    }
    settled
}

/// This round's writes (pure): each object's step, but none for an object written and not
/// seen since, and moves between live members only up to [`MOVING`] draining at once.
fn steps(
    objects: &[Arc<Meta>],
    labels: &Labels,
    view: &MemberView,
    written: &Written,
) -> Vec<(Arc<Meta>, Step)> {
    let mut steps = Vec::new();
    let mut draining = 0usize;
    let mut drains = Vec::new();
    for o in objects {
        let Some(uid) = o.meta().uid.as_deref() else {
            continue;
        };
        let seen = Seen {
            uid,
            shard: o.labels().get(&labels.shard).map(String::as_str),
            draining: o.labels().contains_key(&labels.drain),
        };
        if written.pending(
            uid,
            o.meta().resource_version.as_deref().unwrap_or_default(),
        ) {
            // Written, not seen since: it may be a drain under way.
            draining += 1;
            continue;
        }
        if seen.draining && seen.shard.is_some_and(|s| view.live.iter().any(|m| m == s)) {
            draining += 1;
        }
        match decide(&seen, view) {
            Step::None => {}
            step @ Step::Drain(_) => drains.push((o.clone(), step)),
            step => steps.push((o.clone(), step)),
        }
    }
    // Moves between live members go in bounded batches: each is a hand-off the member works
    // ahead of its users' changes, and a join must not put thousands of them in its queue.
    steps.extend(drains.into_iter().take(MOVING.saturating_sub(draining)));
    steps
}

/// Whether an object may be moved now: always, unless it moves away from a taken-over
/// member, which it may only while the takeover is surely held.
fn takeover_held(o: &Meta, labels: &Labels, view: &MemberView) -> bool {
    let from_taken = o
        .labels()
        .get(&labels.shard)
        .is_some_and(|c| view.taken.contains(c));
    !from_taken
        || view
            .taken_until
            .is_some_and(|t| std::time::Instant::now() < t)
}

/// Sends `step`'s label write, decided on the object's `resourceVersion`. True when the API
/// server answered it (written, or refused because the object moved on or went): the same
/// decision is not sent again on this version.
async fn write(
    shard: &ShardContext,
    labels: &Labels,
    scope: &Scope,
    o: &Meta,
    step: Step,
    view: &MemberView,
) -> bool {
    let label_values = match &step {
        Step::Assign(to) => {
            if !takeover_held(o, labels, view) {
                return false;
            }
            serde_json::json!({ labels.shard.clone(): to, labels.drain.clone(): null })
        }
        Step::Drain(to) => serde_json::json!({ labels.drain.clone(): to }),
        Step::None => return false,
    };
    let body = serde_json::json!({
        "metadata": { "resourceVersion": o.resource_version(), "labels": label_values }
    });
    let name = o.name_any();
    let api = api(
        shard.sharder_client.clone(),
        &scope.resource,
        o.namespace().as_deref(),
    );
    let result = api
        .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&body))
        .await;
    let outcome = match &result {
        Ok(_) => Outcome::Written,
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Outcome::Stale,
        Err(_) => Outcome::Failed,
    };
    count(&labels.shard, outcome);
    match result {
        Ok(_) => {
            tracing::debug!(name = %name, step = ?step, "placed");
            true
        }
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
            tracing::debug!(name = %name, "changed since seen: decided again once seen");
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, name = %name, step = ?step, "could not place an object");
            false
        }
    }
}

/// The kinds recorded for the controller (on any replica: the record of child kinds, a
/// taken-over member's own included) that no cache here watches, where the sharder lists
/// them: a namespaced kind in the controller's namespace (all when None), with no selector
/// but the member's shard label. A kind not served is reported and skipped.
async fn recorded_kinds(scope: &Scope, discovery: &crate::dynamic::Discovery) -> Vec<ChildKind> {
    let mut out = Vec::new();
    for gvk in scope.children.unstarted() {
        match discovery.resolve(&gvk).await {
            Ok(r) => out.push(ChildKind {
                resource: r.resource,
                namespace: if r.namespaced {
                    scope.namespace.clone()
                } else {
                    None
                },
                selector: String::new(),
            }),
            Err(e) => {
                tracing::warn!(kind = %gvk.kind, error = %e, "a recorded child kind is not served: its children are not relabelled")
            }
        }
    }
    out
}

/// Per member taken over (and still within its takeover), the children of the controller's
/// child `kinds` labelled with it; none when no member is taken over (the usual round costs
/// nothing). A child linked to its owner by operator-sdk's annotations (naming a
/// `primary_type` object) keeps that owner's key.
async fn taken_children(
    shard: &ShardContext,
    labels: &Labels,
    (kinds, primary_type): (&[ChildKind], &str),
    view: &MemberView,
) -> HashMap<String, Vec<Orphan>> {
    let mut found: HashMap<String, Vec<Orphan>> = HashMap::new();
    for member in &view.taken {
        for (k, kind) in kinds.iter().enumerate() {
            let mine = format!("{}={member}", labels.shard);
            let selector = if kind.selector.trim().is_empty() {
                mine
            } else {
                format!("{},{mine}", kind.selector)
            };
            let api = api(
                shard.sharder_client.clone(),
                &kind.resource,
                kind.namespace.as_deref(),
            );
            match api
                .list_metadata(&ListParams::default().labels(&selector))
                .await
            {
                Ok(list) => {
                    for c in list.items {
                        found.entry(member.clone()).or_default().push(Orphan {
                            kind: k,
                            annotated: super::children::annotated_owner(&c.metadata, primary_type),
                            namespace: c.metadata.namespace.clone(),
                            name: c.name_any(),
                            owners: c
                                .metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .map(|r| r.uid.clone())
                                .collect(),
                            manager: c
                                .metadata
                                .managed_fields
                                .as_deref()
                                .and_then(|e| crate::owned::label_owner(e, &labels.shard))
                                .map(str::to_string),
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, kind = %kind.resource.kind, member = %member, "could not list a member's children");
                    // Unknown: kept as in use, so the takeover is not let go meanwhile.
                    found.entry(member.clone()).or_default();
                }
            }
        }
    }
    found
}

/// Which of the taken-over members' children go with an object written this round (by its
/// UID), and the others with the member they go to (None: no label) — pure. A child goes
/// with this round's step of its owner when that step moves the owner; else to the member
/// its owner is labelled with when that member is live, or to none when no placed object
/// owns it; a child whose owner still waits on a taken member waits with it.
fn children_plan(
    orphans: &HashMap<String, Vec<Orphan>>,
    objects: &[Arc<Meta>],
    labels: &Labels,
    view: &MemberView,
    steps: &[(Arc<Meta>, Step)],
) -> (HashMap<String, Vec<Orphan>>, Leftovers) {
    if orphans.values().all(Vec::is_empty) {
        return Default::default();
    }
    let moving: HashSet<&str> = steps
        .iter()
        .filter(|(_, s)| matches!(s, Step::Assign(_)))
        .filter_map(|(o, _)| o.meta().uid.as_deref())
        .collect();
    let placed: HashMap<&str, Option<&str>> = objects
        .iter()
        .filter_map(|o| {
            Some((
                o.meta().uid.as_deref()?,
                o.labels().get(&labels.shard).map(String::as_str),
            ))
        })
        .collect();
    let by_key: HashMap<String, &str> = objects
        .iter()
        .filter_map(|o| {
            Some((
                super::children::annotation_key(o.meta()),
                o.meta().uid.as_deref()?,
            ))
        })
        .collect();
    let mut with_owner: HashMap<String, Vec<Orphan>> = HashMap::new();
    let mut leftover = Vec::new();
    for c in orphans.values().flatten() {
        let annotated = c
            .annotated
            .as_ref()
            .and_then(|k| by_key.get(k))
            .map(|u| u.to_string());
        let owners: Vec<&String> = c.owners.iter().chain(annotated.as_ref()).collect();
        if let Some(uid) = owners.iter().find(|u| moving.contains(u.as_str())) {
            with_owner
                .entry(uid.to_string())
                .or_default()
                .push(c.clone());
            continue;
        }
        let owner = owners.iter().find_map(|u| placed.get(u.as_str()).copied());
        match owner {
            // No placed object owns it: cached by every replica until its owner is placed.
            None | Some(None) => leftover.push((c.clone(), None)),
            Some(Some(m)) if view.live.iter().any(|l| l == m) => {
                leftover.push((c.clone(), Some(m.to_string())))
            }
            // Its owner waits on a member not live: the child waits with it.
            Some(Some(_)) => {}
        }
    }
    (with_owner, leftover)
}

async fn relabel_leftovers(
    shard: &ShardContext,
    labels: &Labels,
    kinds: &[ChildKind],
    leftover: Leftovers,
) {
    futures::stream::iter(leftover)
        .for_each_concurrent(PLACING, |(c, to)| async move {
            relabel(
                shard,
                labels,
                kinds,
                std::slice::from_ref(&c),
                to.as_deref(),
            )
            .await;
        })
        .await;
}

/// Writes `to` (None: removes it) as the shard label of `children`, through the sharder's
/// client, each under the field manager that owns its label (the member's applier, so the
/// label stays among its fields and the new member finds the child in place). True when
/// every one was written (or had gone).
async fn relabel(
    shard: &ShardContext,
    labels: &Labels,
    kinds: &[ChildKind],
    children: &[Orphan],
    to: Option<&str>,
) -> bool {
    let body = serde_json::json!({ "metadata": { "labels": { labels.shard.clone(): to } } });
    let results = futures::future::join_all(children.iter().map(|c| {
        let body = &body;
        async move {
            let Some(kind) = kinds.get(c.kind) else {
                return true;
            };
            let api = api(
                shard.sharder_client.clone(),
                &kind.resource,
                c.namespace.as_deref(),
            );
            let params = PatchParams {
                field_manager: c.manager.clone(),
                ..Default::default()
            };
            match api
                .patch_metadata(&c.name, &params, &Patch::Merge(body))
                .await
            {
                Ok(_) => true,
                Err(kube::Error::Api(s)) if s.code == 404 => true,
                Err(e) => {
                    tracing::warn!(error = %e, kind = %kind.resource.kind, child = %c.name, "could not relabel a child");
                    false
                }
            }
        }
    }))
    .await;
    results.into_iter().all(|ok| ok)
}

/// How a label write ended, as `bosun_shard_label_writes_total` counts it.
#[derive(Clone, Copy)]
enum Outcome {
    Written,
    /// Refused: the object changed or went since the version it was decided on.
    Stale,
    /// Not answered, or refused for another reason (the sharder's fence, say): tried again.
    Failed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Written => "written",
            Outcome::Stale => "stale",
            Outcome::Failed => "failed",
        }
    }
}

/// The sharder's label writes, per shard label (one per operator) and outcome, for the
/// whole process: the cost of placing and moving objects, and the writes wasted on views
/// that had moved on.
static WRITES: Mutex<BTreeMap<(String, &'static str), u64>> = Mutex::new(BTreeMap::new());

fn count(shard_label: &str, outcome: Outcome) {
    let mut w = WRITES.lock().unwrap_or_else(|e| e.into_inner());
    *w.entry((shard_label.to_string(), outcome.as_str()))
        .or_insert(0) += 1;
}

/// Whether a round decided the kind's objects, or had nothing new to decide.
#[derive(Clone, Copy)]
enum Work {
    Decided,
    Skipped,
}

impl Work {
    fn as_str(self) -> &'static str {
        match self {
            Work::Decided => "decided",
            Work::Skipped => "skipped",
        }
    }
}

/// The sharder's rounds, per shard label and work: most rounds of a settled cluster skip.
static ROUNDS: Mutex<BTreeMap<(String, &'static str), u64>> = Mutex::new(BTreeMap::new());

fn count_round(shard_label: &str, work: Work) {
    let mut r = ROUNDS.lock().unwrap_or_else(|e| e.into_inner());
    *r.entry((shard_label.to_string(), work.as_str()))
        .or_insert(0) += 1;
}

/// `bosun_shard_label_writes_total{label,result}` and `bosun_shard_rounds_total{label,work}`
/// in the text exposition.
pub(crate) fn metrics_text() -> String {
    let mut out = writes_text();
    let r = ROUNDS.lock().unwrap_or_else(|e| e.into_inner());
    out.push_str(
        "# HELP bosun_shard_rounds_total The sharder's placement rounds, by shard label and \
         work (decided: every object of the kind examined; skipped: nothing changed since a \
         round that left nothing to retry).\n\
         # TYPE bosun_shard_rounds_total counter\n",
    );
    for ((label, work), n) in r.iter() {
        out.push_str(&format!(
            "bosun_shard_rounds_total{{label=\"{label}\",work=\"{work}\"}} {n}\n"
        ));
    }
    out
}

fn writes_text() -> String {
    let w = WRITES.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::from(
        "# HELP bosun_shard_label_writes_total Label writes the sharder sent, by shard label \
         and result (written; stale: the object had changed since the version decided on; \
         failed: not answered or refused, tried again).\n\
         # TYPE bosun_shard_label_writes_total counter\n",
    );
    for ((label, result), n) in w.iter() {
        out.push_str(&format!(
            "bosun_shard_label_writes_total{{label=\"{label}\",result=\"{result}\"}} {n}\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ObjectMeta, PartialObjectMetaExt};

    fn object(i: usize, labels: &[(&str, &str)]) -> Arc<Meta> {
        let meta = ObjectMeta {
            name: Some(format!("o{i}")),
            uid: Some(format!("uid-{i}")),
            resource_version: Some("7".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        };
        Arc::new(meta.into_response_partial())
    }

    #[test]
    fn the_sharders_cache_keeps_only_what_placing_reads() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};
        let labels = Labels::for_operator("op");
        let o = object(1, &[("app", "shop")]);
        let mut full = (*o).clone();
        full.metadata.namespace = Some("ns".into());
        full.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..Default::default()
        }]);
        full.metadata.annotations = Some(
            [(
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "x".repeat(4096),
            )]
            .into(),
        );
        full.metadata.owner_references = Some(vec![OwnerReference::default()]);
        full.metadata.finalizers = Some(vec!["f".into()]);
        let mut slimmed = full.clone();
        slim(&mut slimmed);
        let m = &slimmed.metadata;
        assert!(m.managed_fields.is_none() && m.annotations.is_none());
        assert!(m.owner_references.is_none() && m.finalizers.is_none());
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()),
            (Some("o1"), Some("ns"), Some("uid-1"))
        );
        assert_eq!(m.resource_version, full.metadata.resource_version);
        assert_eq!(m.labels, full.metadata.labels);
        // The same decision on either.
        let view = view(&["a", "b"]);
        let step = |o: Meta| steps(&[Arc::new(o)], &labels, &view, &Written::default());
        let (full_steps, slim_steps) = (step(full), step(slimmed));
        assert_eq!(full_steps.len(), 1);
        assert_eq!(full_steps[0].1, slim_steps[0].1);
    }

    fn view(live: &[&str]) -> MemberView {
        MemberView {
            live: live.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn drains(steps: &[(Arc<Meta>, Step)]) -> usize {
        steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Drain(_)))
            .count()
    }

    #[test]
    fn a_join_drains_at_most_a_batch_at_once() {
        let l = Labels::for_operator("op");
        let all: Vec<_> = (0..1000).map(|i| object(i, &[(&l.shard, "a")])).collect();
        let v = view(&["a", "b"]);
        let none = Written::default();
        let first = steps(&all, &l, &v, &none);
        assert_eq!(drains(&first), MOVING, "about 500 move: one batch first");
        assert_eq!(first.len(), MOVING, "nothing else to do");

        // Ten of them draining already: the batch tops up to the bound.
        let mut some: Vec<_> = (0..10)
            .map(|i| object(i, &[(&l.shard, "a"), (&l.drain, "a")]))
            .collect();
        some.extend((10..1000).map(|i| object(i, &[(&l.shard, "a")])));
        assert_eq!(drains(&steps(&some, &l, &v, &none)), MOVING - 10);
    }

    #[test]
    fn an_object_written_is_not_decided_again_before_it_is_seen_past_that_version() {
        let l = Labels::for_operator("op");
        let all: Vec<_> = (0..100).map(|i| object(i, &[])).collect();
        let v = view(&["a"]);
        let mut written = Written::default();
        let first = steps(&all, &l, &v, &written);
        assert_eq!(first.len(), 100, "every unlabelled object placed");
        for (o, _) in &first[..60] {
            written.0.insert(o.uid().expect("uid"), "7".into());
        }
        // The watch has not shown those writes yet: only the 40 others are decided again.
        assert_eq!(steps(&all, &l, &v, &written).len(), 40);

        // Seen past that version (or gone), they are forgotten.
        let moved: Vec<_> = all
            .iter()
            .take(30)
            .map(|o| {
                let mut o = (**o).clone();
                o.metadata.resource_version = Some("8".into());
                Arc::new(o)
            })
            .collect();
        let current: HashMap<&str, &str> = moved
            .iter()
            .map(|o| (o.meta().uid.as_deref().unwrap_or_default(), "8"))
            .collect();
        written.prune(&current);
        assert!(written.0.is_empty());
    }

    fn orphan(name: &str, owners: &[&str]) -> Orphan {
        Orphan {
            kind: 0,
            annotated: None,
            namespace: Some("ns".into()),
            name: name.into(),
            owners: owners.iter().map(|s| s.to_string()).collect(),
            manager: None,
        }
    }

    #[test]
    fn a_taken_members_children_go_with_their_owner_or_to_where_it_is() {
        let l = Labels::for_operator("op");
        // Objects: uid-0 moves from the dead member this round, uid-1 is on the live b,
        // uid-2 still waits on another dead member.
        let objects = vec![
            object(0, &[(&l.shard, "dead")]),
            object(1, &[(&l.shard, "b")]),
            object(2, &[(&l.shard, "gone")]),
        ];
        let mut v = view(&["a", "b"]);
        v.taken = ["dead".to_string()].into();
        let steps = vec![(objects[0].clone(), Step::Assign("a".into()))];
        let orphans: HashMap<String, Vec<Orphan>> = [(
            "dead".to_string(),
            vec![
                orphan("c0", &["uid-0"]),
                orphan("c0b", &["other", "uid-0"]),
                orphan("c1", &["uid-1"]),
                orphan("c2", &["uid-2"]),
                orphan("stray", &["no-such-uid"]),
                orphan("ownerless", &[]),
            ],
        )]
        .into();
        let (with, leftover) = children_plan(&orphans, &objects, &l, &v, &steps);
        let names = |cs: &[Orphan]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(with.get("uid-0").map(Vec::as_slice).unwrap_or_default()),
            ["c0", "c0b"],
            "relabelled before their owner is written"
        );
        assert_eq!(with.len(), 1);
        let left: Vec<(String, Option<String>)> =
            leftover.into_iter().map(|(c, to)| (c.name, to)).collect();
        assert_eq!(
            left,
            vec![
                ("c1".to_string(), Some("b".to_string())),
                ("stray".to_string(), None),
                ("ownerless".to_string(), None),
            ],
            "to where the owner is; no placed owner: unlabelled; c2 waits with its owner"
        );
    }

    #[test]
    fn a_child_linked_by_annotations_only_follows_its_owner() {
        let l = Labels::for_operator("op");
        let mut moving = (*object(0, &[(&l.shard, "dead")])).clone();
        moving.metadata.namespace = Some("shop".into());
        let mut staying = (*object(1, &[(&l.shard, "b")])).clone();
        staying.metadata.namespace = Some("shop".into());
        let objects = vec![Arc::new(moving), Arc::new(staying)];
        let mut v = view(&["a", "b"]);
        v.taken = ["dead".to_string()].into();
        let steps = vec![(objects[0].clone(), Step::Assign("a".into()))];
        let linked = |name: &str, key: &str| Orphan {
            annotated: Some(key.into()),
            namespace: None,
            ..orphan(name, &[])
        };
        let orphans: HashMap<String, Vec<Orphan>> = [(
            "dead".to_string(),
            vec![
                linked("role-o0", "shop/o0"),
                linked("role-o1", "shop/o1"),
                linked("role-none", "shop/nobody"),
            ],
        )]
        .into();
        let (with, leftover) = children_plan(&orphans, &objects, &l, &v, &steps);
        let with: Vec<&str> = with
            .get("uid-0")
            .into_iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(with, ["role-o0"], "relabelled before its owner moves");
        let left: Vec<(String, Option<String>)> =
            leftover.into_iter().map(|(c, to)| (c.name, to)).collect();
        assert_eq!(
            left,
            vec![
                ("role-o1".to_string(), Some("b".to_string())),
                ("role-none".to_string(), None)
            ]
        );
        // No member taken over: nothing planned, nothing indexed.
        let (with, leftover) = children_plan(&HashMap::new(), &objects, &l, &v, &steps);
        assert!(with.is_empty() && leftover.is_empty());
    }

    #[test]
    fn a_round_with_nothing_new_decides_nothing() {
        let mut rounds = Rounds::default();
        let v = view(&["a", "b"]);
        // Each retry period brings a new view; the objects and the members stay the same.
        let mut decided = 0;
        for _ in 0..10 {
            if rounds.due(5, &v) {
                decided += 1;
                rounds.ended(5, &v, true);
            }
        }
        assert_eq!(decided, 1, "rounds that decided every object on one view");
        assert!(rounds.due(6, &v), "an event applied to the store");
        assert!(rounds.due(5, &view(&["a"])), "a member left");
        let mut taken = v.clone();
        taken.taken = ["c".to_string()].into();
        assert!(rounds.due(5, &taken), "a takeover is always decided");
        // A round whose write was not answered is decided again on the same view.
        rounds.ended(5, &v, false);
        assert!(rounds.due(5, &v));
        // Nor does a takeover round settle anything.
        rounds.ended(5, &taken, true);
        assert!(rounds.due(5, &v));
    }

    #[test]
    fn a_held_round_places_nothing_and_settles_nothing() {
        let l = Labels::for_operator("op");
        let objects: Vec<_> = (0..6).map(|i| object(i, &[])).collect();
        let mut held = view(&["a"]);
        held.holding = true;
        assert!(steps(&objects, &l, &held, &Written::default()).is_empty());
        let mut rounds = Rounds::default();
        rounds.ended(5, &held, true);
        // The hold ends with the same objects and members: that round must still place them.
        let v = view(&["a"]);
        assert!(rounds.due(5, &v), "the hold's end is decided");
        assert_eq!(steps(&objects, &l, &v, &Written::default()).len(), 6);
    }

    #[test]
    fn only_an_event_that_changes_what_placing_reads_moves_the_generation() {
        let l = Labels::for_operator("op");
        let stored = object(1, &[(&l.shard, "a")]);
        let old = |_: &Meta| Some(stored.clone());
        let none = |_: &Meta| None;
        let with = |f: &dyn Fn(&mut Meta)| {
            let mut o = (*stored).clone();
            f(&mut o);
            o
        };
        // A status or spec write: only the resourceVersion moves.
        let status = with(&|o| o.metadata.resource_version = Some("8".into()));
        assert!(
            !moves_placing(&watcher::Event::Apply(status.clone()), old),
            "a status write moved the generation: every busy round decides every object"
        );
        let drained = with(&|o| {
            o.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(l.drain.clone(), "b".into());
        });
        assert!(moves_placing(&watcher::Event::Apply(drained), old));
        let recreated = with(&|o| o.metadata.uid = Some("uid-new".into()));
        assert!(moves_placing(&watcher::Event::Apply(recreated), old));
        assert!(moves_placing(&watcher::Event::Apply(status.clone()), none));
        assert!(moves_placing(&watcher::Event::Delete(status.clone()), old));
        assert!(moves_placing(&watcher::Event::<Meta>::InitDone, old));
        assert!(!moves_placing(&watcher::Event::InitApply(status), old));
    }

    #[test]
    fn the_write_counts_are_served_by_label_and_result() {
        count("shard.bosun.dev/unit-test", Outcome::Written);
        count("shard.bosun.dev/unit-test", Outcome::Written);
        count("shard.bosun.dev/unit-test", Outcome::Stale);
        let text = metrics_text();
        assert!(text.contains("# TYPE bosun_shard_label_writes_total counter"));
        assert!(text.contains(
            "bosun_shard_label_writes_total{label=\"shard.bosun.dev/unit-test\",result=\"written\"} 2\n"
        ));
        assert!(text.contains(
            "bosun_shard_label_writes_total{label=\"shard.bosun.dev/unit-test\",result=\"stale\"} 1\n"
        ));
        count_round("shard.bosun.dev/unit-test", Work::Skipped);
        let text = metrics_text();
        assert!(text.contains("# TYPE bosun_shard_rounds_total counter"));
        assert!(text.contains(
            "bosun_shard_rounds_total{label=\"shard.bosun.dev/unit-test\",work=\"skipped\"} 1\n"
        ));
    }
}
