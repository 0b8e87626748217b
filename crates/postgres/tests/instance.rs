//! The instance manager against real PostgreSQL processes (no Kubernetes): each instance on
//! its own loopback IP (127.<net>.<test>.<n> inside the /16 this test process holds, all on the same ports, as
//! pods would be), run as an
//! unprivileged OS user when the tests run as root.
//!
//! Needs PostgreSQL's programs (Debian's postgresql-15; scripts/setup-postgres.sh installs
//! them). Every wait is for a state, with a generous deadline.
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_postgres::instance::client::InstanceClient;
use bosun_postgres::instance::{
    self, AppDb, Config, Credentials, InitDbOptions, InstanceState, Rejoin, Role, StateRole,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const PG_PORT: u16 = 5432;
const HTTP_PORT: u16 = 8008;
const TOKEN: &str = "test-api-token";
const SUPER_PASSWORD: &str = "super:secret\\pw";
const APP_PASSWORD: &str = "app 'pw'";
const DEADLINE: Duration = Duration::from_secs(120);

/// Instance `n` of test `test`: on this process's own loopback network, never on an address
/// another test binary running at the same time hands to its pods (a fixed 127.21.x.y did:
/// CI saw `AddrInUse` on 127.21.7.2:8008).
fn ip(test: u8, n: u8) -> String {
    let net = bosun_testenv::loopback_network().expect("a loopback network of our own");
    format!("127.{net}.{test}.{n}")
}

struct Node {
    ip: IpAddr,
    stop: CancellationToken,
    task: JoinHandle<Result<(), instance::Error>>,
    /// With the API token.
    api: InstanceClient,
    log: PathBuf,
    /// The manager's outcome once it ended, for failure messages.
    ended: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// What it was started with (its pod UID included), for a container restart.
    cfg: Config,
}

impl Node {
    fn addr(&self) -> String {
        format!("{}:{PG_PORT}", self.ip)
    }

    async fn shutdown(self) {
        self.stop.cancel();
        let r = self.task.await.expect("manager task");
        assert!(r.is_ok(), "manager ended with {r:?}");
    }

    /// Its container restarts: the same pod (UID) and env, on the same data.
    async fn restart_container(self) -> Node {
        let cfg = self.cfg.clone();
        self.shutdown().await;
        run_node(cfg)
    }
}

/// A new pod UID per start: each start in these tests is a new pod on its volume, unless it
/// is a container restart ([`Node::restart_container`]).
fn new_pod_uid() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    format!(
        "pod-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// A directory PostgreSQL's OS user can traverse (tempdir makes 0700 root-owned ones).
fn workdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("pgi")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

fn start(dir: &Path, name: &str, ip: &str, role: Role, primary: Option<String>) -> Node {
    start_with(dir, name, ip, role, primary, 0)
}

fn start_with(
    dir: &Path,
    name: &str,
    ip: &str,
    role: Role,
    primary: Option<String>,
    synchronous: u32,
) -> Node {
    run_node(config(dir, name, ip, role, primary, synchronous))
}

/// A new pod's configuration (its own pod UID).
fn config(
    dir: &Path,
    name: &str,
    ip: &str,
    role: Role,
    primary: Option<String>,
    synchronous: u32,
) -> Config {
    let ip: IpAddr = ip.parse().expect("ip");
    let base = dir.join(name);
    std::fs::create_dir_all(&base).expect("node dir");
    let log = base.join("postgres.log");
    Config {
        name: name.into(),
        data_dir: base.join("data"),
        pod_ip: ip,
        pod_uid: Some(new_pod_uid()),
        port: PG_PORT,
        http_port: HTTP_PORT,
        bin_dir: None,
        run_dir: Some(base.join("run")),
        role,
        primary,
        os_user: None,
        // Small, to keep several instances light; no fsync (no test here crashes the
        // machine, and CI disks are slow and shared).
        parameters: vec![
            ("shared_buffers".into(), "16MB".into()),
            ("max_connections".into(), "30".into()),
            ("fsync".into(), "off".into()),
        ],
        log_file: Some(log.clone()),
        isolation_timeout: None,
        start_timeout: None,
        synchronous,
        backups: Default::default(),
        initdb: InitDbOptions {
            app: Some(AppDb {
                database: "app".into(),
                owner: "app".into(),
            }),
            ..Default::default()
        },
        credentials: Credentials {
            superuser_password: SUPER_PASSWORD.into(),
            replication_password: "repl-secret".into(),
            api_token: TOKEN.into(),
            app_password: Some(APP_PASSWORD.into()),
        },
    }
}

fn run_node(cfg: Config) -> Node {
    let ip = cfg.pod_ip;
    let log = cfg.log_file.clone().expect("a log file");
    let stop = CancellationToken::new();
    let ended = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = ended.clone();
    let token = stop.clone();
    let run_cfg = cfg.clone();
    let task = tokio::spawn(async move {
        let r = instance::run(run_cfg, token).await;
        *slot.lock().expect("lock") = Some(format!("{r:?}"));
        r
    });
    Node {
        ip,
        stop,
        task,
        api: InstanceClient::new(SocketAddr::new(ip, HTTP_PORT), Some(TOKEN.into())),
        log,
        ended,
        cfg,
    }
}

/// Polls `check` until it yields a value; on the deadline, fails with what was last seen and
/// the instance's PostgreSQL log.
async fn wait_for<T, F, Fut>(what: &str, node: &Node, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        let last = match check().await {
            Ok(v) => return v,
            Err(e) => e,
        };
        if node.task.is_finished() || Instant::now() > deadline {
            let log = std::fs::read_to_string(&node.log).unwrap_or_default();
            let ended = node.ended.lock().expect("lock").clone();
            panic!(
                "{what}: last seen {last}; manager ended: {ended:?}\n--- postgres log ---\n{log}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A primary started on `ip`, once it is ready, with its state then.
async fn ready_primary(dir: &Path, name: &str, ip: &str) -> (Node, InstanceState) {
    let node = start(dir, name, ip, Role::Primary, None);
    let s = wait_state(&node, &format!("{name} primary"), |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    (node, s)
}

/// A replica of `primary` started on `ip`, once it streams, with its state then.
async fn ready_replica(dir: &Path, name: &str, ip: &str, primary: &Node) -> (Node, InstanceState) {
    let node = start(dir, name, ip, Role::Replica, Some(primary.addr()));
    let s = wait_state(&node, &format!("{name} streaming"), |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    (node, s)
}

async fn wait_state(
    node: &Node,
    what: &str,
    pred: impl Fn(&InstanceState) -> bool,
) -> InstanceState {
    wait_for(what, node, || async {
        match node.api.state().await {
            Ok(s) if pred(&s) => Ok(s),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}

async fn sql(node: &Node) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    connect_as(node, "postgres", SUPER_PASSWORD, "postgres").await
}

/// As the application database's owner, in it.
async fn app_sql(node: &Node) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    connect_as(node, "app", APP_PASSWORD, "app").await
}

async fn connect_as(
    node: &Node,
    user: &str,
    password: &str,
    db: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::Config::new()
        .host(node.ip.to_string())
        .port(PG_PORT)
        .user(user)
        .password(password)
        .dbname(db)
        .connect_timeout(Duration::from_secs(5))
        .connect(tokio_postgres::NoTls)
        .await?;
    tokio::spawn(conn);
    Ok(client)
}

/// The rows of table `t`, sorted.
async fn rows(node: &Node) -> Result<Vec<String>, String> {
    let c = sql(node).await.map_err(|e| e.to_string())?;
    let rows = c
        .query("SELECT v FROM t ORDER BY v", &[])
        .await
        .map_err(|e| e.to_string())?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

async fn wait_rows(node: &Node, want: &[&str]) {
    wait_for(&format!("rows {want:?} on {}", node.ip), node, || async {
        let got = rows(node).await?;
        if got == want {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await
}

/// A replica (or a fenced instance) refuses writes: never two primaries.
async fn refuses_writes(node: &Node) {
    let c = sql(node).await.expect("connect to the replica");
    let e = c
        .batch_execute("INSERT INTO t VALUES ('not here')")
        .await
        .expect_err("a replica accepted a write");
    assert_eq!(
        e.code(),
        Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION),
        "not refused as read-only: {e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_joins_fails_over_and_the_old_primary_rejoins_by_rewind() {
    let dir = workdir();
    let (a, s) = ready_primary(dir.path(), "pg-1", &ip(1, 1)).await;
    assert_eq!(s.timeline, Some(1));
    sql(&a)
        .await
        .expect("connect to pg-1")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')")
        .await
        .expect("write on pg-1");

    // Join: a base backup through a slot, then streaming.
    let (b, s) = ready_replica(dir.path(), "pg-2", &ip(1, 2), &a).await;
    assert_eq!(s.primary.as_deref(), Some(a.addr().as_str()));
    wait_rows(&b, &["before"]).await;
    refuses_writes(&b).await;
    let slots: Vec<String> = sql(&a)
        .await
        .expect("connect")
        .query(
            "SELECT slot_name::text FROM pg_replication_slots WHERE active",
            &[],
        )
        .await
        .expect("slots")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(slots, ["bosun_pg_2"]);

    // A write the replica never receives (it is stopped meanwhile): the old primary's WAL
    // diverges from the new timeline, so that its rejoin needs a real rewind.
    b.api.fence().await.expect("fence pg-2");
    sql(&a)
        .await
        .expect("connect to pg-1")
        .batch_execute("INSERT INTO t VALUES ('lost')")
        .await
        .expect("write on pg-1 alone");

    // Failover: fence the old primary first, then promote the replica.
    a.api.fence().await.expect("fence pg-1");
    wait_state(&a, "pg-1 fenced", |s| s.role == StateRole::Fenced).await;
    assert!(
        sql(&a).await.is_err(),
        "a fenced instance still accepts connections"
    );
    b.api.unfence().await.expect("unfence pg-2");
    wait_state(&b, "pg-2 back as a replica", |s| {
        s.role == StateRole::Replica
    })
    .await;
    b.api.promote().await.expect("promote pg-2");
    let s = wait_state(&b, "pg-2 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    assert_eq!(s.timeline, Some(2), "{s:?}");
    sql(&b)
        .await
        .expect("connect to pg-2")
        .batch_execute("INSERT INTO t VALUES ('after')")
        .await
        .expect("write on the new primary");

    // The old primary rejoins as a replica of the new one, on the new timeline.
    a.api.demote(&b.addr()).await.expect("demote pg-1");
    let s = wait_state(&a, "pg-1 streaming from pg-2", |s| {
        s.role == StateRole::Replica && s.ready && s.timeline == Some(2)
    })
    .await;
    assert_eq!(s.last_rejoin, Some(Rejoin::Rewind), "{s:?}");
    assert_eq!(s.primary.as_deref(), Some(b.addr().as_str()));
    // The unreplicated write is gone: the old primary now has exactly the new timeline's data.
    wait_rows(&a, &["after", "before"]).await;
    refuses_writes(&a).await;

    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rewind_falls_back_to_a_fresh_clone() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(3, 1)).await;
    sql(&a)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('one')")
        .await
        .expect("write");
    let (b, _) = ready_replica(dir.path(), "pg-2", &ip(3, 2), &a).await;
    wait_rows(&b, &["one"]).await;
    a.api.fence().await.expect("fence");
    b.api.promote().await.expect("promote");
    wait_state(&b, "pg-2 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;

    // A control file pg_rewind cannot read: the rewind fails, the manager clones instead.
    let control = dir.path().join("pg-1/data/global/pg_control");
    std::fs::write(&control, b"broken").expect("break pg_control");
    a.api.demote(&b.addr()).await.expect("demote");
    let s = wait_state(&a, "pg-1 re-cloned", |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    assert_eq!(s.last_rejoin, Some(Rejoin::Reclone));
    assert!(s.rewind_failure.is_some(), "{s:?}");
    wait_rows(&a, &["one"]).await;

    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_token_holder_changes_an_instance() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(2, 1)).await;
    let addr = SocketAddr::new(a.ip, HTTP_PORT);

    let anonymous = InstanceClient::new(addr, None);
    for (what, r) in [
        ("fence", anonymous.fence().await),
        ("promote", anonymous.promote().await),
        (
            "demote",
            anonymous.demote(&format!("{}:5432", ip(2, 9))).await,
        ),
    ] {
        assert_eq!(
            r.expect_err(what).status(),
            Some(401),
            "{what} without a token"
        );
    }
    let impostor = InstanceClient::new(addr, Some("not-the-token".into()));
    for (what, r) in [
        ("fence", impostor.fence().await),
        ("unfence", impostor.unfence().await),
        (
            "demote",
            impostor.demote(&format!("{}:5432", ip(2, 9))).await,
        ),
    ] {
        assert_eq!(
            r.expect_err(what).status(),
            Some(403),
            "{what} with a wrong token"
        );
    }
    // The application database, owned by its role, which logs in with its password.
    let app = app_sql(&a).await.expect("connect as the application owner");
    app.batch_execute("CREATE TABLE mine (id int)")
        .await
        .expect("the owner creates tables in its database");

    // Reading needs no token, and nothing was changed.
    let s = anonymous.state().await.expect("state without a token");
    assert_eq!((s.role, s.ready), (StateRole::Primary, true));
    assert!(sql(&a).await.is_ok());

    // The token holder is heard; a request the state forbids is refused with 409.
    a.api.fence().await.expect("fence with the token");
    let e = a
        .api
        .promote()
        .await
        .expect_err("promote a fenced instance");
    assert_eq!(e.status(), Some(409), "{e}");
    // Fenced survives a restart of the manager (the pod's container): PostgreSQL stays down
    // although the configured role is primary.
    a.shutdown().await;
    let a = start(dir.path(), "pg-1", &ip(2, 1), Role::Primary, None);
    let s = wait_state(&a, "pg-1 fenced after a restart", |s| {
        s.role == StateRole::Fenced
    })
    .await;
    assert!(!s.ready);
    assert!(
        sql(&a).await.is_err(),
        "a fenced instance came back after a restart"
    );
    a.api.unfence().await.expect("unfence");
    wait_state(&a, "pg-1 primary again", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;

    // PostgreSQL and the API listen on the pod IP only.
    for port in [PG_PORT, HTTP_PORT] {
        let other = SocketAddr::new(ip(2, 2).parse().expect("ip"), port);
        assert!(
            tokio::net::TcpStream::connect(other).await.is_err(),
            "something answers on {other}"
        );
    }
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_restart_on_their_own_data() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(4, 1)).await;
    sql(&a)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('one')")
        .await
        .expect("write");
    let (b, _) = ready_replica(dir.path(), "pg-2", &ip(4, 2), &a).await;
    wait_rows(&b, &["one"]).await;

    // The replica's pod goes away and comes back on its volume: no new base backup, it
    // catches up on what was written meanwhile.
    b.shutdown().await;
    sql(&a)
        .await
        .expect("connect")
        .batch_execute("INSERT INTO t VALUES ('two')")
        .await
        .expect("write while pg-2 is away");
    let b = start(dir.path(), "pg-2", &ip(4, 2), Role::Replica, Some(a.addr()));
    let s = wait_state(&b, "pg-2 streaming again", |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    assert_eq!(s.last_rejoin, None, "{s:?}");
    wait_rows(&b, &["one", "two"]).await;

    // The primary restarts on its data: same rows, and the replica streams from it again.
    a.shutdown().await;
    let a = start(dir.path(), "pg-1", &ip(4, 1), Role::Primary, None);
    let s = wait_state(&a, "pg-1 primary again", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    assert_eq!(s.timeline, Some(1));
    assert_eq!(rows(&a).await.expect("rows"), ["one", "two"]);
    sql(&a)
        .await
        .expect("connect")
        .batch_execute("INSERT INTO t VALUES ('three')")
        .await
        .expect("write after the restart");
    wait_rows(&b, &["one", "three", "two"]).await;

    a.shutdown().await;
    b.shutdown().await;
}

/// A manager stopped while initdb runs (a liveness kill on a slow machine, a SIGTERM) leaves
/// a data directory that already has `PG_VERSION`; the next start makes it again instead of
/// running that half-made cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_cut_short_during_initdb_initialises_again() {
    let dir = workdir();
    let data = dir.path().join("pg-1").join("data");
    let a = start(dir.path(), "pg-1", &ip(9, 1), Role::Primary, None);
    let t0 = Instant::now();
    while !data.join("PG_VERSION").exists() {
        assert!(t0.elapsed() < DEADLINE, "initdb never began");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Stopped there, and every program it ran on this data directory killed (as the end of
    // a pod's container kills them all), until none is left: initdb names the directory,
    // the backend it runs works in it.
    a.stop.cancel();
    let _ = a.task.await;
    loop {
        let left = programs_on(&data);
        if left.is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "programs on {data:?} do not die: {left:?}"
        );
        for pid in left {
            // SAFETY: a signal to a process of this test's own.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        data.join("PG_VERSION").exists(),
        "the first start left a data directory behind"
    );

    let (a, s) = ready_primary(dir.path(), "pg-1", &ip(9, 1)).await;
    assert_eq!(s.timeline, Some(1));
    // The cluster is whole: the application database and its owner were made too.
    sql(&a)
        .await
        .expect("connect")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('one')")
        .await
        .expect("write");
    let app = app_sql(&a).await;
    assert!(
        app.is_ok(),
        "the app database after a restart: {:?}",
        app.err()
    );
    a.shutdown().await;
}

/// Processes whose command line names `dir` or that work inside it.
fn programs_on(dir: &Path) -> Vec<i32> {
    let text = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cwd.is_ok_and(|c| c.starts_with(dir))
                || String::from_utf8_lossy(&cmdline).contains(&text)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_replication_waits_for_a_replica() {
    let dir = workdir();
    let a = start_with(dir.path(), "pg-1", &ip(5, 1), Role::Primary, None, 1);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let b = start_with(
        dir.path(),
        "pg-2",
        &ip(5, 2),
        Role::Replica,
        Some(a.addr()),
        1,
    );
    wait_state(&b, "pg-2 streaming", |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    // The replica is a synchronous (quorum) standby of the primary.
    wait_for("pg-2 a quorum standby", &a, || async {
        let c = sql(&a).await.map_err(|e| e.to_string())?;
        let rows = c
            .query(
                "SELECT application_name, sync_state FROM pg_stat_replication",
                &[],
            )
            .await
            .map_err(|e| e.to_string())?;
        let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        if got == [("pg-2".to_string(), "quorum".to_string())] {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    // A commit is acknowledged once the replica has it.
    let c = sql(&a).await.expect("connect");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('safe')")
        .await
        .expect("a synchronous commit");
    let setting: String = c
        .query_one("SHOW synchronous_standby_names", &[])
        .await
        .expect("show")
        .get(0);
    assert_eq!(setting, "ANY 1 (*)");
    wait_rows(&b, &["safe"]).await;

    // The primary lost: the replica, which inherited the primary's synchronous setting with
    // its base backup, is promoted while no standby follows it yet. The promotion's own
    // writes (roles, passwords) must not wait for a standby that only the operator's next
    // step can give it: the promotion returns, and the new primary keeps requiring one for
    // everybody else's commits.
    a.shutdown().await;
    tokio::time::timeout(Duration::from_secs(120), b.api.promote())
        .await
        .expect("the promotion of a synchronous cluster's replica hung")
        .expect("promote pg-2");
    wait_state(&b, "pg-2 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let c = sql(&b).await.expect("connect");
    let setting: String = c
        .query_one("SHOW synchronous_standby_names", &[])
        .await
        .expect("show")
        .get(0);
    assert_eq!(setting, "ANY 1 (*)");
    b.shutdown().await;
}

/// Once a promotion returns, the new primary's control file is on the new timeline. pg_rewind
/// reads the source's timeline there: before the end-of-recovery checkpoint (a spread one,
/// slow with many buffers dirtied by replay) it finds the old timeline, rewinds nothing, and
/// leaves the old primary's diverged WAL in place — which then never streams ("requested
/// timeline 2 is not a child of this server's history"), as the chaos suite found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_returns_with_the_new_timeline_checkpointed() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(6, 1)).await;
    let (b, _) = ready_replica(dir.path(), "pg-2", &ip(6, 2), &a).await;
    // Enough rows that their replay leaves many dirty buffers on the replica.
    sql(&a)
        .await
        .expect("connect to pg-1")
        .batch_execute(
            "CREATE TABLE t (v text); \
             INSERT INTO t SELECT repeat('x', 200) FROM generate_series(1, 20000); \
             INSERT INTO t VALUES ('last')",
        )
        .await
        .expect("write on pg-1");
    wait_for("pg-2 replayed the rows", &b, || async {
        let c = sql(&b).await.map_err(|e| e.to_string())?;
        let n: i64 = c
            .query_one("SELECT count(*) FROM t WHERE v = 'last'", &[])
            .await
            .map_err(|e| e.to_string())?
            .get(0);
        if n == 1 {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    a.api.fence().await.expect("fence pg-1");
    b.api.promote().await.expect("promote pg-2");
    let timeline: i32 = sql(&b)
        .await
        .expect("connect to pg-2")
        .query_one("SELECT timeline_id FROM pg_control_checkpoint()", &[])
        .await
        .expect("pg_control_checkpoint")
        .get(0);
    assert_eq!(timeline, 2, "the promotion returned before its checkpoint");
    a.shutdown().await;
    b.shutdown().await;
}

/// A primary that accepts connections and never answers (a stopped process whose socket
/// still listens) does not hold a replica's start: the replication slot request gives up, the
/// replica runs read-only and unready, and streams once pointed at a live primary. (The slot
/// request had only a TCP connect timeout: the manager waited forever, PostgreSQL never
/// started.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_never_answers_does_not_hold_a_replicas_start() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(7, 1)).await;
    let (b, _) = ready_replica(dir.path(), "pg-2", &ip(7, 2), &a).await;
    b.shutdown().await;

    // A "primary" that takes connections and never says a word.
    let hole = tokio::net::TcpListener::bind((ip(7, 9).as_str(), PG_PORT))
        .await
        .expect("listen");
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = hole.accept().await {
            open.push(conn);
        }
    });
    let b = start(
        dir.path(),
        "pg-2",
        &ip(7, 2),
        Role::Replica,
        Some(format!("{}:{PG_PORT}", ip(7, 9))),
    );
    let s = wait_state(&b, "pg-2 running as a replica", |s| {
        s.role == StateRole::Replica
    })
    .await;
    assert!(!s.ready, "ready without a primary: {s:?}");

    // Pointed at its primary again, it streams and is ready.
    b.shutdown().await;
    held.abort();
    let b = start(dir.path(), "pg-2", &ip(7, 2), Role::Replica, Some(a.addr()));
    wait_state(&b, "pg-2 streaming again", |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    a.shutdown().await;
    b.shutdown().await;
}

/// A replica whose WAL went past the point where its new primary's timeline forked (it
/// received more than the replica that was promoted) reports itself diverged and is never
/// ready — its WAL receiver is refused at every attempt, which PostgreSQL 15 shows as
/// `streaming` for a moment each time, so it used to look ready now and then. The rejoin
/// the operator then asks for rewinds it onto the new timeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverged_replica_is_never_ready_until_rewound() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(8, 1)).await;
    sql(&a)
        .await
        .expect("connect to pg-1")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')")
        .await
        .expect("write on pg-1");
    let replica = |name: &str, ip: &str, primary: String| {
        start(dir.path(), name, ip, Role::Replica, Some(primary))
    };
    let b = replica("pg-2", &ip(8, 2), a.addr());
    let c = replica("pg-3", &ip(8, 3), a.addr());
    for n in [&b, &c] {
        wait_state(n, "streaming", |s| s.role == StateRole::Replica && s.ready).await;
        wait_rows(n, &["before"]).await;
    }
    // pg-3 stops; pg-2 receives one more write; then the primary is gone.
    c.shutdown().await;
    sql(&a)
        .await
        .expect("connect to pg-1")
        .batch_execute("INSERT INTO t VALUES ('not on pg-3')")
        .await
        .expect("write on pg-1");
    wait_rows(&b, &["before", "not on pg-3"]).await;
    b.shutdown().await;
    a.api.fence().await.expect("fence pg-1");
    wait_state(&a, "pg-1 fenced", |s| s.role == StateRole::Fenced).await;

    // pg-3, behind pg-2, is promoted: timeline 2 forks before pg-2's position.
    let c = replica("pg-3", &ip(8, 3), a.addr());
    wait_state(&c, "pg-3 back as a replica", |s| {
        s.role == StateRole::Replica
    })
    .await;
    c.api.promote().await.expect("promote pg-3");
    wait_state(&c, "pg-3 primary on timeline 2", |s| {
        s.role == StateRole::Primary && s.ready && s.timeline == Some(2)
    })
    .await;

    // pg-2 restarted as pg-3's replica (no rewind: it never was a primary).
    let b = replica("pg-2", &ip(8, 2), c.addr());
    let s = wait_state(&b, "pg-2 reporting its divergence", |s| {
        s.role == StateRole::Replica && s.diverged.is_some()
    })
    .await;
    assert!(!s.ready, "a diverged replica reported ready: {s:?}");

    // The operator's answer: rejoin (rewind).
    b.api.demote(&c.addr()).await.expect("demote pg-2");
    let s = wait_state(&b, "pg-2 streaming on timeline 2", |s| {
        s.role == StateRole::Replica && s.ready && s.timeline == Some(2)
    })
    .await;
    assert_eq!(s.diverged, None, "{s:?}");
    assert_eq!(s.last_rejoin, Some(Rejoin::Rewind), "{s:?}");
    wait_rows(&b, &["before"]).await;

    a.shutdown().await;
    b.shutdown().await;
    c.shutdown().await;
}

/// A container restart keeps the pod's env, which names the role the pod was created with. After
/// a switchover the ex-primary (created primary) must come back a replica of the new primary,
/// and the promoted instance (created a replica of the old primary) the primary: never two
/// writable primaries on one timeline (issue 32, H1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_switchover_restarted_containers_keep_their_new_roles() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(10, 1)).await;
    sql(&a)
        .await
        .expect("connect to pg-1")
        .batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('one')")
        .await
        .expect("write on pg-1");
    let (b, _) = ready_replica(dir.path(), "pg-2", &ip(10, 2), &a).await;
    wait_rows(&b, &["one"]).await;

    // The switchover as the operator runs it: fence, promote, demote.
    a.api.fence().await.expect("fence pg-1");
    wait_state(&a, "pg-1 fenced", |s| s.role == StateRole::Fenced).await;
    b.api.promote().await.expect("promote pg-2");
    wait_state(&b, "pg-2 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    a.api.demote(&b.addr()).await.expect("demote pg-1");
    wait_state(&a, "pg-1 streaming from pg-2", |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    sql(&b)
        .await
        .expect("connect to pg-2")
        .batch_execute("INSERT INTO t VALUES ('two')")
        .await
        .expect("write on pg-2");
    wait_rows(&a, &["one", "two"]).await;

    // The ex-primary's container restarts, its env still saying "primary".
    let a = a.restart_container().await;
    let s = wait_state(&a, "pg-1 back", |s| {
        s.role != StateRole::Starting && s.ready
    })
    .await;
    assert_eq!(s.role, StateRole::Replica, "pg-1 came back as {s:?}");
    assert_eq!(s.primary.as_deref(), Some(b.addr().as_str()), "{s:?}");
    refuses_writes(&a).await;

    // The promoted instance's container restarts, its env still naming pg-1 as its primary.
    let b = b.restart_container().await;
    let s = wait_state(&b, "pg-2 back", |s| {
        s.role != StateRole::Starting && s.ready
    })
    .await;
    assert_eq!(s.role, StateRole::Primary, "pg-2 came back as {s:?}");
    sql(&b)
        .await
        .expect("connect to pg-2")
        .batch_execute("INSERT INTO t VALUES ('three')")
        .await
        .expect("write on pg-2 after its restart");
    wait_rows(&a, &["one", "three", "two"]).await;
    refuses_writes(&a).await;

    a.shutdown().await;
    b.shutdown().await;
}

/// Issue 32, H4: `/state` answers while the backup store hangs (here a record that never
/// reads: a FIFO without a writer, as a hung NFS mount would block), within the 3 s the
/// operator gives a poll. A poll that waited on the store made a healthy primary "lost".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_answers_while_the_backup_store_hangs() {
    let dir = workdir();
    let store = dir.path().join("store");
    let hung = store.join("base").join("20260101T000000.000Z");
    std::fs::create_dir_all(&hung).expect("store dirs");
    let fifo = hung.join("bosun-backup.json");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("path");
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    // Whatever the outcome, the hung reader is let go at the end (a blocked read would hold
    // the runtime's shutdown), and the FIFO removed so that no later listing blocks again.
    struct Release(PathBuf);
    impl Drop for Release {
        fn drop(&mut self) {
            let fifo = self.0.clone();
            std::thread::spawn(move || {
                let _ = std::fs::write(&fifo, b"{}");
                let _ = std::fs::remove_file(&fifo);
            });
        }
    }
    let _release = Release(fifo.clone());
    let mut cfg = config(dir.path(), "pg-1", &ip(11, 1), Role::Primary, None, 0);
    cfg.backups.store = Some(store.to_str().expect("utf-8").into());
    let a = run_node(cfg);
    wait_for("pg-1 primary", &a, || async {
        match tokio::time::timeout(Duration::from_secs(3), a.api.state()).await {
            Ok(Ok(s)) if s.role == StateRole::Primary && s.ready => Ok(()),
            Ok(Ok(s)) => Err(format!("{s:?}")),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("/state took over 3 s".into()),
        }
    })
    .await;
    for _ in 0..5 {
        let s = tokio::time::timeout(Duration::from_secs(3), a.api.state())
            .await
            .expect("/state answered within 3 s")
            .expect("state");
        assert_eq!(s.role, StateRole::Primary);
        let b = s.backup.expect("the store's state");
        assert!(
            b.listing_pending,
            "the hung listing reported as done: {b:?}"
        );
    }
    drop(_release);
    a.shutdown().await;
}

/// Issue 32, H9: a restore to the end of the archive meets a segment the store holds but
/// cannot give (a directory where the file should be: an I/O error). PostgreSQL must stop the
/// recovery, and the instance report the restore as failed; before, `restore-wal` said "not in
/// the archive" and PostgreSQL promoted there, without the rows after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_error_during_a_restore_stops_it_instead_of_promoting_early() {
    let bosun = bosun_testenv::procmode::built_bosun()
        .expect("the bosun binary: run `cargo build -p bosun` first");
    let dir = workdir();
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).expect("store");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let mut cfg = config(dir.path(), "pg-1", &ip(12, 1), Role::Primary, None, 0);
    cfg.backups.store = Some(store.to_str().expect("utf-8").into());
    cfg.backups.program = Some(bosun.clone());
    let a = run_node(cfg);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let c = sql(&a).await.expect("connect");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('before')")
        .await
        .expect("write");
    a.api.backup().await.expect("start a base backup");
    wait_state(&a, "a base backup in the store", |s| {
        s.backup
            .as_ref()
            .is_some_and(|b| b.backups >= 1 && !b.running)
    })
    .await;
    // Two segments after the backup, each with a row, both archived.
    let mut segments = Vec::new();
    for row in ["after-1", "after-2"] {
        c.execute("INSERT INTO t VALUES ($1)", &[&row])
            .await
            .expect("write");
        let seg: String = c
            .query_one("SELECT pg_walfile_name(pg_switch_wal())", &[])
            .await
            .expect("switch")
            .get(0);
        segments.push(seg);
    }
    let last = store.join("wals").join(&segments[1]);
    wait_for("the last segment archived", &a, || async {
        if last.is_file() {
            Ok(())
        } else {
            Err(format!("{} not archived yet", last.display()))
        }
    })
    .await;
    a.shutdown().await;

    let broken = store.join("wals").join(&segments[0]);
    std::fs::remove_file(&broken).expect("remove the segment");
    std::fs::create_dir(&broken).expect("a directory in its place");
    let mut cfg = config(dir.path(), "pg-2", &ip(12, 2), Role::Primary, None, 0);
    cfg.backups.restore_from = Some(store.to_str().expect("utf-8").into());
    cfg.backups.program = Some(bosun);
    let b = run_node(cfg);
    let s = wait_state(&b, "pg-2's restore ends", |s| {
        s.restore_failure.is_some() || (s.role == StateRole::Primary && s.ready)
    })
    .await;
    assert!(
        s.restore_failure.is_some() && s.role != StateRole::Primary,
        "the restore promoted on an incomplete archive: {s:?}, rows {:?}",
        rows(&b).await
    );
    let log = std::fs::read_to_string(&b.log).unwrap_or_default();
    assert!(log.contains("restore-wal"), "{log}");
    b.shutdown().await;
}

/// Issue 32, H6: a primary cut off from every replica and from the operator (no poll carrying
/// the API token) fences itself once the isolation timeout passes — on the far side of a
/// partition, or under a pod force-deleted while postgres runs, a replica may be promoted.
/// Anonymous reads of its state are not the operator's and do not keep it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_cut_off_from_its_replicas_and_the_operator_fences_itself() {
    let dir = workdir();
    let mut cfg = config(dir.path(), "pg-1", &ip(13, 1), Role::Primary, None, 0);
    cfg.isolation_timeout = Some(Duration::from_secs(3));
    let a = run_node(cfg);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let (b, _) = ready_replica(dir.path(), "pg-2", &ip(13, 2), &a).await;
    wait_state(&a, "pg-1 armed by its streaming replica", |s| {
        s.isolation_armed
    })
    .await;
    // The primary has seen its replica stream: the check is armed. Then the replica goes.
    b.stop.cancel();
    let _ = b.task.await;
    let anonymous = InstanceClient::new(SocketAddr::new(a.ip, HTTP_PORT), None);
    let s = wait_for("pg-1 fenced by its isolation check", &a, || async {
        match anonymous.state().await {
            Ok(s) if s.role == StateRole::Fenced => Ok(s),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let why = s.error.unwrap_or_default();
    assert!(why.contains("isolated"), "{why}");
    assert!(
        sql(&a).await.is_err(),
        "the isolated primary still accepts connections"
    );
}

/// Issue 32, H7: a crash recovery longer than the start timeout, but advancing all along, is
/// never cut short (the timeout counts from the last segment replayed, not from the start),
/// and the primary comes back with every committed row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_recovery_that_keeps_replaying_outlasts_the_start_timeout() {
    let dir = workdir();
    let mut cfg = config(dir.path(), "pg-1", &ip(14, 1), Role::Primary, None, 0);
    // No checkpoint while the WAL is written: the crash recovery replays all of it.
    cfg.parameters.extend([
        ("max_wal_size".into(), "8GB".into()),
        ("checkpoint_timeout".into(), "1h".into()),
    ]);
    cfg.start_timeout = Some(Duration::from_secs(1));
    let a = run_node(cfg.clone());
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let c = sql(&a).await.expect("connect");
    c.batch_execute(
        "CREATE TABLE big (v text); \
         INSERT INTO big SELECT repeat('x', 200) FROM generate_series(1, 2500000)",
    )
    .await
    .expect("write");
    drop(c);
    let data = a.cfg.data_dir.clone();
    let pid: i32 = std::fs::read_to_string(data.join("postmaster.pid"))
        .expect("postmaster.pid")
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("the postmaster's pid");
    // SAFETY: a signal to a process of this test's own.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = a.task.await;
    while !programs_on(&data).is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its container restarts (the same pod): crash recovery, far longer than 1 s.
    let b = run_node(cfg);
    wait_state(&b, "pg-1 back after its crash recovery", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let n: i64 = sql(&b)
        .await
        .expect("connect")
        .query_one("SELECT count(*) FROM big", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 2_500_000);
    let log = std::fs::read_to_string(&b.log).unwrap_or_default();
    assert!(
        log.contains("database system was interrupted") || log.contains("not properly shut down"),
        "no crash recovery happened:\n{log}"
    );
}

/// Issue 32, M5: the operator's own sessions (synchronous setting, slot drops) carry a
/// statement and a lock timeout: a primary that stalls inside a statement never holds a
/// reconcile — and with it a failover — indefinitely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_sessions_have_statement_and_lock_timeouts() {
    let dir = workdir();
    let (a, _) = ready_primary(dir.path(), "pg-1", &ip(15, 1)).await;
    let c = instance::connect_remote(&a.ip.to_string(), PG_PORT, "postgres", SUPER_PASSWORD)
        .await
        .expect("connect");
    for (setting, want) in [("statement_timeout", "15s"), ("lock_timeout", "5s")] {
        let got: String = c
            .query_one(&format!("SHOW {setting}"), &[])
            .await
            .expect("show")
            .get(0);
        assert_eq!(got, want, "{setting}");
    }
    let e = c
        .batch_execute("SELECT pg_sleep(30)")
        .await
        .expect_err("a 30 s statement ran to its end");
    assert_eq!(
        e.code(),
        Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
        "{e:?}"
    );
}

/// What a replica whose WAL the primary removed can still read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Archive {
    /// The cluster archives to a volume store, which holds every segment.
    Holds,
    /// No backup store.
    None,
}

/// A replica fenced while its primary writes on: `max_slot_wal_keep_size` invalidates its
/// slot and checkpoints remove the WAL it needs from the primary's `pg_wal`. Returns the
/// primary, the (fenced) replica, the rows written and a marker file in the replica's
/// PGDATA (a re-clone replaces the directory, and the marker with it).
async fn replica_whose_wal_is_gone(
    dir: &Path,
    test: u8,
    archive: Archive,
) -> (Node, Node, Vec<String>, PathBuf) {
    let bosun = bosun_testenv::procmode::built_bosun()
        .expect("the bosun binary: run `cargo build -p bosun` first");
    let store = dir.join("store");
    std::fs::create_dir_all(&store).expect("store");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    let with = |mut cfg: Config| {
        // No WAL kept for a replica beyond its slot's 32 MB: the slot is what keeps it.
        cfg.parameters.extend([
            ("wal_keep_size".into(), "0".into()),
            ("max_slot_wal_keep_size".into(), "32MB".into()),
        ]);
        if archive == Archive::Holds {
            cfg.backups.store = Some(store.to_str().expect("utf-8").into());
            cfg.backups.program = Some(bosun.clone());
            cfg.backups.owner = Some(bosun_postgres::backup::owner::Owner {
                uid: "uid-of-this-cluster".into(),
                cluster: "pg".into(),
                claim: bosun_postgres::backup::owner::Claim::Empty,
            });
        }
        cfg
    };
    let a = run_node(with(config(
        dir,
        "pg-1",
        &ip(test, 1),
        Role::Primary,
        None,
        0,
    )));
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let c = sql(&a).await.expect("connect");
    c.batch_execute("CREATE TABLE t (v text); INSERT INTO t VALUES ('r000')")
        .await
        .expect("write");
    let b = run_node(with(config(
        dir,
        "pg-2",
        &ip(test, 2),
        Role::Replica,
        Some(a.addr()),
        0,
    )));
    wait_state(&b, "pg-2 streaming", |s| {
        s.role == StateRole::Replica && s.ready
    })
    .await;
    wait_rows(&b, &["r000"]).await;
    let marker = b.cfg.data_dir.join("bosun-test-marker");
    std::fs::write(&marker, b"the replica's own data directory").expect("marker");
    b.api.fence().await.expect("fence the replica");
    wait_state(&b, "pg-2 fenced", |s| s.role == StateRole::Fenced).await;

    // Segments written and switched until the replica's slot is lost and the segment it
    // stopped in is gone from the primary: the primary's own segment now, which is at or
    // past the replica's, and every older one.
    let needed: String = c
        .query_one("SELECT pg_walfile_name(pg_current_wal_lsn())", &[])
        .await
        .expect("the replica's segment")
        .get(0);
    let mut want = vec!["r000".to_string()];
    for i in 1..200 {
        let row = format!("r{i:03}");
        c.execute("INSERT INTO t VALUES ($1)", &[&row])
            .await
            .expect("write");
        want.push(row);
        c.batch_execute("SELECT pg_switch_wal(); CHECKPOINT")
            .await
            .expect("switch and checkpoint");
        let gone: bool = c
            .query_one(
                "SELECT NOT EXISTS (SELECT 1 FROM pg_ls_waldir() \
                   WHERE name ~ '^[0-9A-F]{24}$' AND name <= $1) \
                 AND (SELECT wal_status FROM pg_replication_slots \
                      WHERE slot_name = 'bosun_pg_2') = 'lost'",
                &[&needed],
            )
            .await
            .expect("the primary's WAL")
            .get(0);
        if gone {
            break;
        }
    }
    let status: Option<String> = c
        .query_one(
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'bosun_pg_2'",
            &[],
        )
        .await
        .expect("slot")
        .get(0);
    assert_eq!(
        status.as_deref(),
        Some("lost"),
        "the replica's slot was not invalidated"
    );
    if archive == Archive::Holds {
        let archived = store.join("wals").join(&needed);
        wait_for("the replica's segment archived", &a, || async {
            if archived.is_file() {
                Ok(())
            } else {
                Err(format!("{} not archived", archived.display()))
            }
        })
        .await;
    }
    (a, b, want, marker)
}

/// Issue 32, M13 with a backup store: a replica whose WAL is gone from its primary but is
/// in the archive catches up from the archive and streams again, on its own data (no
/// re-clone: the marker in its PGDATA survives), with every row. Before, replicas had no
/// `restore_command`: it reported `cannotCatchUp` and the operator re-cloned it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_wal_is_gone_catches_up_from_the_archive_without_a_reclone() {
    let dir = workdir();
    let (a, b, want, marker) = replica_whose_wal_is_gone(dir.path(), 16, Archive::Holds).await;
    b.api.unfence().await.expect("unfence the replica");
    let want_refs: Vec<&str> = want.iter().map(String::as_str).collect();
    wait_for("pg-2 streaming again with every row", &b, || async {
        let s = b.api.state().await.map_err(|e| e.to_string())?;
        // A verdict is what makes the operator re-clone: never while the archive holds it.
        assert!(
            s.cannot_catch_up.is_none(),
            "the archive holds the WAL, yet: {s:?}"
        );
        if !(s.role == StateRole::Replica && s.ready) {
            return Err(format!("{s:?}"));
        }
        let got = rows(&b).await?;
        if got == want_refs {
            Ok(())
        } else {
            Err(format!("{} rows of {}", got.len(), want.len()))
        }
    })
    .await;
    let s = b.api.state().await.expect("state");
    assert_eq!(s.last_rejoin, None, "rejoined: {s:?}");
    assert!(marker.is_file(), "its data directory was replaced");
    let log = std::fs::read_to_string(&b.log).unwrap_or_default();
    assert!(
        log.contains("restored log file"),
        "nothing was read from the archive:\n{log}"
    );
    // And it streams: a new row arrives without the archive (no segment switch).
    sql(&a)
        .await
        .expect("connect")
        .batch_execute("INSERT INTO t VALUES ('streamed')")
        .await
        .expect("write");
    let mut with_new = want_refs.clone();
    with_new.push("streamed");
    wait_rows(&b, &with_new).await;
    b.shutdown().await;
    a.shutdown().await;
}

/// Without a backup store the replica still says it cannot catch up (so the operator
/// re-clones it), and the re-clone brings every row back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_store_a_replica_whose_wal_is_gone_says_so_and_is_recloned() {
    let dir = workdir();
    let (a, b, want, marker) = replica_whose_wal_is_gone(dir.path(), 17, Archive::None).await;
    b.api.unfence().await.expect("unfence the replica");
    let s = wait_state(&b, "pg-2 reports it cannot catch up", |s| {
        s.cannot_catch_up.is_some()
    })
    .await;
    assert!(!s.ready, "{s:?}");
    let why = s.cannot_catch_up.unwrap_or_default();
    assert!(why.contains("no longer on its primary"), "{why}");
    b.api.reclone(&a.addr()).await.expect("re-clone");
    wait_state(&b, "pg-2 streaming after its re-clone", |s| {
        s.role == StateRole::Replica && s.ready && s.last_rejoin == Some(Rejoin::Reclone)
    })
    .await;
    let want_refs: Vec<&str> = want.iter().map(String::as_str).collect();
    wait_rows(&b, &want_refs).await;
    assert!(!marker.exists(), "the re-clone kept the old data directory");
    b.shutdown().await;
    a.shutdown().await;
}

/// Issue 32, M13 follow-up: a replica whose WAL is gone from its primary and whose store
/// fails to give it (the archive's directory replaced by a file: every read an I/O error,
/// ENOTDIR, even for root) says so in `/state`'s `archiveReadFailure` (what the operator
/// puts in its `ArchiveReadable` condition), keeps its own data and PostgreSQL running (no
/// verdict that would re-clone it); once the store answers again it catches up, streams,
/// and the failure is cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_archive_reads_fail_says_so_until_the_store_answers() {
    let dir = workdir();
    let (a, b, want, marker) = replica_whose_wal_is_gone(dir.path(), 19, Archive::Holds).await;
    // The whole archive, not the segments listed now: the primary's archiver may still be
    // adding the ones the replica needs.
    let wals = dir.path().join("store").join("wals");
    let away = dir.path().join("store").join("wals.away");
    std::fs::rename(&wals, &away).expect("move the archive away");
    std::fs::write(&wals, b"not a directory").expect("a file in its place");
    b.api.unfence().await.expect("unfence the replica");
    let s = wait_state(&b, "pg-2 reports its failing archive reads", |s| {
        s.archive_read_failure.is_some()
    })
    .await;
    let why = s.archive_read_failure.clone().unwrap_or_default();
    assert!(why.contains("backup store"), "{why}");
    // Still a running standby (a replica's restore_command never stops it), on its data.
    assert_eq!(s.role, StateRole::Replica, "{s:?}");
    assert_eq!(
        s.cannot_catch_up, None,
        "a store error read as a verdict: {s:?}"
    );
    assert!(marker.is_file(), "its data directory was replaced");
    std::fs::remove_file(&wals).expect("the file removed");
    std::fs::rename(&away, &wals).expect("the archive back");
    let want_refs: Vec<&str> = want.iter().map(String::as_str).collect();
    wait_for(
        "pg-2 streaming again with every row, its failure cleared",
        &b,
        || async {
            let s = b.api.state().await.map_err(|e| e.to_string())?;
            if !(s.role == StateRole::Replica && s.ready && s.archive_read_failure.is_none()) {
                return Err(format!("{s:?}"));
            }
            let got = rows(&b).await?;
            if got == want_refs {
                Ok(())
            } else {
                Err(format!("{} rows of {}", got.len(), want.len()))
            }
        },
    )
    .await;
    let s = b.api.state().await.expect("state");
    assert_eq!(s.last_rejoin, None, "rejoined: {s:?}");
    assert!(marker.is_file(), "its data directory was replaced");
    b.shutdown().await;
    a.shutdown().await;
}

/// A program of PostgreSQL's, from PATH or Debian's directory.
fn pg_program(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| Path::new("/usr/lib/postgresql/15/bin").join(name))
}

/// A base backup's WAL stream is not a replica: a primary with no replica must not arm its
/// isolation check on one (CI saw a primary fence itself 3 s after a replica's clone ended,
/// before the replica streamed, and a single primary backed up would fence itself whenever
/// the operator's polls paused). Here a throttled `pg_basebackup -X stream` holds its
/// walsender open, `streaming` in `pg_stat_replication`, across several isolation checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_backups_wal_stream_does_not_arm_the_isolation_check() {
    let dir = workdir();
    let mut cfg = config(dir.path(), "pg-1", &ip(18, 1), Role::Primary, None, 0);
    cfg.isolation_timeout = Some(Duration::from_secs(1));
    let a = run_node(cfg);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let dest = dir.path().join("copy");
    let mut backup = tokio::process::Command::new(pg_program("pg_basebackup"))
        .arg("-D")
        .arg(&dest)
        .args(["-h", &a.ip.to_string(), "-p", &PG_PORT.to_string()])
        .args(["-U", instance::REPLICATION_USER, "--no-password"])
        // The slowest rate it takes: the copy lasts minutes, its WAL stream all along.
        .args(["-X", "stream", "-c", "fast", "-r", "32k"])
        .env("PGPASSWORD", "repl-secret")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start pg_basebackup");
    let c = sql(&a).await.expect("connect");
    let streaming_backup = "SELECT count(*) FROM pg_stat_replication \
                            WHERE state = 'streaming' AND application_name = 'pg_basebackup'";
    let since = wait_for("the base backup's WAL streaming", &a, || async {
        let n: i64 = c
            .query_one(streaming_backup, &[])
            .await
            .map_err(|e| e.to_string())?
            .get(0);
        if n > 0 {
            Ok(Instant::now())
        } else {
            Err(format!("{n} walsender(s) of pg_basebackup streaming"))
        }
    })
    .await;
    // Three isolation checks while it streams: the check would have armed on any of them.
    let checks = instance::ISOLATION_CHECK_EVERY * 3;
    while since.elapsed() < checks {
        let s = a.api.state().await.expect("state");
        assert!(
            !s.isolation_armed && s.role == StateRole::Primary,
            "a base backup's WAL stream armed the isolation check: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let still: i64 = c
        .query_one(streaming_backup, &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(
        still, 1,
        "the backup ended before the checks it was meant to span"
    );
    let _ = backup.start_kill();
    let _ = backup.wait().await;
    a.shutdown().await;
}
