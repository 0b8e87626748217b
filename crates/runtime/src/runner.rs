//! Runs one controller's reconciles from its [`Queue`]: bosun's own runner in place of
//! kube-runtime's `Controller`, whose scheduler has no priorities (see [`crate::queue`]).
//!
//! One task reads every trigger stream into the queue — the primary watch must be read all
//! the time anyway, it fills the cache — and starts up to `concurrency` reconciles, each a
//! task of its own (several cores, and a panicking reconcile is a failed reconcile, retried,
//! not the end of its controller). Nothing starts before `gate` opens (every cache synced)
//! and while this replica does not lead: a warm standby queues, it does not reconcile, and
//! when it wins the lease it starts with the user's changes that came meanwhile. Each
//! reconcile reads its object from the cache when it starts, so it never works from a stale
//! trigger.
//!
//! Leading is not for good: when this replica stops leading (its lease lost, or in doubt)
//! every reconcile in flight is aborted at once and its key queued again ahead of everything
//! ([`Queue::interrupted`]), nothing new starts, and the runner goes on reading its triggers
//! — the caches, the watches and the queue stay, so the replica is a warm standby at once and
//! a next term starts without a list. No reconcile starts again before every aborted one has
//! ended: a reconcile of the last term never runs beside one of the next.
//!
//! On shutdown no new reconcile starts and the runner returns once those in flight end;
//! dropped, it aborts them.
//!
//! Sharded ([`crate::shard`]), an object the sharder labelled for draining is not reconciled
//! again: when its key comes up — so never while a reconcile of it runs — the runner hands it
//! back instead. And a sharded runner starts nothing of a term, its first one too, before it
//! has read its share from the API server ([`Handoff::read_share`], one paged LIST taken after
//! the term began): while this member did not lead — lost its term, or was a replica not yet
//! started under its name — the sharder may have moved its objects to another member, and its
//! cache (a watch, lagging) can still show them here. A key whose object (same UID) that read
//! shows starts from the cache. One it does not show but the cache does was either placed
//! here since (the cache shows a write newer than the read: it starts) or moved away before
//! (the cache shows a version older than the read: it is done, the watch brings the move);
//! where the two resource versions cannot be compared, the object is read alone first
//! ([`Handoff::confirm`]). Within a term nobody else moves this member's objects: the sharder
//! takes a member's objects only once its Lease has expired, and the member stops before.
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{BoxStream, SelectAll};
use futures::StreamExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cache::Origin;
use crate::manager::Leading;
use crate::metrics::{ControllerMetrics, TermCheck};
use crate::queue::{Priority, Queue, QueueConfig};

/// What a reconcile asks for next.
pub(crate) enum Next {
    /// Come back after this long (None: on the next change only).
    After(Option<Duration>),
    /// It failed: retry after this long.
    Retry(Duration),
}

/// How long a reconcile that panicked waits before it is tried again.
const AFTER_PANIC: Duration = Duration::from_secs(5);

pub(crate) struct Runner<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash,
{
    pub store: Store<K>,
    pub concurrency: usize,
    pub config: QueueConfig,
    pub metrics: ControllerMetrics,
    pub shutdown: CancellationToken,
    /// Resolves true once the caches have synced; false: reconciles never start in this run.
    pub gate: BoxFuture<'static, bool>,
    /// Whether this replica leads now; reconciles run only while it does.
    pub leading: Leading,
    /// Sharded: how an object labelled for draining is handed back instead of reconciled.
    pub handoff: Option<Handoff<K>>,
}

/// A sharded controller's hand-off: an object carrying `drain_label` is not reconciled any
/// more; once no reconcile of it runs (the queue never starts a key twice), `release` hands
/// it back. It runs as the key's work, so nothing else of that key starts meanwhile.
pub(crate) struct Handoff<K> {
    pub drain_label: String,
    pub release: Arc<dyn Fn(Arc<K>) -> BoxFuture<'static, Next> + Send + Sync>,
    /// Reads the object again from the API server (a quorum read): Some(true) while it is
    /// still this member's (the same UID, its shard label names it, no drain label),
    /// Some(false) once moved away or gone, None when the read failed. Asked before a key's
    /// first start in a term when the read of the share did not show its object and the
    /// cached object's version does not compare with the read's ([`FirstStart::ReadAlone`]).
    pub confirm: Arc<dyn Fn(Arc<K>) -> BoxFuture<'static, Option<bool>> + Send + Sync>,
    /// Reads this member's share from the API server (a quorum read); None when the read
    /// failed (read again after a back-off, nothing of the term starting meanwhile). Once as
    /// each term begins.
    pub read_share: ReadShare,
}

