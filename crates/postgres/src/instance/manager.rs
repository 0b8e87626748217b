//! The supervisor: prepares the instance, starts `postgres`, then carries out one request at
//! a time while watching the child. Requests arrive from the HTTP API over a channel, so a
//! promotion and a demotion can never interleave.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::config::{host_port, Config, Role};
use super::error::Error;
use super::os;
use super::pg::{self, Pg};
use super::record::{self, RoleRecord, StartAs};
use super::sql;
use super::state::Rejoin;

/// How long a start (crash recovery, or a replica reaching a consistent state) may go
/// without its replay advancing before it is given up, unless configured
/// (`contract::ENV_START_TIMEOUT`): a recovery that keeps advancing is never cut short.
const START_DEADLINE: Duration = Duration::from_secs(crate::contract::DEFAULT_START_TIMEOUT_SECS);
/// A fast shutdown that takes longer than this is finished with SIGKILL.
const STOP_DEADLINE: Duration = Duration::from_secs(super::STOP_DEADLINE_SECS);

/// What the operator may ask of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Promote,
    /// Become a replica of the primary at `host:port` (rewind or re-clone as needed;
    /// `reclone`: a fresh clone whatever the data, for a replica that can no longer catch up).
    Demote {
        primary: String,
        reclone: bool,
    },
    Fence,
    Unfence,
}

pub struct Request {
    pub command: Command,
    pub reply: oneshot::Sender<Result<(), Error>>,
}

/// Where the manager is, for the state the API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Starting,
    Running,
    Fenced,
    Stopped,
}

/// Shared with the HTTP API (short critical sections only).
#[derive(Debug, Clone)]
pub struct Shared {
    pub phase: Phase,
    /// The role the instance was started in.
    pub role: Role,
    /// `host:port` of the primary it follows.
    pub primary: Option<String>,
    pub last_rejoin: Option<Rejoin>,
    pub rewind_failure: Option<String>,
    pub error: Option<String>,
    /// Why the restore of this new instance failed (it waits, reporting it).
    pub restore_failure: Option<String>,
    /// When the operator last polled with the API token.
    pub operator_contact: Option<Instant>,
    /// The isolation check is armed (a replica streamed from this primary).
    pub isolation_armed: bool,
    /// Asked to shut down (SIGTERM), this instance's postgres has exited cleanly (or was not
    /// running) and will not start again in this container.
    pub stopped_cleanly: bool,
    /// A replica that does not stream: why it never can again from its primary (see
    /// [`super::catchup`]).
    pub cannot_catch_up: Option<String>,
    /// A replica whose reads of the backup store fail (its `restore_command`'s report, or
    /// the manager's own check): kept apart from `error`, which a request's failure may
    /// hold, so that the operator can say it in a condition of its own.
    pub archive_read_failure: Option<String>,
}

