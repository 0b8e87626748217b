//! Issue 32, H10: a restore from S3 whose base backup's GET body is cut on a real connection,
//! or stalls, fails loudly and is filled again; with the connection healed it completes with
//! every row. A TCP proxy between the instance managers and moto (`bash
//! scripts/setup-moto.sh`) cuts or stalls only the response to `GET …/base.tar.gz`.
//!
//! Needs the built `bosun` binary for PostgreSQL's archive and restore commands
//! (`cargo build -p bosun`).
#![cfg(feature = "s3")]

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bosun_postgres::instance::client::InstanceClient;
use bosun_postgres::instance::{
    self, Config, Credentials, InitDbOptions, InstanceState, Role, StateRole,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod common;
use common::moto::{Moto, ACCESS_KEY, BUCKET, SECRET_KEY};

const PG_PORT: u16 = 5432;
const HTTP_PORT: u16 = 8008;
const TOKEN: &str = "test-api-token";
const SUPER_PASSWORD: &str = "super-secret";
const DEADLINE: Duration = Duration::from_secs(300);
/// Rows enough for a compressed base backup of several MiB: cut well inside it.
const ROWS: i64 = 200_000;
/// Bytes of the base backup's response let through before a cut or a stall.
const LET_THROUGH: usize = 256 << 10;
/// The S3 client's bound on a body that sends nothing (300 s unless configured).
const STALL_TIMEOUT_SECS: &str = "3";

/// What the proxy does to the response of a `GET` of a base backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Pass,
    /// Closes the connection after [`LET_THROUGH`] bytes.
    Cut,
    /// Stops sending after [`LET_THROUGH`] bytes, the connection left open.
    Stall,
}

struct Proxy {
    endpoint: String,
    mode: Arc<Mutex<Mode>>,
    /// Base backup responses cut or stalled.
    broken: Arc<AtomicUsize>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let mode = Arc::new(Mutex::new(Mode::Pass));
        let broken = Arc::new(AtomicUsize::new(0));
        let (m, b) = (mode.clone(), broken.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, m.clone(), b.clone()));
            }
        });
        Proxy {
            endpoint,
            mode,
            broken,
        }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().expect("lock") = mode;
    }

    fn broken(&self) -> usize {
        self.broken.load(Ordering::SeqCst)
    }
}

