//! Issue 32, audit H10 and H11: S3 base backups and restores stream, on real PostgreSQL and a
//! real S3-compatible server (moto, `bash scripts/setup-moto.sh`).
//!
//! One test, on purpose: the memory figures are the peak resident set of this process, which
//! hosts the instance managers doing the upload and the restore (PostgreSQL, moto and the
//! `bosun pg archive-wal`/`restore-wal` programs are other processes). Another test running
//! beside it would add its own allocations to the peak.
//!
//! Needs the built `bosun` binary for PostgreSQL's archive and restore commands
//! (`cargo build -p bosun`).
#![cfg(feature = "s3")]

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_postgres::backup::catalog::BackupInfo;
use bosun_postgres::backup::s3::S3Store;
use bosun_postgres::instance::client::InstanceClient;
use bosun_postgres::instance::{
    self, BackupState, Config, Credentials, InitDbOptions, InstanceState, Role, StateRole,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod common;
use common::moto::{Moto, ACCESS_KEY, BUCKET, SECRET_KEY};

const PG_PORT: u16 = 5432;
const HTTP_PORT: u16 = 8008;
const TOKEN: &str = "test-api-token";
const SUPER_PASSWORD: &str = "super-secret";
const DEADLINE: Duration = Duration::from_secs(600);
/// S3's smallest part: the bound on memory is a few of these.
const PART: u64 = 5 << 20;
/// Rows of about 100 bytes on disk: a table of about 170 MB. Its text is md5 hex, which gzip
/// halves at best, so that the compressed backup is still many parts.
const ROWS: i64 = 1_600_000;

/// The tests here one at a time: each points this process's environment at its own moto, and
/// the memory figures are this process's.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Points the instance managers (here, and PostgreSQL's archive and restore commands that
/// inherit this environment) at `moto`, as a pod's env does.
fn use_store(moto: &Moto) {
    std::env::set_var("BOSUN_PG_S3_ENDPOINT", &moto.endpoint);
    std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    std::env::set_var("BOSUN_PG_S3_PART_SIZE", PART.to_string());
}

struct Node {
    ip: IpAddr,
    stop: CancellationToken,
    task: JoinHandle<Result<(), instance::Error>>,
    api: InstanceClient,
    log: PathBuf,
    /// The claim's root: the data directory's parent.
    claim: PathBuf,
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
        .prefix("pgs3")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

fn ip(n: u8) -> String {
    let net = bosun_testenv::loopback_network().expect("a loopback network of our own");
    format!("127.{net}.32.{n}")
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
    let claim = cfg.data_dir.parent().expect("a parent").to_path_buf();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(instance::run(cfg, token));
    Node {
        ip,
        stop,
        task,
        api: InstanceClient::new(SocketAddr::new(ip, HTTP_PORT), Some(TOKEN.into())),
        log,
        claim,
    }
}

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
            panic!("{what}: last seen {last}\n--- postgres log ---\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

/// `VmRSS` or `VmHWM` of this process, in bytes.
fn status_bytes(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("{field} not in /proc/self/status"))
}

/// Starts a new peak (`VmHWM` back to the current RSS); returns the RSS then.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    status_bytes("VmRSS")
}

/// Every name created or moved into `dir` (not below it) while it is watched.
struct Watch {
    fd: std::os::fd::OwnedFd,
}

impl Watch {
    fn new(dir: &Path) -> Watch {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscalls; the descriptor is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1");
        // SAFETY: `fd` was just returned by inotify_init1.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let path = std::ffi::CString::new(dir.to_str().expect("utf-8")).expect("path");
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor and NUL-terminated path.
        let wd = unsafe {
            libc::inotify_add_watch(
                fd.as_raw_fd(),
                path.as_ptr(),
                libc::IN_CREATE | libc::IN_MOVED_TO,
            )
        };
        assert!(wd >= 0, "inotify_add_watch {}", dir.display());
        Watch { fd }
    }

    /// The names created since the watch began.
    fn created(&self) -> Vec<String> {
        use std::os::fd::AsRawFd;
        let mut names = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            // SAFETY: reads into a buffer of the length given.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return names;
            }
            let mut at = 0usize;
            let head = std::mem::size_of::<libc::inotify_event>();
            while at + head <= n as usize {
                let len =
                    u32::from_ne_bytes(buf[at + 12..at + 16].try_into().expect("4 bytes")) as usize;
                let name = &buf[at + head..at + head + len];
                let name = name.split(|b| *b == 0).next().unwrap_or_default();
                names.push(String::from_utf8_lossy(name).into_owned());
                at += head + len;
            }
        }
    }
}

