//! 1000 random 100 KB bearer tokens at `/metrics` (`--metrics-secure`) while BookStores
//! converge: the leader keeps its lease (it never changes hands, its renewals keep coming)
//! and its peak RSS stays bounded.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::bosun::{Bosun, Flags};
use super::cluster::{names, Env};
use super::Report;
use bosun_verify::Rng;

const LEASE: &str = "bosun-leader";
const TOKENS: usize = 1000;
const TOKEN_BYTES: usize = 100 * 1024;

/// One request with a random token; the status code (0: no answer).
async fn scrape(port: u16, seed: u64) -> u16 {
    let mut rng = Rng::new(seed);
    let token: String = (0..TOKEN_BYTES)
        .map(|_| char::from(b'a' + (rng.next_u64() % 26) as u8))
        .collect();
    let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let req = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return 0;
    }
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

pub async fn run(env: &mut Env) -> anyhow::Result<Report> {
    let m = if env.args.quick { 10 } else { 50 };
    eprintln!(
        "[chaos] flood: {TOKENS} random 100 KB tokens at /metrics while {m} BookStores converge"
    );
    let mut r = Report::new("flood");
    let ns = env.namespace("chaos-flood").await?;
    let flags = Flags {
        lease: Some(LEASE.into()),
        metrics_secure: true,
    };
    let b = Bosun::start(env, "flood", &ns, &flags).await?;
    let leases: Api<Lease> = Api::namespaced(env.admin.clone(), &ns);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let h = leases
            .get_opt(LEASE)
            .await?
            .and_then(|l| l.spec?.holder_identity);
        if h.as_deref() == Some("flood") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rss_before = b.peak_rss_mb();
    let stores = names("flood", m);
    env.create(&ns, &stores).await?;

    // The lease's holders, watched while the flood runs.
    let holders = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watch_lease = {
        let (leases, holders) = (leases.clone(), holders.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(Some(l)) = leases.get_opt(LEASE).await {
                    let h = l.spec.and_then(|s| s.holder_identity).unwrap_or_default();
                    let mut seen = holders.lock().unwrap_or_else(|e| e.into_inner());
                    if seen.last() != Some(&h) {
                        seen.push(h);
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let flood_start = Instant::now();
    let port = b.metrics;
    let codes: Vec<u16> = stream::iter(0..TOKENS as u64)
        .map(|i| scrape(port, i + 1))
        .buffer_unordered(32)
        .collect()
        .await;
    let flood_s = flood_start.elapsed();
    let converged = env.wait_ready(&ns, &stores, Duration::from_secs(120)).await;
    watch_lease.abort();
    let holders = holders.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut by_code: BTreeMap<u16, usize> = BTreeMap::new();
    for c in codes {
        *by_code.entry(c).or_default() += 1;
    }
    r.figure(
        "flood duration (s)",
        format!("{:.1}", flood_s.as_secs_f64()),
    );
    r.figure("answers by status code", format!("{by_code:?}"));
    r.figure(
        "peak RSS before / after (MB)",
        format!("{rss_before:.1} / {:.1}", b.peak_rss_mb()),
    );
    r.figure("lease holders seen", format!("{holders:?}"));
    r.check(
        holders.iter().all(|h| h == "flood"),
        format!("the lease changed hands: {holders:?}"),
    );
    r.check(
        !by_code.contains_key(&200),
        "a random token was let through",
    );
    r.check(b.peak_rss_mb() < 200.0, "peak RSS above 200 MB");
    match converged {
        Ok(d) => r.figure(
            "BookStores Ready during the flood (s)",
            format!("{:.1}", d.as_secs_f64()),
        ),
        Err(e) => r.check(false, e.to_string()),
    }
    b.stop().await?;
    Ok(r)
}
