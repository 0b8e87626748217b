//! The operator's fence of an old primary through its own PostgreSQL (issue 32, M4).
//!
//! A primary whose instance manager is stopped (SIGSTOP, a hang) fences nothing, and once its
//! pod was force-deleted, or is Terminating on a lost node, no kubelet is known to have killed
//! it: its PostgreSQL may run on and acknowledge commits. Before a failover promotes over it,
//! the operator connects to that PostgreSQL at the address it last had, as the superuser, and
//! 1. makes every commit wait for a standby that does not exist (`synchronous_standby_names`
//!    = [`FENCE_STANDBY`], `ALTER SYSTEM` + reload), so that no commit is acknowledged while
//!    the next steps run, nor after a restart on its volume before it is rewound;
//! 2. terminates every client session;
//! 3. stops the server: a fast shutdown, SIGINT to the postmaster, sent with
//!    `COPY ... TO PROGRAM` (SQL has no other way to signal the postmaster; the superuser
//!    may run a program as the server's OS user, who owns the postmaster), and waits until
//!    it refuses connections. A server shutting down accepts no new session and has ended
//!    every other one, so no client can be acknowledged a commit by it any more, whatever
//!    its session settings (`synchronous_commit = local` would get past step 1 alone).
//!
//! Only then is it `Stopped`. Nothing answering there as this cluster's primary (refused, no
//! answer within the bounds, the superuser's password refused — another server on a reused
//! address —, a server in recovery) is `Unreachable`: the isolation wait applies. What this
//! cannot cover: a primary the operator cannot reach while clients can (a partition between
//! them), with its manager stopped too.
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

use crate::instance::SUPERUSER;

/// The standby every commit of a fenced primary waits for: no instance has this name (theirs
/// are `<cluster>-<serial>`, and a standby's `application_name` is its instance's name).
pub const FENCE_STANDBY: &str = "bosun_fenced";

/// Connecting, TCP and the startup exchange both (a stopped server whose socket still
/// listens never answers).
const CONNECT_BOUND: Duration = Duration::from_secs(10);
/// Each statement.
const STEP_BOUND: Duration = Duration::from_secs(15);
/// From the postmaster's SIGINT until it refuses connections.
const STOP_BOUND: Duration = Duration::from_secs(30);

/// What the fence found.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It answered as the primary and was stopped.
    Stopped(String),
    /// Nothing answered there as this cluster's primary.
    Unreachable(String),
}

/// Fences the PostgreSQL at `host:port` (see the module's doc). An error: it answered, and
/// the fence did not complete (tried again by the next cycle).
pub async fn fence(host: &str, port: u16, password: &str) -> Result<Outcome, String> {
    let client = match connect(host, port, password).await {
        Ok(c) => c,
        Err(why) => {
            return Ok(Outcome::Unreachable(format!(
                "nothing answered at {host}:{port} as this cluster's PostgreSQL: {}",
                why.map(|e| e.to_string())
                    .unwrap_or_else(|| "no answer within the bound".into())
            )))
        }
    };
    let in_recovery: bool = step(
        "reading pg_is_in_recovery()",
        client.query_one("SELECT pg_is_in_recovery()", &[]),
    )
    .await?
    .get(0);
    if in_recovery {
        return Ok(Outcome::Unreachable(format!(
            "the server at {host}:{port} is in recovery: not a primary"
        )));
    }
    step(
        "setting synchronous_standby_names",
        client.batch_execute(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{FENCE_STANDBY}'"
        )),
    )
    .await?;
    step(
        "reloading",
        client.query_one("SELECT pg_reload_conf()", &[]),
    )
    .await?;
    step(
        "terminating client sessions",
        client.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            &[],
        ),
    )
    .await?;
    let pid_file: String = step(
        "reading postmaster.pid",
        client.query_one("SELECT pg_read_file('postmaster.pid')", &[]),
    )
    .await?
    .get(0);
    let postmaster: u32 = pid_file
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .filter(|p| *p > 1)
        .ok_or_else(|| format!("postmaster.pid at {host}:{port} names no process"))?;
    // Its answer may never come: the shutdown ends this session too.
    let _ = tokio::time::timeout(
        STEP_BOUND,
        client.batch_execute(&format!(
            "COPY (SELECT 1) TO PROGRAM 'kill -INT {postmaster}'"
        )),
    )
    .await;
    drop(client);
    let deadline = tokio::time::Instant::now() + STOP_BOUND;
    loop {
        match connect(host, port, password).await {
            Err(Some(e)) if refuses(&e) => {
                return Ok(Outcome::Stopped(format!(
                    "the PostgreSQL at {host}:{port} answered as the primary; its sessions \
                     were ended and its postmaster ({postmaster}) stopped"
                )))
            }
            _ if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "the PostgreSQL at {host}:{port} still accepts connections {}s after its \
                     postmaster was told to stop",
                    STOP_BOUND.as_secs()
                ))
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The server refuses sessions: nothing listens, or it is shutting down.
fn refuses(e: &tokio_postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        return matches!(
            db.code(),
            &SqlState::CANNOT_CONNECT_NOW | &SqlState::ADMIN_SHUTDOWN
        );
    }
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// A session as the superuser; `Err(None)`: no answer within the bound.
async fn connect(
    host: &str,
    port: u16,
    password: &str,
) -> Result<Client, Option<tokio_postgres::Error>> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(host)
        .port(port)
        .user(SUPERUSER)
        .password(password)
        .dbname("postgres")
        .application_name("bosun-operator-fence")
        .options("-c statement_timeout=15s -c lock_timeout=5s")
        .connect_timeout(Duration::from_secs(5));
    let (client, conn) = tokio::time::timeout(CONNECT_BOUND, cfg.connect(NoTls))
        .await
        .map_err(|_| None)?
        .map_err(Some)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

async fn step<T>(
    what: &str,
    f: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(STEP_BOUND, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer in {}s", STEP_BOUND.as_secs())),
    }
}