/// Runs the instance until `shutdown` (then stops PostgreSQL with a fast shutdown) or until
/// PostgreSQL dies unasked (an error: the pod restarts on its volume).
pub async fn run(cfg: Config, shutdown: CancellationToken) -> Result<(), Error> {
    cfg.check()?;
    let user = os::resolve(cfg.os_user.as_deref())?;
    let bin = pg::find_bin(cfg.bin_dir.as_deref())?;
    let run_dir = cfg.run_dir();
    os::own_dir(&run_dir, user)?;
    os::own_dir(&cfg.data_dir, user)?;
    let pg = Pg {
        bin,
        user,
        data: cfg.data_dir.clone(),
        run_dir,
        log_file: cfg.log_file.clone(),
    };
    pg.write_passfile(&cfg.credentials)?;
    let shared = Arc::new(Mutex::new(Shared {
        phase: Phase::Starting,
        role: cfg.role,
        primary: cfg.primary.clone(),
        last_rejoin: None,
        rewind_failure: None,
        error: None,
        restore_failure: None,
        operator_contact: None,
        isolation_armed: false,
        stopped_cleanly: false,
        cannot_catch_up: None,
        archive_read_failure: None,
    }));
    let backups = match cfg.backups.store.as_deref() {
        Some(store) => Some(Arc::new(super::backup::Backups::new(
            store,
            cfg.backups.owner.clone(),
            pg.clone(),
            cfg.port,
            cfg.backups.retention_days,
        )?)),
        None => None,
    };
    // What a replica that cannot stream asks before it says it cannot catch up.
    let archive = cfg.backups.store.as_deref().map(|location| {
        crate::backup::Store::open(location)
            .map_err(|e| format!("the backup store cannot be opened: {e}"))
    });
    let (tx, rx) = mpsc::channel(4);
    // The API outlives a shutdown's stop of postgres: it reports that stop (see below).
    let stop_http = CancellationToken::new();
    let server = super::http::serve(
        super::http::Ctx::new(&cfg, pg.run_dir.clone(), shared.clone(), tx, backups),
        stop_http.clone(),
    )
    .await?;
    let mut m = Manager {
        cfg,
        pg,
        shared,
        child: None,
        recovery: None,
        fresh: false,
        isolation: super::isolation::Isolation::default(),
        ticks_not_streaming: 0,
        receiver_pid: None,
        archive,
        archive_failure: None,
        archive_check_failure: None,
    };
    let result = m.supervise(rx, &shutdown).await;
    let clean = m.stop().await;
    if shutdown.is_cancelled() && result.is_ok() && clean {
        m.report_clean_stop().await;
    }
    stop_http.cancel();
    let _ = server.await;
    result
}

/// How long a manager that stopped cleanly on SIGTERM keeps answering for the operator to
/// read it (it leaves as soon as an authenticated poll has).
const CLEAN_STOP_LINGER: Duration = Duration::from_secs(10);

/// The longest wait between two fills of a restore that failed on the way.
const FILL_RETRY_MAX: Duration = Duration::from_secs(60);

/// Checks (one a second) a replica goes without streaming before it makes sure its slot on
/// the primary exists.
const SLOT_REPAIR_AFTER: u32 = 5;

struct Manager {
    cfg: Config,
    pg: Pg,
    shared: Arc<Mutex<Shared>>,
    child: Option<Child>,
    /// The restore settings of the next start (a restore's one start only).
    recovery: Option<Vec<String>>,
    /// The data was just made (initdb, restore): its synchronous setting comes from the pod.
    /// Otherwise the operator sets it live, and a pod's env (fixed at its creation) would
    /// undo a later change at every restart or promotion.
    fresh: bool,
    /// The primary's isolation check (see [`super::isolation`]).
    isolation: super::isolation::Isolation,
    /// Consecutive checks in which this replica did not stream from its primary.
    ticks_not_streaming: u32,
    /// The streaming receiver's process at the last check (see [`super::catchup::Receiver`]).
    receiver_pid: Option<i32>,
    /// The backup store, for a replica that cannot stream (None: no store).
    archive: Option<Result<crate::backup::Store, String>>,
    /// Why the archive could not feed this replica, as last put in `/state`'s `error`.
    archive_failure: Option<String>,
    /// The manager's own last failure to ask the archive (see [`Self::repair_slot`]).
    archive_check_failure: Option<String>,
}

enum Event {
    Shutdown,
    Request(Option<Request>),
    Exited(String),
    Tick,
}