/// See [`Handoff::read_share`].
pub(crate) type ReadShare = Arc<dyn Fn() -> BoxFuture<'static, Option<Share>> + Send + Sync>;

/// A member's share as the API server showed it once.
#[derive(Debug, Default)]
pub(crate) struct Share {
    /// The UIDs of the objects it labels with this member and asks no hand-off of.
    pub uids: HashSet<String>,
    /// The `resourceVersion` the list was read at.
    pub resource_version: Option<String>,
}

/// How a key starts, first in a term, by what the read of the share said of its cached object.
#[derive(Debug, PartialEq)]
enum FirstStart {
    /// From the cache: the read showed it, or the cache shows a write newer than the read.
    Cache,
    /// Not at all: not this member's when the read was taken, and the cache has seen nothing
    /// newer (the watch brings the move; the key comes back if the object does).
    Done,
    /// Only once the object, read alone, is this member's: the versions do not compare.
    ReadAlone,
}

fn first_start(share: &Share, uid: Option<&str>, resource_version: Option<&str>) -> FirstStart {
    if uid.is_some_and(|u| share.uids.contains(u)) {
        return FirstStart::Cache;
    }
    let newer = resource_version
        .zip(share.resource_version.as_deref())
        .and_then(|(obj, list)| Some(comparable(obj)?.cmp(&comparable(list)?)));
    match newer {
        Some(std::cmp::Ordering::Greater) => FirstStart::Cache,
        Some(_) => FirstStart::Done,
        None => FirstStart::ReadAlone,
    }
}

/// A `resourceVersion` as a number, if it is one as Kubernetes defines comparable versions
/// (KEP-5504, stable in 1.35, and what etcd-backed servers have always served): a positive
/// decimal integer without leading zeros. Anything else (an aggregated API server's own
/// versions, say) is not compared.
fn comparable(rv: &str) -> Option<u128> {
    if rv.starts_with('0') || !rv.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rv.parse().ok().filter(|n| *n > 0)
}