/// A backup as the previous version wrote it: `pg_basebackup -Ft -X stream` staged on disk,
/// then `base.tar`, `pg_wal.tar` and `backup_manifest` uploaded uncompressed, the record last.
async fn write_old_format_backup(node: &Node, store: &S3Store, scratch: &Path) -> String {
    let started = chrono::Utc::now();
    let id = started.format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let dir = scratch.join(&id);
    // Over the private socket, as the manager ran it (replication over the network is the
    // replication user's only).
    let out = std::process::Command::new("pg_basebackup")
        .args(["-Ft", "-X", "stream", "-c", "fast", "--no-password", "-D"])
        .arg(&dir)
        .arg("-h")
        .arg(node.claim.join("run"))
        .args(["-p", &PG_PORT.to_string(), "-U", "postgres"])
        .output()
        .expect("pg_basebackup");
    assert!(
        out.status.success(),
        "pg_basebackup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut label = String::new();
    let mut archive = tar::Archive::new(std::fs::File::open(dir.join("base.tar")).expect("tar"));
    for e in archive.entries().expect("entries") {
        let mut e = e.expect("entry");
        if e.path().expect("path").as_os_str() == "backup_label" {
            std::io::Read::read_to_string(&mut e, &mut label).expect("label");
        }
    }
    let start_wal = label
        .lines()
        .find_map(|l| l.strip_prefix("START WAL LOCATION:"))
        .and_then(|l| l.split("(file ").nth(1))
        .map(|w| w.trim_end_matches(')').trim().to_string())
        .expect("start WAL in the label");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("backup_manifest")).expect("manifest"))
            .expect("manifest JSON");
    let end_lsn = manifest["WAL-Ranges"][0]["End-LSN"]
        .as_str()
        .expect("End-LSN")
        .to_string();
    for f in ["base.tar", "pg_wal.tar", "backup_manifest"] {
        store
            .put_file(&format!("base/{id}/{f}"), &dir.join(f))
            .await
            .expect("upload");
    }
    let info = BackupInfo {
        id: id.clone(),
        started,
        finished: chrono::Utc::now(),
        timeline: u32::from_str_radix(&start_wal[..8], 16).expect("timeline"),
        start_wal,
        end_lsn,
    };
    store
        .put(
            &format!("base/{id}/bosun-backup.json"),
            serde_json::to_vec_pretty(&info).expect("json"),
        )
        .await
        .expect("record");
    std::fs::remove_dir_all(&dir).expect("remove the staged copy");
    id
}

