//! The chaos suite: `bosun run` (the release binary, as shipped) under the failures operators
//! meet in production, on one real control plane (etcd, kube-apiserver, kube-controller-
//! manager, the simulated node agent) with an audit log of every mutating request. Each
//! scenario asserts its invariants and prints its figures; any broken invariant fails the run.
//!
//! 1. [`crash`]: `kill -9` at random points while N BookStores converge, then one clean start:
//!    all converge, each child exists once with its owner, no claim lost, and a restart over
//!    the converged set sends no mutating request;
//! 2. [`outage`]: the API server down for 10 s under a running bosun, then new BookStores:
//!    converged by the same process;
//! 3. [`failover`]: two replicas with leader election; the leader killed (`-9`), then the new
//!    one stopped (SIGTERM): takeover times, and never two writers (the audit log's writes
//!    per identity never interleave);
//! 4. [`drift`]: edits made while bosun is stopped (an image, a label, an owner reference, a
//!    same-name copy): all repaired on start;
//! 5. [`flood`]: 1000 random 100 KB tokens at `/metrics` while converging: the lease never
//!    changes hands, peak RSS stays bounded;
//! 6. [`stale`]: the operator's view of StatefulSets held back (Sieve's stale view) during a
//!    resize, then released: no wrong delete, converges;
//! 7. [`postgres`]: a 3-instance PostgresCluster of real PostgreSQL (its own control plane,
//!    the process-mode node agent) under a write stream while primaries and replicas are
//!    killed: never two primaries, and with synchronous replication no acknowledged commit
//!    lost.
//!
//! `--quick` (CI) runs every scenario small; the figures in README come from a full run.
mod bosun;
mod cluster;
mod crash;
mod drift;
mod failover;
mod flood;
mod outage;
mod postgres;
mod stale;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(about = "bosun's chaos suite against the real API server")]
pub struct Args {
    /// The short form for CI (small N, few kills): well under three minutes.
    #[arg(long)]
    pub quick: bool,
    /// The bosun binary (release); by default the one beside this harness.
    #[arg(long, default_value_os_t = sibling_bosun())]
    pub bosun: PathBuf,
    /// Only these scenarios (crash, outage, failover, drift, flood, stale, postgres); all when empty.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Seed of the kill points (printed, to replay a run).
    #[arg(long)]
    pub seed: Option<u64>,
}

fn sibling_bosun() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("bosun")))
        .unwrap_or_else(|| PathBuf::from("bosun"))
}

/// One scenario's outcome: figures to print, and whether its invariants held.
pub struct Report {
    pub scenario: &'static str,
    pub figures: Vec<(String, String)>,
    pub failures: Vec<String>,
}

impl Report {
    fn new(scenario: &'static str) -> Self {
        Report {
            scenario,
            figures: Vec::new(),
            failures: Vec::new(),
        }
    }
    fn figure(&mut self, name: &str, value: impl std::fmt::Display) {
        eprintln!("[chaos]   {name}: {value}");
        self.figures.push((name.to_string(), value.to_string()));
    }
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            let what = what.into();
            eprintln!("[chaos]   FAILED: {what}");
            self.failures.push(what);
        }
    }
}

pub fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bosun-chaos: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bosun-chaos: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<bool> {
    anyhow::ensure!(
        args.bosun.exists(),
        "{} not found: build it with `cargo build --release -p bosun` (bench/chaos does)",
        args.bosun.display()
    );
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    eprintln!(
        "[chaos] {} run, seed {seed}",
        if args.quick { "quick" } else { "full" }
    );
    let t0 = Instant::now();
    let mut env = cluster::Env::start(&args).await?;
    let wanted = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    let mut reports = Vec::new();
    if wanted("crash") {
        reports.push(crash::run(&mut env, seed).await?);
    }
    if wanted("outage") {
        reports.push(outage::run(&mut env).await?);
    }
    if wanted("failover") {
        reports.push(failover::run(&mut env).await?);
    }
    if wanted("drift") {
        reports.push(drift::run(&mut env).await?);
    }
    if wanted("flood") {
        reports.push(flood::run(&mut env).await?);
    }
    if wanted("stale") {
        reports.push(stale::run(&mut env).await?);
    }
    if wanted("postgres") {
        reports.push(postgres::run(&args, seed).await?);
    }
    println!();
    let mut ok = true;
    for r in &reports {
        let verdict = if r.failures.is_empty() {
            "ok"
        } else {
            "FAILED"
        };
        println!("{:<9} {verdict}", r.scenario);
        for (k, v) in &r.figures {
            println!("    {k:<44} {v}");
        }
        for f in &r.failures {
            println!("    FAILED: {f}");
        }
        ok &= r.failures.is_empty();
    }
    // The operators' logs outlive the control plane's directory, for a look after a failure.
    let logs = std::env::temp_dir().join("bosun-chaos-logs");
    let _ = std::fs::remove_dir_all(&logs);
    if std::fs::create_dir_all(&logs).is_ok() {
        for entry in std::fs::read_dir(env.cp.dir())?.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".log") && name != "audit.log" {
                let _ = std::fs::copy(entry.path(), logs.join(&name));
            }
        }
        println!("logs: {}", logs.display());
    }
    println!(
        "chaos: {} scenario(s), {} failed, {:.0} s",
        reports.len(),
        reports.iter().filter(|r| !r.failures.is_empty()).count(),
        t0.elapsed().as_secs_f64()
    );
    Ok(ok)
}