impl<K> Runner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    pub(crate) async fn run(
        self,
        mut sources: SelectAll<BoxStream<'static, (ObjectRef<K>, Origin)>>,
        work: impl Fn(Arc<K>) -> BoxFuture<'static, Next>,
    ) {
        let Runner {
            store,
            concurrency,
            config,
            metrics,
            shutdown,
            gate,
            mut leading,
            handoff,
        } = self;
        metrics.set_max_concurrent_reconciles(concurrency);
        let mut queue = Queue::new(config).with_workers(concurrency);
        let mut depth = Depth::new(&metrics);
        let mut running: JoinSet<Next> = JoinSet::new();
        let mut keys: HashMap<tokio::task::Id, (ObjectRef<K>, crate::metrics::WorkGuard)> =
            HashMap::new();
        let mut gate = Some(gate);
        let mut open = false;
        let mut draining = false;
        let mut sources_open = !sources.is_empty();
        // The term the reconciles in flight belong to (None: not leading).
        let mut term = None;
        // Changes of `leading` still to come (false once its sender is gone).
        let mut terms_open = true;
        // Reconciles aborted at the end of a term, not yet ended.
        let mut aborting = false;
        // Sharded: this member's share as read when the current term began (the term, the
        // UIDs), the read in flight, and the keys read alone since and found this member's.
        let mut share: Option<(u64, Share)> = None;
        let mut reading: Option<(u64, BoxFuture<'static, Share>)> = None;
        let confirmed: Confirmed<K> = Arc::default();
        loop {
            let now_term = leading.current();
            if now_term != term {
                if let Ok(mut c) = confirmed.lock() {
                    c.retain(|(t, _)| Some(*t) == now_term);
                }
            }
            if must_abort(term, now_term, running.is_empty()) {
                running.abort_all();
                aborting = true;
            }
            term = now_term;
            let leads = term.is_some();
            if aborting && running.is_empty() {
                aborting = false;
            }
            if let Some(h) = &handoff {
                // A past term's read, answered or not, says nothing of this one.
                if reading.as_ref().is_some_and(|(t, _)| Some(*t) != term) {
                    reading = None;
                }
                if !share_read(&share, term) {
                    share = None;
                }
                match term {
                    Some(t) if reading.is_none() && !share_read(&share, term) => {
                        let read = read_until_answered(h.read_share.clone(), metrics.clone());
                        reading = Some((t, read));
                    }
                    _ => {}
                }
            }
            let unread = handoff.is_some() && !share_read(&share, term);
            let held = aborting || unread;
            if may_start(open, leads, draining, held) {
                while running.len() < concurrency {
                    let now = Instant::now();
                    let Some(p) = queue.pop(now) else { break };
                    match store.get(&p.key) {
                        Some(obj) => {
                            let guard = metrics.work_started(p.priority, p.waited);
                            let job = match &handoff {
                                Some(h)
                                    if obj
                                        .meta()
                                        .labels
                                        .as_ref()
                                        .is_some_and(|l| l.contains_key(&h.drain_label)) =>
                                {
                                    (h.release)(obj)
                                }
                                Some(h) => {
                                    let mine = (term.unwrap_or_default(), p.key.clone());
                                    let start = match &share {
                                        Some((_, s)) => first_start(
                                            s,
                                            obj.meta().uid.as_deref(),
                                            obj.meta().resource_version.as_deref(),
                                        ),
                                        None => FirstStart::ReadAlone,
                                    };
                                    let known = start == FirstStart::Cache
                                        || confirmed.lock().is_ok_and(|c| c.contains(&mine));
                                    if known {
                                        work(obj)
                                    } else if start == FirstStart::Done {
                                        metrics.term_checked(TermCheck::Moved);
                                        Box::pin(async { Next::After(None) })
                                    } else {
                                        metrics.term_checked(TermCheck::ObjectRead);
                                        confirm_first(
                                            (h.confirm)(obj.clone()),
                                            work(obj),
                                            confirmed.clone(),
                                            mine,
                                        )
                                    }
                                }
                                None => work(obj),
                            };
                            let handle = running.spawn(job);
                            keys.insert(handle.id(), (p.key, guard));
                        }
                        None => {
                            // Gone since it was queued (deleted, or a child's owner that
                            // never existed): nothing to reconcile.
                            queue.done(&p.key);
                        }
                    }
                }
            }
            depth.report(&queue);
            if draining && running.is_empty() {
                return;
            }
            let due = timer_wake(queue.next_due(), open, leads, draining, held);
            tokio::select! {
                biased;
                _ = shutdown.cancelled(), if !draining => draining = true,
                // First: a lost lease must stop the reconciles before they go on.
                more = leading.changed(), if terms_open => terms_open = more,
                Some(ended) = running.join_next_with_id(), if !running.is_empty() => {
                    let (id, next) = match ended {
                        Ok((id, next)) => (id, Some(next)),
                        Err(e) if e.is_cancelled() => (e.id(), None),
                        Err(e) => {
                            if e.is_panic() {
                                tracing::error!(error = %e, "a reconcile panicked");
                                metrics.reconcile_panicked();
                            }
                            (e.id(), Some(Next::Retry(AFTER_PANIC)))
                        }
                    };
                    let Some((key, guard)) = keys.remove(&id) else { continue };
                    drop(guard);
                    let now = Instant::now();
                    match next {
                        // Aborted at the end of a term: first in the next.
                        None => {
                            queue.interrupted(&key, now);
                        }
                        Some(next) => {
                            queue.done(&key);
                            match next {
                                Next::After(Some(d)) => queue.add_after(key, d, now),
                                Next::After(None) => {}
                                Next::Retry(d) => {
                                    metrics.queue_retried();
                                    queue.add_after(key, d, now);
                                }
                            }
                        }
                    }
                    metrics.set_cached_objects(store.len());
                }
                // Before the triggers: a flood of them (a watch's list) must not hold the term.
                read = async {
                    match reading.as_mut() {
                        Some((_, read)) => read.await,
                        None => std::future::pending().await,
                    }
                }, if reading.is_some() => {
                    share = reading.take().map(|(t, _)| (t, read));
                }
                item = sources.next(), if sources_open && !draining => match item {
                    Some((key, origin)) => {
                        let priority = origin.priority();
                        if queue.add(key, priority, Instant::now()) {
                            metrics.queue_added(priority);
                        }
                    }
                    // The watches ended: nothing more will come.
                    None => sources_open = false,
                },
                // Timers are only fired by starting work: a standby leaves them due.
                _ = sleep_until(due), if due.is_some() => {}
                ok = async {
                    match gate.as_mut() {
                        Some(g) => g.await,
                        None => std::future::pending().await,
                    }
                }, if gate.is_some() => {
                    gate = None;
                    open = ok;
                }
            }
        }
    }
}

