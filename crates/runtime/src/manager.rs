//! The manager: runs several controllers in one process.
//!
//! Order of life: bind the HTTP endpoints and serve the operators' webhooks → start every
//! operator → (with leader election) wait for the lease as a warm standby: the operators'
//! watches run and their caches sync, but every reconcile waits for the lease (it re-reads
//! its object from the cache once it may go on) → run until a shutdown signal or an operator
//! failing. A new leader so starts from synced caches: no cold list between the lease and
//! the first reconcile. With a [`Fence`] (built into the operators' client), no write of a
//! standby leaves the process at all. On shutdown the operators are asked to stop and
//! in-flight reconciles finish while the lease is still renewed (the grace period may
//! outlast the lease); the lease is released only after them.
//!
//! The operators outlive a term as leader. When the lease is lost (or cannot be renewed
//! before the renew deadline) the term ends: every runner aborts its reconciles in flight at
//! once and starts no other — nothing this replica runs may write after it stopped being sure
//! it leads — while the watches, caches and queues go on, and the manager campaigns again. A
//! replica that lost its lease for a moment is so a warm standby at once, like one that never
//! led, and when it wins again its reconciles start without a list, the interrupted ones
//! first. An operator that writes from tasks of its own may ask for the cold restart instead
//! ([`Operator::restarts_on_lost_term`]). An API server blip costs a failover, not a process
//! restart (and no CrashLoopBackOff after a few of them).
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::fence::Fence;
use crate::http::{self, Health, Role};
use crate::leader::{LeaderConfig, LeaderElector};
use crate::metrics::{ControllerMetrics, Metrics};
use crate::rbac::Rbac;

/// Which namespaces the operators watch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    All,
    Namespaces(Vec<String>),
}

impl Scope {
    pub fn from_list(namespaces: &[String]) -> Self {
        let list: Vec<String> = namespaces
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect();
        if list.is_empty() {
            Scope::All
        } else {
            Scope::Namespaces(list)
        }
    }
}

#[derive(Clone, Debug)]
pub struct ManagerConfig {
    pub scope: Scope,
    /// Reconciles in flight at once per controller. kube-runtime's default is unbounded;
    /// 16 was the best write throughput measured against a 2-core API server.
    pub concurrency: u16,
    pub metrics_addr: Option<SocketAddr>,
    pub probe_addr: Option<SocketAddr>,
    pub leader: Option<LeaderConfig>,
    /// How long in-flight reconciles get to finish on shutdown.
    pub shutdown_grace: Duration,
    /// Require a bearer token allowed to `get /metrics` (TokenReview + SubjectAccessReview).
    pub metrics_auth: bool,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            scope: Scope::All,
            concurrency: 16,
            metrics_addr: None,
            probe_addr: None,
            leader: None,
            shutdown_grace: Duration::from_secs(30),
            metrics_auth: false,
        }
    }
}

/// What the manager hands each operator.
#[derive(Clone)]
pub struct ControllerContext {
    pub client: Client,
    pub scope: Scope,
    pub concurrency: u16,
    pub metrics: ControllerMetrics,
    pub health: Health,
    pub name: String,
    /// Cancelled on graceful shutdown: stop taking work, let in-flight reconciles finish.
    pub shutdown: CancellationToken,
    /// Whether this replica leads: a warm standby runs its watches, and its reconciles wait
    /// for this. Sharded: whether it holds its membership Lease. It may end and start again
    /// while the operator runs: whatever the operator writes besides its controllers'
    /// reconciles must stop while it does not lead (or see [`Operator::restarts_on_lost_term`]).
    pub leading: Leading,
    /// Set when objects are sharded across replicas ([`crate::shard`]): the controllers
    /// watch their shard only, and place objects while this replica holds the sharder Lease.
    pub shard: Option<crate::shard::ShardContext>,
    /// The process's record of child kinds, which its Leases carry ([`crate::shard::record`]).
    pub(crate) record: crate::shard::record::Record,
}

/// Whether this replica leads (always, without leader election), and in which term: the
/// manager numbers its terms as leader, so a reconcile of one term is never carried into the
/// next (see [`crate::runner`]). A replica goes back and forth: leading ends when the lease
/// is lost or in doubt, and starts again when it is won back.
#[derive(Clone, Debug)]
pub struct Leading(tokio::sync::watch::Receiver<Option<u64>>);

