//! Runs one controller's reconciles from its [`Queue`]: bosun's own runner in place of
//! kube-runtime's `Controller`, whose scheduler has no priorities (see [`crate::queue`]).
//!
//! One task reads every trigger stream into the queue — the primary watch must be read all
//! the time anyway, it fills the cache — and starts up to `concurrency` reconciles, each a
//! task of its own (several cores, and a panicking reconcile is a failed reconcile, retried,
//! not the end of its controller). Nothing starts before `gate` opens (every cache synced,
//! and this replica leading): a warm standby queues, it does not reconcile, and when it wins
//! the lease it starts with the user's changes that came meanwhile. Each reconcile reads its
//! object from the cache when it starts, so it never works from a stale trigger.
//!
//! On shutdown no new reconcile starts and the runner returns once those in flight end;
//! dropped (the lease lost), it aborts them.
//!
//! Sharded ([`crate::shard`]), an object the sharder labelled for draining is not reconciled
//! again: when its key comes up — so never while a reconcile of it runs — the runner hands it
//! back instead.
use std::collections::HashMap;
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
use crate::metrics::ControllerMetrics;
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
    /// Resolves true once reconciles may start; false: they never will in this run.
    pub gate: BoxFuture<'static, bool>,
    /// Sharded: how an object labelled for draining is handed back instead of reconciled.
    pub handoff: Option<Handoff<K>>,
}

/// A sharded controller's hand-off: an object carrying `drain_label` is not reconciled any
/// more; once no reconcile of it runs (the queue never starts a key twice), `release` hands
/// it back. It runs as the key's work, so nothing else of that key starts meanwhile.
pub(crate) struct Handoff<K> {
    pub drain_label: String,
    pub release: Arc<dyn Fn(Arc<K>) -> BoxFuture<'static, Next> + Send + Sync>,
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
        loop {
            if open && !draining {
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
                                _ => work(obj),
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
            let due = queue.next_due();
            tokio::select! {
                biased;
                _ = shutdown.cancelled(), if !draining => draining = true,
                Some(ended) = running.join_next_with_id(), if !running.is_empty() => {
                    let (id, next) = match ended {
                        Ok((id, next)) => (id, next),
                        Err(e) => {
                            if e.is_panic() {
                                tracing::error!(error = %e, "a reconcile panicked");
                                metrics.reconcile_panicked();
                            }
                            (e.id(), Next::Retry(AFTER_PANIC))
                        }
                    };
                    let Some((key, guard)) = keys.remove(&id) else { continue };
                    drop(guard);
                    queue.done(&key);
                    let now = Instant::now();
                    match next {
                        Next::After(Some(d)) => queue.add_after(key, d, now),
                        Next::After(None) => {}
                        Next::Retry(d) => {
                            metrics.queue_retried();
                            queue.add_after(key, d, now);
                        }
                    }
                    metrics.set_cached_objects(store.len());
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
                _ = sleep_until(due), if due.is_some() && open => {}
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