/// A key's first start in a term when the read of the share did not show its object and the
/// versions do not compare: its reconcile runs only once the object, read again, is this member's; moved away or gone, the
/// key is done (the watch brings it back if it returns); the read failing, it is tried again.
fn confirm_first<K>(
    confirm: BoxFuture<'static, Option<bool>>,
    work: BoxFuture<'static, Next>,
    confirmed: Confirmed<K>,
    mine: (u64, ObjectRef<K>),
) -> BoxFuture<'static, Next>
where
    K: Resource + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    Box::pin(async move {
        match confirm.await {
            Some(true) => {
                if let Ok(mut c) = confirmed.lock() {
                    c.insert(mine);
                }
                work.await
            }
            Some(false) => Next::After(None),
            None => Next::Retry(RECONFIRM_AFTER),
        }
    })
}

/// The keys read alone and found this member's, by term.
type Confirmed<K> = Arc<std::sync::Mutex<HashSet<(u64, ObjectRef<K>)>>>;

/// How soon a key whose object could not be read again is tried again.
const RECONFIRM_AFTER: Duration = Duration::from_secs(1);

/// Whether the share was read in `term` (a term: nothing is read while not leading).
fn share_read(share: &Option<(u64, Share)>, term: Option<u64>) -> bool {
    term.is_some() && share.as_ref().map(|(t, _)| *t) == term
}

/// The first and the longest wait before the share is read again after a failed read.
const REREAD_FIRST: Duration = Duration::from_millis(250);
const REREAD_MAX: Duration = Duration::from_secs(8);

/// Reads the share until a read answers, backing off between failed reads. Dropped (the term
/// ended, the runner gone), it stops.
fn read_until_answered(read: ReadShare, metrics: ControllerMetrics) -> BoxFuture<'static, Share> {
    Box::pin(async move {
        let mut wait = REREAD_FIRST;
        loop {
            metrics.term_checked(TermCheck::ShareRead);
            if let Some(share) = read().await {
                return share;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(REREAD_MAX);
        }
    })
}

/// Whether the reconciles in flight must be aborted: they started in a term that is over
/// (this replica stopped leading, or it lost and won again between two looks — a term is
/// never carried into the next one).
fn must_abort(started_in: Option<u64>, now: Option<u64>, idle: bool) -> bool {
    !idle && started_in.is_some() && started_in != now
}

/// Whether new reconciles may start: caches synced, leading, not shutting down, and not
/// `held` (a reconcile of a past term still ending, or a sharded runner's share of this term
/// not read yet).
fn may_start(open: bool, leads: bool, draining: bool, held: bool) -> bool {
    open && leads && !draining && !held
}

/// When the runner wakes for the queue's next timer `due`: only when work may start then.
/// Timers are fired by starting work ([`Queue::pop`]): a wake-up that starts nothing leaves
/// the timer due, and the next look wakes again at once (a runner shutting down with a
/// reconcile in flight looped so until it ended; the queue answers None while every worker
/// runs, for the same reason).
fn timer_wake(
    due: Option<Instant>,
    open: bool,
    leads: bool,
    draining: bool,
    held: bool,
) -> Option<Instant> {
    due.filter(|_| may_start(open, leads, draining, held))
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
    }
}

/// The depth gauges, moved by what changed since the last report (several queues share a
/// controller name).
struct Depth {
    metrics: ControllerMetrics,
    last: [i64; 2],
}

impl Depth {
    fn new(metrics: &ControllerMetrics) -> Self {
        Depth {
            metrics: metrics.clone(),
            last: [0, 0],
        }
    }