impl Manager {
    async fn supervise(
        &mut self,
        mut rx: mpsc::Receiver<Request>,
        shutdown: &CancellationToken,
    ) -> Result<(), Error> {
        let first = tokio::select! {
            r = self.first_start() => r,
            _ = shutdown.cancelled() => return Ok(()),
        };
        match first {
            Ok(()) => {}
            // A restore that cannot succeed is reported, not retried: the manager stays up
            // without PostgreSQL (and without data) for the operator to read why.
            Err(Error::Restore(why)) => {
                warn!(instance = %self.cfg.name, %why, "restore failed");
                self.stop().await;
                let _ = super::os::clear_for_new_data(&self.pg.data);
                let mut s = self.lock();
                s.phase = Phase::Stopped;
                s.restore_failure = Some(why.clone());
                s.error = Some(format!("restore: {why}"));
            }
            Err(e) => return Err(e),
        }
        let mut tick = tokio::time::interval(super::isolation::CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => Event::Shutdown,
                req = rx.recv() => Event::Request(req),
                status = exited(&mut self.child) => Event::Exited(status),
                _ = tick.tick() => Event::Tick,
            };
            match event {
                Event::Tick => {
                    self.check_isolation().await;
                    self.repair_slot().await;
                }
                Event::Shutdown | Event::Request(None) => return Ok(()),
                Event::Exited(status) => {
                    self.child = None;
                    return Err(Error::PostgresExited(status));
                }
                Event::Request(Some(req)) => {
                    info!(instance = %self.cfg.name, command = ?req.command, "request");
                    let r = self.handle(req.command).await;
                    {
                        let mut s = self.lock();
                        s.error = r.as_ref().err().map(|e| e.to_string());
                        if r.is_err() && self.child.is_none() && s.phase != Phase::Fenced {
                            s.phase = Phase::Stopped;
                        }
                    }
                    if let Err(e) = &r {
                        warn!(instance = %self.cfg.name, error = %e, "request failed");
                    }
                    let _ = req.reply.send(r);
                }
            }
        }
    }

    /// A primary cut off from the operator and from every replica fences itself: on the
    /// other side of the partition a replica may be promoted (issue 32, H6).
    async fn check_isolation(&mut self) {
        let Some(timeout) = self.cfg.isolation_timeout else {
            return;
        };
        let (running_primary, contact) = {
            let s = self.lock();
            (
                s.phase == Phase::Running && s.role == Role::Primary,
                s.operator_contact,
            )
        };
        let streaming = if running_primary {
            tokio::time::timeout(Duration::from_secs(2), async {
                let c = sql::connect_local(&self.pg.run_dir, self.cfg.port).await?;
                sql::streaming_replicas(&c).await
            })
            .await
            .ok()
            .and_then(|r| r.ok())
        } else {
            None
        };
        let now = Instant::now();
        let fence = self
            .isolation
            .observe(running_primary, streaming, contact, now, timeout);
        self.lock().isolation_armed = self.isolation.armed();
        if !fence {
            return;
        }
        let why = format!(
            "isolated: no replica streaming and no poll from the operator for {}s; fenced \
             itself so that a replica promoted elsewhere is the only primary",
            timeout.as_secs()
        );
        warn!(instance = %self.cfg.name, %why, "fencing itself");
        let r = self.handle(Command::Fence).await;
        let mut s = self.lock();
        s.error = Some(match r {
            Ok(()) => why,
            Err(e) => format!("{why}; the fence failed: {e}"),
        });
    }

    /// A replica that has not streamed for [`SLOT_REPAIR_AFTER`] checks makes its slot on
    /// the primary usable again (made if missing: dropped by hand, or lost when `ensure_slot`
    /// at its start failed; replaced if invalidated), and says when the primary no longer
    /// holds the WAL it needs: the walreceiver would fail forever, and the replica stay
    /// unready for good, holding up scaling, switchovers and backups (issue 32, M13).
    async fn repair_slot(&mut self) {
        let primary = {
            let s = self.lock();
            (s.phase == Phase::Running && s.role == Role::Replica)
                .then(|| s.primary.clone())
                .flatten()
        };
        let Some(primary) = primary else {
            self.ticks_not_streaming = 0;
            self.lock().cannot_catch_up = None;
            self.archive_check_failure = None;
            self.show_archive_failure(None);
            return;
        };
        let local = tokio::time::timeout(Duration::from_secs(2), async {
            let c = sql::connect_local(&self.pg.run_dir, self.cfg.port).await?;
            super::catchup::receiver(&c).await
        })
        .await
        .ok()
        .and_then(|r| r.ok());
        let Some(receiver) = local else {
            return;
        };
        let previous = std::mem::replace(&mut self.receiver_pid, receiver.streaming_pid);
        let needed = receiver.needed;
        let report = self.pg.run_dir.join(super::catchup::ARCHIVE_REPORT);
        if receiver.streaming_pid.is_some() && receiver.streaming_pid == previous {
            self.ticks_not_streaming = 0;
            self.lock().cannot_catch_up = None;
            // Streaming: whatever the archive said last no longer holds the replica back.
            let _ = std::fs::remove_file(&report);
            self.archive_check_failure = None;
            self.show_archive_failure(None);
            return;
        }
        self.ticks_not_streaming += 1;
        // The restore_command's report first: it is what PostgreSQL itself met.
        let reported = std::fs::read_to_string(&report)
            .ok()
            .filter(|r| !r.trim().is_empty());
        self.show_archive_failure(reported.or_else(|| self.archive_check_failure.clone()));
        if !self.ticks_not_streaming.is_multiple_of(SLOT_REPAIR_AFTER) {
            return;
        }
        let Ok((host, port)) = host_port(&primary) else {
            return;
        };
        let slot = self.cfg.slot_name();
        let wal = match tokio::time::timeout(
            Duration::from_secs(10),
            super::catchup::repair_slot(&host, port, &self.cfg.credentials, &slot),
        )
        .await
        {
            Ok(Ok(wal)) => wal,
            Ok(Err(e)) => {
                warn!(instance = %self.cfg.name, error = %e, "not streaming, and the replication slot could not be checked");
                return;
            }
            Err(_) => {
                warn!(instance = %self.cfg.name, "not streaming, and checking the replication slot timed out");
                return;
            }
        };
        info!(instance = %self.cfg.name, %primary, slot = ?wal.slot, "not streaming: made sure the replication slot is usable");
        let gone = needed.and_then(|(at, size)| {
            super::catchup::cannot_catch_up(at, size, &wal).map(|why| (why, at, size))
        });
        let verdict = match gone {
            None => {
                self.archive_check_failure = None;
                None
            }
            Some((gone, at, size)) => {
                let primary_timeline = wal
                    .oldest
                    .as_deref()
                    .and_then(crate::backup::wal::Segment::parse)
                    .map_or(1, |s| s.timeline);
                let names = super::catchup::archive_names(
                    at,
                    size,
                    (receiver.timeline.unwrap_or(1), primary_timeline),
                );
                let answer = self.ask_archive(&names).await;
                match &answer {
                    super::catchup::Archive::Holds(name) => {
                        info!(instance = %self.cfg.name, %primary, segment = %name, "not streaming: the primary removed the WAL it needs, catching up from the archive");
                    }
                    super::catchup::Archive::Failed(why) => {
                        warn!(instance = %self.cfg.name, %why, "not streaming, and the archive could not be asked for the WAL it needs");
                    }
                    _ => {}
                }
                self.archive_check_failure = match &answer {
                    super::catchup::Archive::Failed(why) => Some(why.clone()),
                    _ => None,
                };
                super::catchup::verdict(gone, &answer)
            }
        };
        if let Some(why) = &verdict {
            warn!(instance = %self.cfg.name, %primary, %why, "cannot catch up by streaming");
        }
        self.lock().cannot_catch_up = verdict;
    }

    /// Fills the empty data directory from the store's base backup. A fill cut short (the
    /// store's stream broken off or stalled, a store that does not answer, a full disk) is
    /// said in `/state`'s `error`, naming what failed, and tried again with backoff: the
    /// directory stays marked as being filled, so neither this nor a later start ever runs
    /// it half-made. Before, the manager exited on it, and the instance had no `/state` to
    /// say why until its container came back. A restore that cannot succeed as things are
    /// (no backup for the target) is returned: it is reported, not retried.
    async fn fill_from_backup(
        &mut self,
        from: &str,
        target: Option<&crate::backup::catalog::Target>,
    ) -> Result<crate::backup::BackupInfo, Error> {
        let mut delay = Duration::from_secs(1);
        let mut attempt = 1u32;
        loop {
            match super::backup::restore(&self.pg, from, target).await {
                Ok(chosen) => {
                    self.lock().error = None;
                    return Ok(chosen);
                }
                Err(e @ Error::Restore(_)) => return Err(e),
                Err(e) => {
                    let why = format!(
                        "restore: filling the data directory from the base backup failed \
                         (attempt {attempt}): {e}; it is filled again in {} s",
                        delay.as_secs()
                    );
                    warn!(instance = %self.cfg.name, %why, "restore attempt failed");
                    self.lock().error = Some(why);
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2).min(FILL_RETRY_MAX);
                    attempt = attempt.saturating_add(1);
                }
            }
        }
    }

    /// Whether the backup store holds one of `names` (the segment a replica needs).
    async fn ask_archive(&self, names: &[String]) -> super::catchup::Archive {
        use super::catchup::Archive;
        let store = match &self.archive {
            None => return Archive::NoStore,
            Some(Err(why)) => return Archive::Failed(why.clone()),
            Some(Ok(store)) => store,
        };
        let owner = self.cfg.backups.owner.as_ref();
        tokio::time::timeout(
            Duration::from_secs(10),
            super::catchup::ask_archive(store, owner, names),
        )
        .await
        .unwrap_or_else(|_| Archive::Failed("the backup store did not answer in 10 s".into()))
    }

    /// A replica's archive failure goes into `/state`'s `error` (it is unready meanwhile:
    /// not streaming), never over a request's failure; cleared when it passes.
    fn show_archive_failure(&mut self, failure: Option<String>) {
        let mut s = self.lock();
        s.archive_read_failure.clone_from(&failure);
        let ours = s.error.is_none() || s.error == self.archive_failure;
        if ours {
            s.error = failure.clone();
        }
        drop(s);
        if ours {
            self.archive_failure = failure;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        // A poisoned lock only means a panic elsewhere while holding it; the data is plain.
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Learns its role (the record on the volume, else the pod's env), initialises or joins
    /// when there is no data, then starts in that role.
    async fn first_start(&mut self) -> Result<(), Error> {
        let record_path = record::path(&self.pg.data);
        let (role, primary) = match record::resolve(
            record::read(&record_path),
            self.cfg.pod_uid.as_deref(),
            self.cfg.role,
            self.cfg.primary.as_deref(),
        ) {
            StartAs::Known { role, primary } => (role, primary),
            StartAs::Unknown(why) => {
                // Not knowing whether it is the primary, it must not run as one: it waits,
                // stopped, for the operator to make it follow the primary (a demotion).
                warn!(instance = %self.cfg.name, %why, "the role is unknown: postgres stays stopped");
                let mut s = self.lock();
                s.phase = Phase::Stopped;
                s.error = Some(format!("the instance's role is unknown: {why}"));
                return Ok(());
            }
        };
        {
            let mut s = self.lock();
            s.role = role;
            s.primary = primary.clone();
        }
        if role != self.cfg.role {
            info!(instance = %self.cfg.name, ?role, ?primary, "the role recorded on the volume overrides the pod's");
        }
        if !self.pg.has_data() {
            match (role, primary.clone()) {
                (Role::Primary, _) if self.cfg.backups.restore_from.is_some() => {
                    let from = self.cfg.backups.restore_from.clone().unwrap_or_default();
                    let target = self.cfg.backups.target.clone();
                    // Disaster recovery from the cluster's own store: never another
                    // cluster's data brought back under this one's name.
                    if let (Some(me), true) = (
                        &self.cfg.backups.owner,
                        self.cfg.backups.store.as_deref() == Some(from.as_str()),
                    ) {
                        let store = crate::backup::Store::open(&from)?;
                        if let Some(why) = store.refusal(me).await? {
                            return Err(Error::Restore(why));
                        }
                    }
                    let chosen = self.fill_from_backup(&from, target.as_ref()).await?;
                    info!(instance = %self.cfg.name, backup = %chosen.id, ?target, "restoring from the base backup, then the archived WAL");
                    self.recovery =
                        Some(super::pg::recovery_args(&self.cfg, &from, target.as_ref()));
                    self.fresh = true;
                }
                (Role::Primary, _) => {
                    info!(instance = %self.cfg.name, "initdb");
                    self.pg
                        .initdb(&self.cfg.credentials, &self.cfg.initdb)
                        .await?;
                    self.pg.write_parameters(&self.cfg.parameters)?;
                    self.fresh = true;
                }
                (Role::Replica, Some(primary)) => {
                    info!(instance = %self.cfg.name, %primary, "joining with a base backup");
                    let (host, port) = host_port(&primary)?;
                    sql::ensure_slot(&host, port, &self.cfg.credentials, &self.cfg.slot_name())
                        .await?;
                    self.pg
                        .basebackup(&host, port, &self.cfg.slot_name())
                        .await?;
                }
                (Role::Replica, None) => {
                    return Err(Error::Config("a replica needs its primary".into()))
                }
            }
        } else {
            self.pg.write_hba()?;
            // Fenced before a restart of the pod's container: still fenced. Otherwise an old
            // primary fenced for a failover would come back writable with its original role.
            if self.pg.fenced() {
                info!(instance = %self.cfg.name, "fenced: postgres stays stopped until unfenced or demoted");
                self.lock().phase = Phase::Fenced;
                return Ok(());
            }
            // An old primary restarted as a replica (its pod deleted, a failover made
            // another the primary) may hold WAL the new primary never received: it rejoins
            // (rewind, else a fresh clone) before it starts, or it would never stream.
            if let (Role::Replica, Some(primary)) = (role, primary.clone()) {
                if self.pg.was_primary().await? {
                    info!(instance = %self.cfg.name, %primary, "the data was a primary's: rejoining before starting as a replica");
                    let (host, port) = host_port(&primary)?;
                    let how = self.rejoin(&host, port, false).await?;
                    self.lock().last_rejoin = Some(how);
                }
            }
        }
        self.start(role, primary).await
    }

    /// Records the role before (demotion, start) or after (promotion) it takes effect; see
    /// [`record`] for why each.
    fn record(&self, role: Role, primary: Option<String>) -> Result<(), Error> {
        record::write(
            &record::path(&self.pg.data),
            &RoleRecord {
                pod: self.cfg.pod_uid.clone(),
                role,
                primary,
            },
            self.pg.user,
        )
    }

    async fn handle(&mut self, command: Command) -> Result<(), Error> {
        let phase = self.lock().phase;
        match command {
            Command::Promote => {
                match phase {
                    Phase::Running => {}
                    Phase::Fenced => {
                        return Err(Error::Refused(
                            "the instance is fenced: unfence it before promoting".into(),
                        ))
                    }
                    _ => return Err(Error::Refused("the instance is not running".into())),
                }
                let client = sql::connect_local(&self.pg.run_dir, self.cfg.port).await?;
                if sql::observe(&client).await?.in_recovery {
                    sql::promote(&client).await?;
                }
                self.record(Role::Primary, None)?;
                sql::ensure_roles(&client, &self.cfg.credentials, self.cfg.initdb.app.as_ref())
                    .await?;
                let mut s = self.lock();
                s.role = Role::Primary;
                s.primary = None;
                Ok(())
            }
            Command::Demote { primary, reclone } => {
                let (host, port) = host_port(&primary)?;
                if host == self.cfg.pod_ip.to_string() && port == self.cfg.port {
                    return Err(Error::Refused("an instance cannot follow itself".into()));
                }
                self.record(Role::Replica, Some(primary.clone()))?;
                self.stop().await;
                {
                    let mut s = self.lock();
                    s.phase = Phase::Starting;
                    s.cannot_catch_up = None;
                }
                let how = self.rejoin(&host, port, reclone).await?;
                self.lock().last_rejoin = Some(how);
                // Rejoined as a replica: nothing left to fence.
                self.pg.set_fenced(false)?;
                self.start(Role::Replica, Some(primary)).await
            }
            Command::Fence => {
                // The mark first: from here on, no restart brings PostgreSQL back.
                self.pg.set_fenced(true)?;
                self.stop().await;
                self.lock().phase = Phase::Fenced;
                Ok(())
            }
            Command::Unfence => {
                if phase != Phase::Fenced {
                    return Ok(());
                }
                let (role, primary) = {
                    let s = self.lock();
                    (s.role, s.primary.clone())
                };
                self.pg.set_fenced(false)?;
                self.start(role, primary).await
            }
        }
    }

    /// Brings the stopped data onto the primary's timeline: `pg_rewind`, or a fresh base
    /// backup when there is no data, the rewind fails or `reclone` asks for one.
    async fn rejoin(&mut self, host: &str, port: u16, reclone: bool) -> Result<Rejoin, Error> {
        let slot = self.cfg.slot_name();
        if reclone {
            // An invalidated slot would refuse the base backup's WAL stream.
            super::catchup::repair_slot(host, port, &self.cfg.credentials, &slot).await?;
        } else {
            sql::ensure_slot(host, port, &self.cfg.credentials, &slot).await?;
        }
        self.lock().rewind_failure = None;
        if self.pg.has_data() && !reclone {
            match self.pg.rewind(host, port).await {
                Ok(()) => return Ok(Rejoin::Rewind),
                Err(e) => {
                    warn!(instance = %self.cfg.name, error = %e, "pg_rewind failed; cloning the primary afresh");
                    self.lock().rewind_failure = Some(e.to_string());
                }
            }
        }
        self.pg.basebackup(host, port, &slot).await?;
        Ok(Rejoin::Reclone)
    }

    /// Starts `postgres` in `role` and waits until it accepts connections; a primary then
    /// gets its roles and passwords.
    async fn start(&mut self, role: Role, primary: Option<String>) -> Result<(), Error> {
        // A replica without a primary runs read-only with no upstream: with its data it is
        // a failover candidate when no primary runs (issue 32, M12).
        let upstream = match (role, &primary) {
            (Role::Replica, Some(p)) => Some(host_port(p)?),
            (Role::Replica, None) | (Role::Primary, _) => None,
        };
        self.record(role, primary.clone())?;
        self.pg.set_role(role)?;
        if let Some((host, port)) = &upstream {
            // Best effort: a replica restarting while its primary is away still starts, and
            // streams once the primary (and the slot) are back.
            if let Err(e) =
                sql::ensure_slot(host, *port, &self.cfg.credentials, &self.cfg.slot_name()).await
            {
                warn!(instance = %self.cfg.name, error = %e, "could not make the replication slot");
            }
        }
        let mut args = pg::postgres_args(
            &self.cfg,
            &self.pg.run_dir,
            &self.pg.passfile(),
            role,
            upstream.as_ref().map(|(h, p)| (h.as_str(), *p)),
        );
        let recovering = self.recovery.take();
        if let Some(extra) = &recovering {
            args.extend(extra.iter().cloned());
        }
        {
            let mut s = self.lock();
            s.phase = Phase::Starting;
            s.role = role;
            s.primary = if role == Role::Replica { primary } else { None };
        }
        let child = self
            .pg
            .postgres(args)?
            .spawn()
            .map_err(Error::io("starting", self.pg.bin.join("postgres")))?;
        self.child = Some(child);
        let client = match &recovering {
            Some(_) => self.wait_recovered().await?,
            None => self.wait_accepting().await?,
        };
        if role == Role::Primary {
            sql::ensure_roles(&client, &self.cfg.credentials, self.cfg.initdb.app.as_ref()).await?;
            if std::mem::take(&mut self.fresh) {
                sql::set_synchronous(&client, self.cfg.synchronous).await?;
            }
        }
        self.lock().phase = Phase::Running;
        info!(instance = %self.cfg.name, ?role, "postgres is running");
        Ok(())
    }

    /// Polls until the local instance answers a query, the child dies or the start timeout
    /// passes without the recovery advancing (issue 32, H7: a crash recovery of many
    /// gigabytes of WAL restarted from its checkpoint every 300 s, forever). A start given
    /// up stops its postgres, so that the phase never stays Starting with a child left.
    async fn wait_accepting(&mut self) -> Result<tokio_postgres::Client, Error> {
        let window = self.cfg.start_timeout.unwrap_or(START_DEADLINE);
        let mut progress = super::progress::Progress::new(Instant::now(), window);
        loop {
            if let Some(pos) = self
                .child
                .as_ref()
                .and_then(|c| c.id())
                .and_then(super::recovering::position)
            {
                progress.saw(pos, Instant::now());
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(Error::PostgresExited(status.to_string()));
                }
            }
            if let Ok(client) = sql::connect_local(&self.pg.run_dir, self.cfg.port).await {
                if client.simple_query("SELECT 1").await.is_ok() {
                    return Ok(client);
                }
            }
            if progress.expired(Instant::now()) {
                self.stop().await;
                return Err(Error::Timeout(
                    "postgres to accept connections (its recovery stopped advancing)",
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A restore's start: until PostgreSQL has replayed the archive (to the target) and
    /// promoted itself. Its stopping on the way (no WAL to reach the target, a bad
    /// segment) fails the restore.
    async fn wait_recovered(&mut self) -> Result<tokio_postgres::Client, Error> {
        // 20 minutes without the replay advancing (or reaching consistency), not in all.
        let mut progress = super::progress::Progress::new(Instant::now(), START_DEADLINE * 4);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(Error::Restore(format!(
                        "PostgreSQL stopped while replaying the archived WAL ({status}); its log says why"
                    )));
                }
            }
            if let Ok(client) = sql::connect_local(&self.pg.run_dir, self.cfg.port).await {
                let q = "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text";
                if let Ok(row) = client.query_one(q, &[]).await {
                    if !row.get::<_, bool>(0) {
                        return Ok(client);
                    }
                    let replayed: Option<String> = row.get(1);
                    if let Some(lsn) = replayed.as_deref().and_then(super::parse_lsn) {
                        progress.saw(lsn, Instant::now());
                    }
                }
            }
            if progress.expired(Instant::now()) {
                return Err(Error::Restore(
                    "the archived WAL replay stopped advancing for 20 minutes".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Fast shutdown (SIGINT): sessions are ended, WAL is flushed and sent to the replicas.
    /// A fast shutdown (SIGKILL past the deadline). True when no postgres runs afterwards
    /// and none was killed: it exited cleanly, or none was running.
    async fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
        match tokio::time::timeout(STOP_DEADLINE, child.wait()).await {
            Ok(Ok(status)) => status.success(),
            Ok(Err(_)) => false,
            Err(_) => {
                warn!(instance = %self.cfg.name, "postgres did not stop in time; killing it");
                let _ = child.kill().await;
                false
            }
        }
    }

    /// The clean-shutdown record: `/state` says `stoppedCleanly` until an authenticated poll
    /// has read it (or [`CLEAN_STOP_LINGER`] passes). It can only be said after postgres has
    /// exited on this shutdown, and this container never starts it again: a stalled or
    /// partitioned primary cannot say it, and the operator trusts it only for a pod being
    /// deleted (whose containers the kubelet does not restart) — then a graceful deletion of
    /// the primary fails over without the isolation wait.
    async fn report_clean_stop(&mut self) {
        {
            let mut s = self.lock();
            s.phase = Phase::Stopped;
            s.stopped_cleanly = true;
            s.error = Some("shut down: postgres stopped cleanly".into());
        }
        // Polls from now on read the record.
        let since = Instant::now();
        info!(instance = %self.cfg.name, "postgres stopped cleanly; reporting it to the operator");
        while since.elapsed() < CLEAN_STOP_LINGER {
            if self.lock().operator_contact.is_some_and(|t| t > since) {
                // Time for that answer to leave before the API stops.
                tokio::time::sleep(Duration::from_millis(300)).await;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn exited(child: &mut Option<Child>) -> String {
    match child {
        Some(c) => match c.wait().await {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        },
        None => std::future::pending().await,
    }
}