/// One connection. A request for a base backup marks it; the response bytes after the mark
/// are counted, and the mode in force then decides their fate.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    mode: Arc<Mutex<Mode>>,
    broken: Arc<AtomicUsize>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let marked = Arc::new(AtomicBool::new(false));
    let mark = marked.clone();
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let text = String::from_utf8_lossy(&buf[..n]);
            if text
                .lines()
                .any(|l| l.starts_with("GET ") && l.contains("base.tar.gz"))
            {
                mark.store(true, Ordering::SeqCst);
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 16 << 10];
    let mut sent_after_mark = 0usize;
    loop {
        let n = match sr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let m = *mode.lock().expect("lock");
        if marked.load(Ordering::SeqCst) && m != Mode::Pass {
            let room = LET_THROUGH.saturating_sub(sent_after_mark).min(n);
            if cw.write_all(&buf[..room]).await.is_err() {
                break;
            }
            sent_after_mark += room;
            if sent_after_mark >= LET_THROUGH {
                broken.fetch_add(1, Ordering::SeqCst);
                if m == Mode::Stall {
                    // Nothing more, the connection open, until the client gives up on it.
                    while !up.is_finished() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                break;
            }
            continue;
        }
        if marked.load(Ordering::SeqCst) {
            sent_after_mark += n;
        }
        if cw.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    up.abort();
}

struct Node {
    ip: IpAddr,
    stop: CancellationToken,
    task: JoinHandle<Result<(), instance::Error>>,
    api: InstanceClient,
    log: PathBuf,
    data: PathBuf,
}

impl Node {
    async fn shutdown(self) {
        self.stop.cancel();
        let r = self.task.await.expect("manager task");
        assert!(r.is_ok(), "manager ended with {r:?}");
    }
}

fn workdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("pgc")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

fn ip(n: u8) -> String {
    let net = bosun_testenv::loopback_network().expect("a loopback network of our own");
    format!("127.{net}.33.{n}")
}

fn config(dir: &Path, name: &str, ip: &str, bosun: &Path) -> Config {
    let base = dir.join(name);
    std::fs::create_dir_all(&base).expect("node dir");
    Config {
        name: name.into(),
        data_dir: base.join("data"),
        pod_ip: ip.parse().expect("ip"),
        pod_uid: Some(format!("pod-{name}")),
        port: PG_PORT,
        http_port: HTTP_PORT,
        bin_dir: None,
        run_dir: Some(base.join("run")),
        role: Role::Primary,
        primary: None,
        os_user: None,
        parameters: vec![
            ("shared_buffers".into(), "16MB".into()),
            ("max_connections".into(), "30".into()),
            ("fsync".into(), "off".into()),
        ],
        log_file: Some(base.join("postgres.log")),
        isolation_timeout: None,
        start_timeout: None,
        synchronous: 0,
        backups: instance::BackupOptions {
            program: Some(bosun.to_path_buf()),
            ..Default::default()
        },
        initdb: InitDbOptions::default(),
        credentials: Credentials {
            superuser_password: SUPER_PASSWORD.into(),
            replication_password: "repl-secret".into(),
            api_token: TOKEN.into(),
            app_password: None,
        },
    }
}

fn run_node(cfg: Config) -> Node {
    let ip = cfg.pod_ip;
    let log = cfg.log_file.clone().expect("a log file");
    let data = cfg.data_dir.clone();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(instance::run(cfg, token));
    Node {
        ip,
        stop,
        task,
        api: InstanceClient::new(SocketAddr::new(ip, HTTP_PORT), Some(TOKEN.into())),
        log,
        data,
    }
}

/// Waits for `/state` to satisfy `pred`; fails with the last state (or why the manager
/// ended) and the PostgreSQL log.
async fn wait_state(
    node: &Node,
    what: &str,
    pred: impl Fn(&InstanceState) -> bool,
) -> InstanceState {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let last = match node.api.state().await {
            Ok(s) if pred(&s) => return s,
            Ok(s) => format!("{s:?}"),
            Err(e) => e.to_string(),
        };
        if node.task.is_finished() || Instant::now() > deadline {
            let log = std::fs::read_to_string(&node.log).unwrap_or_default();
            panic!(
                "{what}: last seen {last}; manager finished: {}\n--- postgres log ---\n{log}",
                node.task.is_finished()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sql(node: &Node) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::Config::new()
        .host(node.ip.to_string())
        .port(PG_PORT)
        .user("postgres")
        .password(SUPER_PASSWORD)
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(5))
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

/// The table's row count and a checksum over every row.
async fn fingerprint(node: &Node) -> String {
    sql(node)
        .await
        .query_one(
            "SELECT count(*)::text || ' rows, sum ' || sum(hashtext(id::text || v)::bigint)::text FROM t",
            &[],
        )
        .await
        .expect("fingerprint")
        .get(0)
}

fn filling_mark(data: &Path) -> PathBuf {
    let mut name = data.file_name().expect("a name").to_os_string();
    name.push(".bosun-filling");
    data.with_file_name(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_whose_stream_is_cut_or_stalls_says_so_and_completes_once_healed() {
    let bosun = bosun_testenv::procmode::built_bosun()
        .expect("the bosun binary: run `cargo build -p bosun` first");
    let moto = Moto::start().await;
    let proxy = Proxy::start(moto.addr).await;
    // The managers here, and PostgreSQL's archive and restore commands (which inherit this
    // environment), all reach the store through the proxy, as a pod's env would point them.
    std::env::set_var("BOSUN_PG_S3_ENDPOINT", &proxy.endpoint);
    std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    std::env::set_var("BOSUN_PG_S3_TIMEOUT_SECS", STALL_TIMEOUT_SECS);
    bosun_postgres::backup::s3::S3Store::from_location(&format!("s3://{BUCKET}/"))
        .expect("client")
        .create_bucket()
        .await
        .expect("bucket");
    let location = format!("s3://{BUCKET}/cut-restore/pg");
    let dir = workdir();

    let mut cfg = config(dir.path(), "pg-1", &ip(1), &bosun);
    cfg.backups.store = Some(location.clone());
    let a = run_node(cfg);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    sql(&a)
        .await
        .batch_execute(&format!(
            "CREATE TABLE t (id int, v text); \
             INSERT INTO t SELECT i, md5(i::text) || md5((i * 7)::text) \
             FROM generate_series(1, {ROWS}) i"
        ))
        .await
        .expect("load");
    let want = fingerprint(&a).await;
    a.api.backup().await.expect("start a base backup");
    let s = wait_state(&a, "the base backup ends", |s| {
        s.backup
            .as_ref()
            .is_some_and(|b| !b.running && (b.backups >= 1 || b.last_failed.is_some()))
    })
    .await;
    assert!(
        s.backup.as_ref().is_some_and(|b| b.backups >= 1),
        "the backup failed: {s:?}"
    );
    a.shutdown().await;

    // Cut: the restore says so, the data directory stays marked as being filled.
    proxy.set(Mode::Cut);
    let mut cfg = config(dir.path(), "pg-2", &ip(2), &bosun);
    cfg.backups.restore_from = Some(location.clone());
    let b = run_node(cfg);
    let s = wait_state(&b, "pg-2 reports the cut stream", |s| {
        s.error
            .as_deref()
            .is_some_and(|e| e.contains("base.tar.gz") && e.contains("restore"))
    })
    .await;
    eprintln!("cut: {:?}", s.error);
    assert!(proxy.broken() >= 1, "the proxy cut nothing");
    assert_ne!(s.role, StateRole::Primary, "{s:?}");
    assert!(
        s.restore_failure.is_none(),
        "a cut is not a failed backup: {s:?}"
    );
    assert!(
        filling_mark(&b.data).exists(),
        "the half-filled data directory is not marked"
    );

    // Stall: the body stops without closing; the read timeout says so.
    proxy.set(Mode::Stall);
    let stalled = proxy.broken();
    let s = wait_state(&b, "pg-2 reports the stalled stream", |s| {
        s.error
            .as_deref()
            .is_some_and(|e| e.contains("base.tar.gz") && e.contains("no data for"))
    })
    .await;
    eprintln!("stall: {:?}", s.error);
    assert!(proxy.broken() > stalled, "the proxy stalled nothing: {s:?}");
    assert_ne!(s.role, StateRole::Primary, "{s:?}");

    // Healed: the next fill completes, with every row.
    proxy.set(Mode::Pass);
    wait_state(&b, "pg-2 restored and promoted", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    assert_eq!(fingerprint(&b).await, want);
    assert!(!filling_mark(&b.data).exists());
    b.shutdown().await;
}