/// Restores a new instance from the store; its time and its manager's memory growth.
async fn restore(
    dir: &Path,
    name: &str,
    ip: &str,
    bosun: &Path,
    location: &str,
) -> (Node, Duration, u64) {
    let mut cfg = config(dir, name, ip, bosun);
    cfg.backups.restore_from = Some(location.into());
    let base = reset_peak();
    let t = Instant::now();
    let node = run_node(cfg);
    wait_state(&node, &format!("{name} restored and promoted"), |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let took = t.elapsed();
    let grew = status_bytes("VmHWM").saturating_sub(base);
    (node, took, grew)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// H11: a base backup to S3 writes nothing on the data claim and its upload holds a few parts
/// in memory, never the backup; H10: a restore from S3 holds a few parts, never the backup;
/// both restores (this version's backup, and one staged and uploaded uncompressed as the
/// previous version did) bring back every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_backups_and_restores_stream_with_memory_bounded_by_the_part_size() {
    let _serial = SERIAL.lock().await;
    let bosun = bosun_testenv::procmode::built_bosun()
        .expect("the bosun binary: run `cargo build -p bosun` first");
    let moto = Moto::start().await;
    moto.client("").create_bucket().await.expect("bucket");
    use_store(&moto);
    let location = format!("s3://{BUCKET}/stream/pg");
    let store = moto.client("stream/pg").with_part_size(PART);
    let dir = workdir();

    let mut cfg = config(dir.path(), "pg-1", &ip(1), &bosun);
    cfg.backups.store = Some(location.clone());
    let a = run_node(cfg);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    let c = sql(&a).await;
    c.batch_execute(&format!(
        "CREATE TABLE t (id int, v text); \
         INSERT INTO t SELECT i, md5(i::text) || md5((i * 7)::text) FROM generate_series(1, {ROWS}) i; \
         CHECKPOINT"
    ))
    .await
    .expect("load");
    let size: i64 = c
        .query_one("SELECT pg_database_size('postgres')", &[])
        .await
        .expect("size")
        .get(0);
    let want = fingerprint(&a).await;

    let mut failures = Vec::new();
    let claim = a.claim.clone();
    let watch = Watch::new(&claim);
    let base = reset_peak();
    let t = Instant::now();
    a.api.backup().await.expect("start a base backup");
    let s = wait_state(&a, "the base backup ends", |s| {
        s.backup
            .as_ref()
            .is_some_and(|b| !b.running && (b.backups >= 1 || b.last_failed.is_some()))
    })
    .await;
    let backup_took = t.elapsed();
    let backup_grew = status_bytes("VmHWM").saturating_sub(base);
    let b: BackupState = s.backup.expect("backup state");
    assert_eq!(b.backups, 1, "the backup failed: {:?}", b.last_failure);
    let created = watch.created();
    let objects = store.list("base/").await.expect("list");
    let archive = objects
        .iter()
        .find(|k| k.ends_with("/base.tar.gz"))
        .cloned();
    if let Some(key) = &archive {
        // A multipart upload's ETag ends in `-<parts>`.
        let etag = store.etag(key).await.expect("head").unwrap_or_default();
        let parts = etag
            .trim_matches('"')
            .rsplit_once('-')
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .unwrap_or(0);
        if parts < 2 {
            failures.push(format!("{key} did not go up in parts: ETag {etag}"));
        }
    } else {
        failures.push(format!("no base.tar.gz among {objects:?}"));
    }
    let stored: u64 = {
        let keys = store.list("base/").await.expect("list");
        let mut total = 0;
        for k in &keys {
            total += store
                .get(k)
                .await
                .expect("get")
                .map_or(0, |b| b.len() as u64);
        }
        println!("objects: {keys:?}");
        total
    };

    let (r, restore_took, restore_grew) =
        restore(dir.path(), "pg-2", &ip(2), &bosun, &location).await;
    let got = fingerprint(&r).await;
    r.shutdown().await;

    // The previous version's layout, newer than the streamed backup: the restore picks it.
    let scratch = dir.path().join("old-format");
    std::fs::create_dir_all(&scratch).expect("scratch");
    write_old_format_backup(&a, &store, &scratch).await;
    let (o, old_took, old_grew) = restore(dir.path(), "pg-3", &ip(3), &bosun, &location).await;
    let got_old = fingerprint(&o).await;
    o.shutdown().await;
    a.shutdown().await;

    println!(
        "database {:.1} MiB, {ROWS} rows; objects of the backup {:.1} MiB; part {:.0} MiB\n\
         backup: {:.1} s, peak RSS +{:.1} MiB\n\
         restore: {:.1} s, peak RSS +{:.1} MiB\n\
         restore of an old-format backup: {:.1} s, peak RSS +{:.1} MiB",
        mib(size as u64),
        mib(stored),
        mib(PART),
        backup_took.as_secs_f64(),
        mib(backup_grew),
        restore_took.as_secs_f64(),
        mib(restore_grew),
        old_took.as_secs_f64(),
        mib(old_grew),
    );
    // Two parts (one filling, one going up), the gzip and tar state, the HTTP client's
    // buffers and the runtime's threads: far below the database, whatever its size.
    let bound = 4 * PART + (16 << 20);
    assert!(
        size as u64 > 4 * bound,
        "the database ({size} bytes) is too small to tell a bounded copy from a whole one"
    );
    for (what, grew) in [
        ("backup", backup_grew),
        ("restore", restore_grew),
        ("restore of the old format", old_grew),
    ] {
        if grew > bound {
            failures.push(format!(
                "the {what} grew the peak RSS by {:.1} MiB, above {:.1} MiB",
                mib(grew),
                mib(bound)
            ));
        }
    }
    if !created.is_empty() {
        failures.push(format!(
            "the backup created {created:?} on the data claim {}",
            claim.display()
        ));
    }
    if got != want {
        failures.push(format!("restored {got}, backed up {want}"));
    }
    if got_old != want {
        failures.push(format!(
            "restored from the old format {got_old}, backed up {want}"
        ));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The pids of this process's children running `program`.
fn children(program: &str) -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces, so split after its `)`.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or_default();
        let ppid = rest.split_whitespace().nth(1).unwrap_or_default();
        if comm == program && ppid == me {
            out.push(pid);
        }
    }
    out
}

/// A backup whose `pg_basebackup` dies while its upload is under way: the multipart upload is
/// aborted on the store (nothing of it left), no backup is listed, and the failure is reported
/// with the program's own verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_cut_short_is_aborted_on_the_store_and_never_listed() {
    let _serial = SERIAL.lock().await;
    let bosun = bosun_testenv::procmode::built_bosun()
        .expect("the bosun binary: run `cargo build -p bosun` first");
    let moto = Moto::start().await;
    moto.client("").create_bucket().await.expect("bucket");
    use_store(&moto);
    let store = moto.client("cut/pg").with_part_size(PART);
    let dir = workdir();
    let mut cfg = config(dir.path(), "pg-1", &ip(11), &bosun);
    cfg.backups.store = Some(format!("s3://{BUCKET}/cut/pg"));
    let a = run_node(cfg);
    wait_state(&a, "pg-1 primary", |s| {
        s.role == StateRole::Primary && s.ready
    })
    .await;
    sql(&a)
        .await
        .batch_execute(
            "CREATE TABLE t (id int, v text); \
             INSERT INTO t SELECT i, md5(i::text) FROM generate_series(1, 200000) i",
        )
        .await
        .expect("load");

    a.api.backup().await.expect("start a base backup");
    // Stopped as soon as it runs, so that it cannot finish before it is killed.
    let pid = wait_for("pg_basebackup running", &a, || async {
        match children("pg_basebackup").first() {
            Some(&pid) => {
                // SAFETY: a signal to a child of this process, which waits for it.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                Ok(pid)
            }
            None => Err("no pg_basebackup child".into()),
        }
    })
    .await;
    let key = wait_for("the multipart upload begun", &a, || async {
        match store.uploads().await {
            Ok(u) if !u.is_empty() => Ok(u[0].clone()),
            Ok(_) => Err("no upload under way".into()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(key.ends_with("/base.tar.gz"), "{key}");
    // SAFETY: as above; SIGKILL also ends a stopped process.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let s = wait_state(&a, "the backup reported failed", |s| {
        s.backup
            .as_ref()
            .is_some_and(|b| !b.running && b.last_failed.is_some())
    })
    .await;
    let b = s.backup.expect("backup state");
    let why = b.last_failure.clone().unwrap_or_default();
    assert!(why.contains("pg_basebackup"), "{why}");
    assert_eq!(b.backups, 0, "{b:?}");
    assert_eq!(
        store.uploads().await.expect("list uploads"),
        Vec::<String>::new(),
        "the upload was left on the store"
    );
    let objects = store.list("base/").await.expect("list");
    assert!(objects.is_empty(), "{objects:?}");
    a.shutdown().await;
}