impl Leading {
    /// A replica that leads from the start (no leader election; tests).
    pub fn always() -> Self {
        let (tx, rx) = tokio::sync::watch::channel(Some(0));
        drop(tx);
        Leading(rx)
    }

    pub fn now(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// Waits until this replica leads; false when it never will (the manager stopped).
    pub async fn wait(&self) -> bool {
        let mut rx = self.0.clone();
        let leads = rx.wait_for(|l| l.is_some()).await.is_ok();
        leads
    }

    /// The term this replica leads in now (None: it does not lead), marked seen.
    pub(crate) fn current(&mut self) -> Option<u64> {
        *self.0.borrow_and_update()
    }

    /// Waits for a change not yet seen through [`Leading::current`]; false when none will
    /// come any more (the value stays as it is).
    pub(crate) async fn changed(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}

/// The manager's side of [`Leading`].
pub(crate) struct Terms {
    tx: tokio::sync::watch::Sender<Option<u64>>,
    next: u64,
}

impl Terms {
    pub(crate) fn new(leads: bool) -> Self {
        let (tx, _) = tokio::sync::watch::channel(leads.then_some(0));
        Terms { tx, next: 1 }
    }

    pub(crate) fn leading(&self) -> Leading {
        Leading(self.tx.subscribe())
    }

    pub(crate) fn start(&mut self) {
        let term = self.next;
        self.next += 1;
        self.tx.send_replace(Some(term));
    }

    pub(crate) fn end(&self) {
        self.tx.send_replace(None);
    }
}

impl ControllerContext {
    /// Marks this controller's caches synced (readiness).
    pub fn mark_synced(&self) {
        self.health.mark_synced(&self.name);
    }

    /// The same context with another number of reconciles in flight (an operator's own
    /// setting, say).
    pub fn with_concurrency(mut self, concurrency: u16) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// A future that resolves on graceful shutdown, for `Controller::graceful_shutdown_on`.
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let t = self.shutdown.clone();
        async move { t.cancelled().await }
    }
}

pub type OperatorError = Box<dyn std::error::Error + Send + Sync>;

/// An operator: what it serves and needs (for `bosun crd`, `rbac` and `manifests`) and how it
/// runs (usually through [`ControllerContext::run_controller`]). The binary keeps one list of
/// them; every command reads that list.
pub trait Operator: Send + Sync {
    fn name(&self) -> &str;
    /// The `controller` label of its metrics: its name unless it follows another
    /// framework's naming (operator-sdk's Helm and Ansible operators: `<kind>-controller`).
    fn metrics_name(&self) -> String {
        self.name().to_string()
    }
    /// The CustomResourceDefinitions it serves.
    fn crds(&self) -> Vec<CustomResourceDefinition>;
    /// What it needs granted.
    fn rbac(&self) -> Rbac;
    /// Runs until `ctx.shutdown` is cancelled and in-flight work is done.
    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>>;
    /// Whether the manager restarts this operator cold when a term as leader ends: its task
    /// aborted (caches and all) and started again as a standby that lists everything anew.
    /// The default (false) keeps it running as a warm standby — only its reconciles are
    /// aborted and held back until this replica leads again — which is right for an operator
    /// whose every write is a reconcile of [`ControllerContext::run_controller`]. Say true
    /// for one that also writes from tasks of its own that do not follow
    /// [`ControllerContext::leading`] to its end.
    fn restarts_on_lost_term(&self) -> bool {
        false
    }
    /// Admission or conversion webhooks to serve on every replica, leader or standby, for as
    /// long as the manager runs (None: none).
    fn webhooks(&self) -> Option<crate::webhook::Plan> {
        None
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("could not bind the HTTP endpoints: {0}")]
    Bind(#[from] std::io::Error),
    #[error("leader election: {0}")]
    Leader(#[from] crate::leader::LeaderError),
    #[error("operator {name} failed: {source}")]
    Operator { name: String, source: OperatorError },
    #[error("operator {0} stopped unexpectedly")]
    OperatorEnded(String),
    #[error("operator {name}'s webhooks: {source}")]
    Webhook {
        name: String,
        source: crate::webhook::WebhookError,
    },
    #[error(transparent)]
    Kubernetes(#[from] crate::kubeversion::VersionError),
}

pub struct Manager {
    client: Client,
    /// Lease renewals get their own connection pool and rate limit: requests queued on the
    /// operators' client (reconciles, `/metrics` reviews) must not delay them past the renew
    /// deadline.
    leader_client: Option<Client>,
    config: ManagerConfig,
    metrics: Metrics,
    health: Health,
    operators: Vec<Arc<dyn Operator>>,
    fence: Option<Fence>,
    sharding: Option<Sharding>,
    /// The child kinds this replica's controllers started or read from a Lease: written on
    /// the Lease this replica renews (the leader Lease; sharded, its member Lease and the
    /// sharder Lease), read from those it watches ([`crate::shard::record`]).
    record: crate::shard::record::Record,
}

/// Sharding settings handed to the manager.
struct Sharding {
    config: crate::shard::ShardConfig,
    client: Client,
    fence: Fence,
}

impl Manager {
    pub fn new(client: Client, config: ManagerConfig) -> Self {
        Manager {
            client,
            leader_client: None,
            config,
            metrics: Metrics::new(),
            health: Health::default(),
            operators: Vec::new(),
            fence: None,
            sharding: None,
            record: Default::default(),
        }
    }

    /// Shards every operator's objects across the replicas ([`crate::shard`]) in place of
    /// leader election (the manager's `leader` setting is then unused): this replica holds
    /// the membership Lease of `config` (which moves the operators' fence, see
    /// [`Manager::with_fence`]) and, when it holds the sharder Lease, places objects through
    /// `sharder_client`, which must be fenced by `sharder_fence`. Needs a
    /// [`Manager::with_leader_client`] without a fence.
    pub fn with_sharding(
        mut self,
        config: crate::shard::ShardConfig,
        sharder_client: Client,
        sharder_fence: Fence,
    ) -> Self {
        self.sharding = Some(Sharding {
            config,
            client: sharder_client,
            fence: sharder_fence,
        });
        self
    }

    /// The fence built into `client` ([`crate::client::client_fenced`]): leader election
    /// moves it, so no write leaves this replica unless it is sure it leads. Needs a
    /// [`Manager::with_leader_client`] without it, or the elector could not write the Lease.
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The client for leader election; build it apart from the operators' client (its own
    /// connections, no shared rate limit). Without one, leader election shares the main client.
    pub fn with_leader_client(mut self, client: Client) -> Self {
        self.leader_client = Some(client);
        self
    }

    pub fn with_operator(mut self, op: Arc<dyn Operator>) -> Self {
        self.operators.push(op);
        self
    }

    pub fn metrics(&self) -> Metrics {
        self.metrics.clone()
    }

    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// Runs until `shutdown` resolves (Ok) or leadership is lost / an operator fails (Err).
    /// `on_bound` learns the bound HTTP addresses (useful with port 0).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send,
        on_bound: impl FnOnce(&[SocketAddr]),
    ) -> Result<(), ManagerError> {
        // A server too old is refused before anything runs; one that cannot be reached now
        // is left to the controllers' retries, as before.
        match crate::kubeversion::check(&self.client).await {
            Ok(_) => {}
            Err(crate::kubeversion::CheckError::Version(e)) => return Err(e.into()),
            Err(e) => tracing::warn!(error = %e, "could not check the API server's version"),
        }
        let auth = self
            .config
            .metrics_auth
            .then(|| crate::auth::MetricsAuth::new(self.client.clone()));
        let (addrs, servers) = http::bind(
            self.config.metrics_addr,
            self.config.probe_addr,
            self.metrics.clone(),
            self.health.clone(),
            auth,
        )
        .await?;
        on_bound(&addrs);
        let mut http_tasks = JoinSet::new();
        for s in servers {
            http_tasks.spawn(s);
        }
        // Before the lease: a standby answers admission reviews too.
        let webhooks = CancellationToken::new();
        let _stop_webhooks = webhooks.clone().drop_guard();
        for op in &self.operators {
            if let Some(mut plan) = op.webhooks() {
                plan.webhooks = plan.webhooks.with_metrics(self.metrics.clone());
                crate::webhook::plan::start(plan, &self.client, webhooks.child_token())
                    .await
                    .map_err(|source| ManagerError::Webhook {
                        name: op.name().to_string(),
                        source,
                    })?;
            }
        }
        let result = self.run_inner(shutdown).await;
        http_tasks.abort_all();
        result
    }

    /// Standby → leading → (lease lost) standby again, until shutdown or an operator fails.
    async fn run_inner(
        &self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ManagerError> {
        tokio::pin!(shutdown);
        // Sharded: the membership Lease takes the leader Lease's place (every replica holds
        // its own, so each leads its shard), and the sharder runs beside the operators.
        let (leader, shard) = match &self.sharding {
            Some(sh) => {
                let (tx, rx) = tokio::sync::watch::channel(None);
                let reports = crate::shard::Reports::default();
                let coordinator = crate::shard::coordinator::Coordinator {
                    cfg: sh.config.clone(),
                    leader_client: self.leader_client.clone().unwrap_or(self.client.clone()),
                    sharder_client: sh.client.clone(),
                    fence: sh.fence.clone(),
                    view: tx,
                    reports: reports.clone(),
                    record: self.record.clone(),
                };
                let ctx = crate::shard::ShardContext {
                    member: sh.config.identity().to_string(),
                    sharder_client: sh.client.clone(),
                    view: rx,
                    reports,
                };
                (Some(sh.config.member_lease()), Some((coordinator, ctx)))
            }
            None => (self.config.leader.clone(), None),
        };
        let (coordinator, shard) = match shard {
            Some((c, ctx)) => (Some(c), Some(ctx)),
            None => (None, None),
        };
        // Stopped once the operators have stopped (and released the membership): the sharder
        // Lease is released then, so another replica places objects at once.
        let stop = CancellationToken::new();
        let placing = coordinator.map(|c| tokio::spawn(c.run(stop.clone())));
        // This future dropped mid-run (aborted, or lost in a caller's `select!`): the sharder
        // goes with it, never left renewing the sharder Lease for a replica that is gone.
        let _placing_aborted = placing.as_ref().map(|h| AbortOnDrop(h.abort_handle()));
        let result = self.run_terms(shutdown, leader, shard).await;
        if let Some(handle) = placing {
            stop.cancel();
            let grace = self
                .sharding
                .as_ref()
                .map_or(Duration::ZERO, |s| s.config.sharder_lease().renew_deadline);
            let abort = handle.abort_handle();
            if tokio::time::timeout(grace, handle).await.is_err() {
                tracing::warn!("could not release the sharder lease: timed out");
                abort.abort();
            }
        }
        result
    }

    /// Standby → leading → (lease lost) standby again, until shutdown or an operator fails.
    async fn run_terms(
        &self,
        shutdown: std::pin::Pin<&mut (impl Future<Output = ()> + Send)>,
        leader: Option<LeaderConfig>,
        shard: Option<crate::shard::ShardContext>,
    ) -> Result<(), ManagerError> {
        let mut shutdown = shutdown;
        let mut elector = match &leader {
            Some(cfg) => {
                let client = self.leader_client.as_ref().unwrap_or(&self.client);
                let el = LeaderElector::new(client.clone(), cfg.clone())?
                    .with_record(self.record.clone());
                Some(match &self.fence {
                    Some(f) if self.leader_client.is_some() => el.with_fence(f.clone()),
                    Some(_) => {
                        tracing::warn!("no separate leader client: writes are not fenced");
                        el
                    }
                    None => el,
                })
            }
            None => None,
        };
        let lease = leader
            .as_ref()
            .map(|l| l.lease_name.clone())
            .unwrap_or_default();
        // The operators run from here to the end, across terms: a standby keeps its caches.
        let mut terms = Terms::new(elector.is_none());
        let token = CancellationToken::new();
        let mut tasks = Tasks::default();
        for op in &self.operators {
            self.start_operator(&mut tasks, op, &token, terms.leading(), shard.clone());
        }
        tracing::info!(operators = self.operators.len(), "controllers started");
        loop {
            if let Some(el) = elector.as_mut() {
                self.health.set_role(Role::Standby);
                self.metrics.set_leader(&lease, false);
                enum Wait {
                    Shutdown,
                    Acquired,
                    Ended(String, Result<(), OperatorError>),
                }
                let waited = tokio::select! {
                    _ = &mut shutdown => Wait::Shutdown,
                    _ = el.acquire() => Wait::Acquired,
                    Some(done) = tasks.join_next() => ended(done),
                };
                match waited {
                    Wait::Acquired => {}
                    Wait::Shutdown => {
                        // A standby's reconciles all wait for the lease: nothing to finish.
                        token.cancel();
                        if tokio::time::timeout(self.config.shutdown_grace, tasks.drain())
                            .await
                            .is_err()
                        {
                            tasks.abort_all();
                            tasks.drain().await;
                        }
                        return Ok(());
                    }
                    Wait::Ended(name, r) => {
                        token.cancel();
                        tasks.abort_all();
                        tasks.drain().await;
                        return Err(match r {
                            Ok(()) => ManagerError::OperatorEnded(name),
                            Err(source) => ManagerError::Operator { name, source },
                        });
                    }
                }
                fn ended(done: Result<Ran, tokio::task::JoinError>) -> Wait {
                    match done {
                        Ok((name, r)) => Wait::Ended(name, r),
                        Err(e) => Wait::Ended("unknown".into(), Err(Box::new(e))),
                    }
                }
                self.metrics.set_leader(&lease, true);
                terms.start();
            }
            self.health.set_role(Role::Leading);
            match self
                .lead(
                    &mut elector,
                    &mut shutdown,
                    &lease,
                    &token,
                    &mut tasks,
                    &terms,
                )
                .await?
            {
                Term::Lost => {
                    self.restart_cold(&mut tasks, &token, &terms, shard.clone())
                        .await;
                    continue;
                }
                Term::Stopped => return Ok(()),
            }
        }
    }

    /// Starts `op`; its reconciles wait for `leading`.
    fn start_operator(
        &self,
        tasks: &mut Tasks,
        op: &Arc<dyn Operator>,
        token: &CancellationToken,
        leading: Leading,
        shard: Option<crate::shard::ShardContext>,
    ) {
        self.health.register(op.name());
        let ctx = ControllerContext {
            client: self.client.clone(),
            scope: self.config.scope.clone(),
            concurrency: self.config.concurrency,
            metrics: self.metrics.controller(&op.metrics_name()),
            health: self.health.clone(),
            name: op.name().to_string(),
            shutdown: token.clone(),
            leading,
            shard,
            record: self.record.clone(),
        };
        let name = op.name().to_string();
        let fut = op
            .run(ctx)
            .instrument(tracing::info_span!("controller", controller = %name));
        let set = if op.restarts_on_lost_term() {
            &mut tasks.cold
        } else {
            &mut tasks.warm
        };
        set.spawn(async move { (name, fut.await) });
    }

    /// After a lost term: the operators that asked for it are aborted (once gone, nothing
    /// of them runs beside the next term) and started again as cold standbys.
    async fn restart_cold(
        &self,
        tasks: &mut Tasks,
        token: &CancellationToken,
        terms: &Terms,
        shard: Option<crate::shard::ShardContext>,
    ) {
        if tasks.cold.is_empty() {
            return;
        }
        tasks.cold.abort_all();
        while tasks.cold.join_next().await.is_some() {}
        for op in &self.operators {
            if op.restarts_on_lost_term() {
                self.start_operator(tasks, op, token, terms.leading(), shard.clone());
            }
        }
        tracing::info!("operators that restart on a lost term started again");
    }

    /// One term as leader: runs every operator until shutdown (drained while the lease is
    /// still renewed, then released), the loss of the lease (every reconcile aborted at once,
    /// the operators kept as warm standbys), or an operator ending (an error).
    async fn lead<F: Future<Output = ()>>(
        &self,
        elector: &mut Option<LeaderElector>,
        shutdown: &mut std::pin::Pin<&mut F>,
        lease: &str,
        token: &CancellationToken,
        tasks: &mut Tasks,
        terms: &Terms,
    ) -> Result<Term, ManagerError> {
        enum Stop {
            Shutdown,
            Lost,
            Ended(String, Result<(), OperatorError>),
        }
        let stop = tokio::select! {
            _ = shutdown.as_mut() => Stop::Shutdown,
            _ = hold(elector) => Stop::Lost,
            Some(done) = tasks.join_next() => match done {
                Ok((name, r)) => Stop::Ended(name, r),
                Err(e) => Stop::Ended("unknown".into(), Err(Box::new(e))),
            },
        };
        match stop {
            Stop::Lost => {
                self.stop_leading(terms, lease);
                tracing::error!("lost leadership: every reconcile aborted; back to standby");
                Ok(Term::Lost)
            }
            Stop::Shutdown => {
                tracing::info!("shutting down: letting in-flight reconciles finish");
                token.cancel();
                // Keep renewing while the reconciles drain: the grace period may outlast
                // the lease, and a standby must not start writing next to them.
                enum Drain {
                    Done,
                    GraceOver,
                    Lost,
                }
                let drained = tokio::select! {
                    r = tokio::time::timeout(self.config.shutdown_grace, tasks.drain()) => {
                        if r.is_ok() { Drain::Done } else { Drain::GraceOver }
                    }
                    _ = hold(elector) => Drain::Lost,
                };
                match drained {
                    Drain::Done => {}
                    Drain::GraceOver => {
                        tracing::warn!("shutdown grace period over; aborting remaining reconciles");
                        tasks.abort_all();
                        tasks.drain().await;
                    }
                    Drain::Lost => {
                        self.stop_leading(terms, lease);
                        tasks.abort_all();
                        tasks.drain().await;
                        tracing::error!("lost leadership while draining: every controller aborted");
                        return Ok(Term::Stopped);
                    }
                }
                self.release(elector, lease).await;
                Ok(Term::Stopped)
            }
            Stop::Ended(name, r) => {
                token.cancel();
                tasks.abort_all();
                tasks.drain().await;
                self.release(elector, lease).await;
                match r {
                    Ok(()) => Err(ManagerError::OperatorEnded(name)),
                    Err(source) => Err(ManagerError::Operator { name, source }),
                }
            }
        }
    }

    /// Ends the term: every runner aborts its reconciles in flight at once and starts no
    /// other (nothing may write once the lease is in doubt; the fence, closed by the elector,
    /// refuses what is already on its way).
    fn stop_leading(&self, terms: &Terms, lease: &str) {
        terms.end();
        self.metrics.set_leader(lease, false);
        self.health.set_role(Role::Standby);
    }

    async fn release(&self, elector: &mut Option<LeaderElector>, lease: &str) {
        let Some(el) = elector.as_mut() else {
            return;
        };
        // An unreachable API server must not hold the process past its grace period.
        let deadline = el.config().renew_deadline;
        match tokio::time::timeout(deadline, el.release()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease"),
            Err(_) => tracing::warn!("could not release the lease: timed out"),
        }
        self.metrics.set_leader(lease, false);
    }
}

/// What an operator's task returns: its name and how it ended.
type Ran = (String, Result<(), OperatorError>);

/// How a term as leader ended.
enum Term {
    /// The lease was lost: back to standby.
    Lost,
    /// Shutdown: the manager returns.
    Stopped,
}

/// The operators' tasks: those kept across terms, and those restarted cold after a lost
/// term ([`Operator::restarts_on_lost_term`]).
#[derive(Default)]
struct Tasks {
    warm: JoinSet<Ran>,
    cold: JoinSet<Ran>,
}

impl Tasks {
    async fn join_next(&mut self) -> Option<Result<Ran, tokio::task::JoinError>> {
        tokio::select! {
            Some(done) = self.warm.join_next(), if !self.warm.is_empty() => Some(done),
            Some(done) = self.cold.join_next(), if !self.cold.is_empty() => Some(done),
            else => None,
        }
    }

    fn abort_all(&mut self) {
        self.warm.abort_all();
        self.cold.abort_all();
    }

    async fn drain(&mut self) {
        while self.join_next().await.is_some() {}
    }
}

/// Renews the lease while leading; never resolves without leader election.
async fn hold(elector: &mut Option<LeaderElector>) {
    match elector.as_mut() {
        Some(el) => el.hold().await,
        None => std::future::pending::<()>().await,
    }
}

/// Signals that end a process gracefully: SIGTERM (Kubernetes) and SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