    fn report<Key: Clone + Eq + Hash>(&mut self, queue: &Queue<Key>) {
        for (i, p) in Priority::ALL.into_iter().enumerate() {
            let now = i64::try_from(queue.depth(p)).unwrap_or(i64::MAX);
            self.metrics.queue_depth_moved(p, now - self.last[i]);
            self.last[i] = now;
        }
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        for (i, p) in Priority::ALL.into_iter().enumerate() {
            self.metrics.queue_depth_moved(p, -self.last[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::Terms;
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use tokio::sync::mpsc;

    type Key = ObjectRef<ConfigMap>;

    fn key(name: &str) -> Key {
        ObjectRef::new(name).within("ns")
    }

    fn store(names: &[&str]) -> Store<ConfigMap> {
        let mut w = Writer::<ConfigMap>::default();
        for n in names {
            let mut cm = ConfigMap::default();
            // `name@rv`: an object whose cached `resourceVersion` is rv.
            let (n, rv) = match n.split_once('@') {
                Some((n, rv)) => (n, Some(rv.to_string())),
                None => (*n, None),
            };
            cm.metadata.name = Some(n.to_string());
            cm.metadata.namespace = Some("ns".into());
            cm.metadata.uid = Some(format!("uid-{n}"));
            cm.metadata.resource_version = rv;
            w.apply_watcher_event(&watcher::Event::Apply(cm));
        }
        w.as_reader()
    }

    /// What the reconciles did, in order: `start a`, `end a`, `aborted a`.
    #[derive(Clone, Default)]
    struct Log(Arc<std::sync::Mutex<Vec<String>>>);

    impl Log {
        fn push(&self, s: String) {
            self.0.lock().expect("log").push(s);
        }
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().expect("log"))
        }
    }

    /// Logs its drop unless disarmed: a reconcile aborted mid-way.
    struct Aborted(Option<(Log, String)>);

    impl Drop for Aborted {
        fn drop(&mut self) {
            if let Some((log, name)) = self.0.take() {
                log.push(format!("aborted {name}"));
            }
        }
    }

    /// Starts a runner of `concurrency` over objects `names`; a reconcile of a key in `hang`
    /// waits until the returned `release` lets it end.
    fn start(
        names: &[&str],
        concurrency: usize,
        terms: &Terms,
        hang: &'static [&'static str],
    ) -> Started {
        start_with(names, concurrency, terms, hang, None)
    }

    /// [`start`] for a sharded runner whose objects are all this member's in its first term,
    /// except `not_ours` later (moved away while it was not leading): the reads of its share
    /// after the first, and each object read alone, say so.
    fn start_sharded(
        names: &[&str],
        concurrency: usize,
        terms: &Terms,
        hang: &'static [&'static str],
        not_ours: &'static [&'static str],
    ) -> Started {
        let all: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let first = std::sync::atomic::AtomicBool::new(true);
        let share = Arc::new(move || {
            let first = first.swap(false, std::sync::atomic::Ordering::SeqCst);
            Some(
                all.iter()
                    .filter(|n| first || !not_ours.contains(&n.as_str()))
                    .map(|n| format!("uid-{n}"))
                    .collect(),
            )
        });
        start_reading(names, concurrency, terms, hang, share, not_ours, None)
    }

    /// [`start_sharded`] whose share, read at the start of a term, is what `share` answers
    /// then (read at `list_rv`), and whose objects read one by one are this member's except
    /// `not_ours`.
    fn start_reading(
        names: &[&str],
        concurrency: usize,
        terms: &Terms,
        hang: &'static [&'static str],
        share: Arc<dyn Fn() -> Option<HashSet<String>> + Send + Sync>,
        not_ours: &'static [&'static str],
        list_rv: Option<&'static str>,
    ) -> Started {
        let reads = Reads::default();
        let r = reads.clone();
        let confirm = Arc::new(move |obj: Arc<ConfigMap>| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            r.gets.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { Some(!not_ours.contains(&name.as_str())) }.boxed()
        });
        let r = reads.clone();
        let read_share: ReadShare = Arc::new(move || {
            r.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let answer = share().map(|uids| Share {
                uids,
                resource_version: list_rv.map(str::to_string),
            });
            async move { answer }.boxed()
        });
        let handoff = Handoff {
            drain_label: "drain".into(),
            release: Arc::new(|_| async { Next::After(None) }.boxed()),
            confirm,
            read_share,
        };
        let mut started = start_with(names, concurrency, terms, hang, Some(handoff));
        started.reads = reads;
        started
    }

    /// The reads of a sharded runner's fake API server: lists of its share, GETs of one object.
    #[derive(Clone, Default)]
    struct Reads {
        lists: Arc<std::sync::atomic::AtomicUsize>,
        gets: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Reads {
        /// (lists, GETs) so far.
        fn counts(&self) -> (usize, usize) {
            use std::sync::atomic::Ordering::SeqCst;
            (self.lists.load(SeqCst), self.gets.load(SeqCst))
        }
    }

    fn start_with(
        names: &[&str],
        concurrency: usize,
        terms: &Terms,
        hang: &'static [&'static str],
        handoff: Option<Handoff<ConfigMap>>,
    ) -> Started {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut sources = SelectAll::new();
        sources.push(
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|i| (i, rx)) })
                .boxed(),
        );
        let log = Log::default();
        let release = Arc::new(tokio::sync::Notify::new());
        let shutdown = CancellationToken::new();
        let runner = Runner {
            store: store(names),
            concurrency,
            config: QueueConfig::default(),
            metrics: crate::metrics::Metrics::new().controller("runner-test"),
            shutdown: shutdown.clone(),
            gate: async { true }.boxed(),
            leading: terms.leading(),
            handoff,
        };
        let (l, r) = (log.clone(), release.clone());
        let work = move |obj: Arc<ConfigMap>| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let (log, release) = (l.clone(), r.clone());
            async move {
                log.push(format!("start {name}"));
                if hang.contains(&name.as_str()) {
                    let mut guard = Aborted(Some((log.clone(), name.clone())));
                    release.notified().await;
                    guard.0 = None;
                }
                log.push(format!("end {name}"));
                Next::After(None)
            }
            .boxed()
        };
        let task = tokio::spawn(runner.run(sources, work));
        Started {
            tx,
            log,
            release,
            stop: shutdown,
            task,
            reads: Reads::default(),
        }
    }

    struct Started {
        tx: mpsc::UnboundedSender<(Key, Origin)>,
        log: Log,
        /// Lets a hanging reconcile end.
        release: Arc<tokio::sync::Notify>,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<()>,
        /// A sharded runner's reads of the API server.
        reads: Reads,
    }

    /// Lets every task run until all wait (the clock is paused: this sleep ends only then).
    async fn settle() {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_queues_and_starts_nothing_until_it_leads() {
        let mut terms = Terms::new(false);
        let Started { tx, log, .. } = start(&["a", "b"], 4, &terms, &[]);
        tx.send((key("a"), Origin::List)).expect("send");
        tx.send((key("b"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(
            log.take(),
            Vec::<String>::new(),
            "a standby reconciles nothing"
        );
        terms.start();
        settle().await;
        assert_eq!(
            log.take(),
            ["start b", "end b", "start a", "end a"],
            "the user's change first"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_term_aborts_reconciles_in_flight_and_holds_the_queue_until_the_next() {
        let mut terms = Terms::new(false);
        terms.start();
        let Started {
            tx,
            log,
            release,
            task,
            ..
        } = start(&["a", "b", "c"], 1, &terms, &["a"]);
        tx.send((key("a"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(log.take(), ["start a"]);
        tx.send((key("b"), Origin::Event)).expect("send");
        terms.end();
        settle().await;
        assert_eq!(log.take(), ["aborted a"], "aborted at once, b not started");
        // A standby goes on reading its triggers.
        tx.send((key("c"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(
            log.take(),
            Vec::<String>::new(),
            "nothing starts while not leading"
        );
        assert!(!task.is_finished(), "the runner (and its caches) stay");
        terms.start();
        settle().await;
        assert_eq!(
            log.take(),
            ["start a"],
            "the interrupted key first, in the next term"
        );
        release.notify_one();
        settle().await;
        assert_eq!(
            log.take(),
            ["end a", "start b", "end b", "start c", "end c"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_lost_term_a_sharded_runner_starts_only_what_is_still_its_own() {
        let mut terms = Terms::new(false);
        terms.start();
        let Started { tx, log, .. } =
            start_sharded(&["a", "b", "c"], 2, &terms, &["a"], &["a", "c"]);
        tx.send((key("a"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(log.take(), ["start a"]);
        tx.send((key("b"), Origin::Event)).expect("send");
        tx.send((key("c"), Origin::Event)).expect("send");
        terms.end();
        settle().await;
        assert_eq!(log.take(), ["aborted a"]);
        // While it did not lead, the sharder moved a and c to another member; this member's
        // cache has not seen it yet (the watch lags): it must not work them in its new term.
        terms.start();
        settle().await;
        assert_eq!(
            log.take(),
            ["start b", "end b"],
            "only b is still this member's: a and c moved while it did not lead"
        );
        // Once confirmed, or before any lost term, a key starts from the cache alone.
        tx.send((key("b"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(log.take(), ["start b", "end b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sharded_runner_s_first_term_starts_only_what_the_api_server_labels_with_it() {
        // A replica restarted under the same name after the sharder took its Lease over and
        // moved a and c away: its cache, listed at start and watched since, still shows them.
        let mut terms = Terms::new(false);
        let share = Arc::new(|| Some(["uid-b".to_string()].into()));
        let Started { tx, log, reads, .. } =
            start_reading(&["a", "b", "c"], 2, &terms, &[], share, &["a", "c"], None);
        for n in ["a", "b", "c"] {
            tx.send((key(n), Origin::List)).expect("send");
        }
        terms.start();
        settle().await;
        assert_eq!(
            log.take(),
            ["start b", "end b"],
            "its first term works only b: a and c moved before it began"
        );
        assert_eq!(
            reads.counts(),
            (1, 2),
            "one read of its share; a and c, which the cache shows, read alone"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_lost_term_a_sharded_runner_reads_its_share_once_not_each_object() {
        const N: usize = 60;
        let names: Vec<String> = (0..N).map(|i| format!("o{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut terms = Terms::new(false);
        terms.start();
        let Started { tx, log, reads, .. } = start_sharded(&refs, 4, &terms, &[], &[]);
        for n in &refs {
            tx.send((key(n), Origin::List)).expect("send");
        }
        settle().await;
        assert_eq!(log.take().len(), 2 * N, "all {N} worked in the first term");
        terms.end();
        settle().await;
        let before = reads.counts();
        terms.start();
        for n in &refs {
            tx.send((key(n), Origin::Event)).expect("send");
        }
        settle().await;
        assert_eq!(
            log.take().len(),
            2 * N,
            "all {N} worked again in the next term"
        );
        let (lists, gets) = reads.counts();
        assert_eq!(
            (lists - before.0, gets - before.1),
            (1, 0),
            "the next term read its share once, not each of its {N} objects"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_placed_after_the_read_of_the_share_is_read_alone_before_it_starts() {
        // d is not in the share read when the term began (placed on this member after it);
        // e, also absent from it, moved away meanwhile but the cache still shows it.
        let mut terms = Terms::new(false);
        let share = Arc::new(|| Some(["uid-a".to_string()].into()));
        let Started { tx, log, reads, .. } =
            start_reading(&["a", "d", "e"], 1, &terms, &[], share, &["e"], None);
        terms.start();
        for n in ["a", "d", "e"] {
            tx.send((key(n), Origin::Event)).expect("send");
        }
        settle().await;
        assert_eq!(log.take(), ["start a", "end a", "start d", "end d"]);
        assert_eq!(reads.counts(), (1, 2), "one list, then d and e read alone");
        // d, once read, starts from the cache for the rest of the term.
        tx.send((key("d"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(log.take(), ["start d", "end d"]);
        assert_eq!(reads.counts(), (1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_s_version_against_the_read_s_tells_a_placed_object_from_a_moved_one() {
        // Read at 100: d was written (placed here) after it, e last seen before it (moved away
        // since, the watch has not shown it yet). Neither is read alone.
        let mut terms = Terms::new(false);
        let share = Arc::new(|| Some(["uid-a".to_string()].into()));
        let Started { tx, log, reads, .. } = start_reading(
            &["a@90", "d@101", "e@99"],
            1,
            &terms,
            &[],
            share,
            &["e"],
            Some("100"),
        );
        terms.start();
        for n in ["a", "d", "e"] {
            tx.send((key(n), Origin::Event)).expect("send");
        }
        settle().await;
        assert_eq!(log.take(), ["start a", "end a", "start d", "end d"]);
        assert_eq!(reads.counts(), (1, 0), "one list, no object read alone");
    }

    #[test]
    fn only_versions_kubernetes_calls_comparable_are_compared() {
        let share = Share {
            uids: ["u".to_string()].into(),
            resource_version: Some("1000".into()),
        };
        assert_eq!(first_start(&share, Some("u"), Some("1")), FirstStart::Cache);
        assert_eq!(
            first_start(&share, Some("v"), Some("1001")),
            FirstStart::Cache
        );
        // Longer is newer: not a string comparison.
        assert_eq!(first_start(&share, None, Some("999")), FirstStart::Done);
        assert_eq!(first_start(&share, None, Some("1000")), FirstStart::Done);
        for odd in ["0", "01001", "1001a", "", "-1001"] {
            assert_eq!(
                first_start(&share, None, Some(odd)),
                FirstStart::ReadAlone,
                "{odd}"
            );
        }
        assert_eq!(first_start(&share, None, None), FirstStart::ReadAlone);
        let unversioned = Share {
            resource_version: None,
            ..share
        };
        assert_eq!(
            first_start(&unversioned, None, Some("5")),
            FirstStart::ReadAlone
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_read_of_the_share_is_retried_before_anything_of_the_term_starts() {
        let failures = Arc::new(std::sync::atomic::AtomicUsize::new(3));
        let f = failures.clone();
        let share = Arc::new(move || {
            use std::sync::atomic::Ordering::SeqCst;
            let failed = f.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok();
            (!failed).then(|| ["uid-a".to_string()].into())
        });
        let mut terms = Terms::new(false);
        let Started { tx, log, reads, .. } =
            start_reading(&["a"], 1, &terms, &[], share, &[], None);
        tx.send((key("a"), Origin::Event)).expect("send");
        terms.start();
        settle().await;
        assert_eq!(
            log.take(),
            ["start a", "end a"],
            "a starts once a read succeeds"
        );
        assert_eq!(
            reads.counts(),
            (4, 0),
            "three failed reads, then one that answered"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_lost_and_won_between_two_looks_still_aborts() {
        let mut terms = Terms::new(false);
        terms.start();
        let Started { tx, log, .. } = start(&["a"], 2, &terms, &["a"]);
        tx.send((key("a"), Origin::Event)).expect("send");
        settle().await;
        assert_eq!(log.take(), ["start a"]);
        // The runner sees only the new term: the old term's reconcile must not go on in it.
        terms.end();
        terms.start();
        settle().await;
        assert_eq!(log.take(), ["aborted a", "start a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_lets_reconciles_in_flight_end_and_a_standby_returns_at_once() {
        let mut terms = Terms::new(false);
        terms.start();
        let Started {
            tx,
            log,
            release,
            stop,
            task,
            ..
        } = start(&["a", "b"], 1, &terms, &["a"]);
        tx.send((key("a"), Origin::Event)).expect("send");
        tx.send((key("b"), Origin::Event)).expect("send");
        settle().await;
        stop.cancel();
        settle().await;
        assert!(!task.is_finished(), "a waits for its reconcile");
        release.notify_one();
        task.await.expect("runner");
        assert_eq!(
            log.take(),
            ["start a", "end a"],
            "nothing new after shutdown"
        );

        let terms = Terms::new(false);
        let Started {
            tx,
            log,
            stop,
            task,
            ..
        } = start(&["a"], 1, &terms, &[]);
        tx.send((key("a"), Origin::Event)).expect("send");
        settle().await;
        stop.cancel();
        task.await.expect("runner");
        assert_eq!(log.take(), Vec::<String>::new());
    }

    #[test]
    fn a_timer_wakes_the_runner_only_when_its_key_could_start() {
        let due = Some(Instant::now());
        assert_eq!(timer_wake(due, true, true, false, false), due);
        assert_eq!(timer_wake(None, true, true, false, false), None);
        // A timer is fired only when work starts: a wake-up that starts nothing leaves it
        // due, and the runner would wake again at once, for as long as that lasts.
        assert_eq!(
            timer_wake(due, true, true, true, false),
            None,
            "shutting down: nothing starts, the reconciles in flight end the runner"
        );
        assert_eq!(
            timer_wake(due, false, true, false, false),
            None,
            "not synced"
        );
        assert_eq!(
            timer_wake(due, true, false, false, false),
            None,
            "a standby"
        );
        assert_eq!(
            timer_wake(due, true, true, false, true),
            None,
            "a term ending"
        );
    }

    #[test]
    fn only_reconciles_of_an_ended_term_are_aborted() {
        assert!(must_abort(Some(1), None, false), "the term ended");
        assert!(
            must_abort(Some(1), Some(2), false),
            "ended and another began"
        );
        assert!(!must_abort(Some(1), Some(1), false), "same term");
        assert!(!must_abort(None, Some(1), false), "a standby runs nothing");
        assert!(!must_abort(Some(1), None, true), "nothing in flight");
        assert!(may_start(true, true, false, false));
        assert!(!may_start(false, true, false, false), "caches not synced");
        assert!(!may_start(true, false, false, false), "not leading");
        assert!(!may_start(true, true, true, false), "shutting down");
        assert!(
            !may_start(true, true, false, true),
            "last term's reconciles still ending"
        );
    }
}
