//! Two replicas with leader election. The leader is killed (`-9`): the standby (a warm one:
//! its caches synced, its reconciles waiting for the lease) takes the lease once it expires
//! and reconciles a new BookStore from those caches; the figures are kill → lease, kill →
//! the new BookStore reconciled (its status written by the new leader), kill → Ready. The new leader is stopped (SIGTERM):
//! it releases the lease and the other takes over at once. Throughout, the audit log's writes
//! by each identity never interleave: never two writers.
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::bosun::{Bosun, Flags};
use super::cluster::{now_us, writes_by, Env};
use super::Report;

const LEASE: &str = "bosun-leader";
/// bosun run's default (`--leader-elect-lease-duration`).
const LEASE_DURATION: Duration = Duration::from_secs(4);

/// Waits until the BookStore `name` has been reconciled (its status observed its
/// generation); the time it took.
async fn wait_reconciled(
    env: &Env,
    ns: &str,
    name: &str,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(b)) = env.bookstores(ns).get_opt(name).await {
            let observed = b.status.as_ref().and_then(|s| s.observed_generation);
            if observed.is_some() && observed == b.metadata.generation {
                return Ok(t0.elapsed());
            }
        }
        anyhow::ensure!(t0.elapsed() < limit, "{name} never reconciled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn holder(env: &Env, ns: &str) -> Option<String> {
    Api::<Lease>::namespaced(env.admin.clone(), ns)
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

/// Waits until `identity` holds the lease; the time it took.
async fn wait_holder(
    env: &Env,
    ns: &str,
    identity: &str,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    loop {
        if holder(env, ns).await.as_deref() == Some(identity) {
            return Ok(t0.elapsed());
        }
        anyhow::ensure!(t0.elapsed() < limit, "{identity} never took the lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn run(env: &mut Env) -> anyhow::Result<Report> {
    eprintln!("[chaos] failover: two replicas, kill -9 then SIGTERM of the leader");
    let mut r = Report::new("failover");
    let ns = env.namespace("chaos-failover").await?;
    let flags = Flags {
        lease: Some(LEASE.into()),
        ..Default::default()
    };
    let since = now_us();
    let a = Bosun::start(env, "replica-a", &ns, &flags).await?;
    wait_holder(env, &ns, "replica-a", Duration::from_secs(30)).await?;
    let b = Bosun::start(env, "replica-b", &ns, &flags).await?;
    b.wait_ready(Duration::from_secs(30)).await?;
    let first = vec!["first".to_string()];
    env.create(&ns, &first).await?;
    env.wait_ready(&ns, &first, Duration::from_secs(60)).await?;

    // At rest: what leader election costs the API server (the standby only reads).
    const REST: Duration = Duration::from_secs(15);
    let rest_from = now_us();
    tokio::time::sleep(REST).await;
    let rest = env.writes_since(rest_from)?;
    let lease_writes = |id: &str| {
        rest.iter()
            .filter(|w| w.user == Env::user(id) && w.resource.starts_with("leases"))
            .count() as f64
            * 60.0
            / REST.as_secs_f64()
    };
    r.figure(
        "at rest: Lease writes per minute (leader, standby)",
        format!(
            "{:.0}, {:.0}",
            lease_writes("replica-a"),
            lease_writes("replica-b")
        ),
    );
    r.check(
        lease_writes("replica-b") == 0.0,
        "the standby wrote the Lease at rest".to_string(),
    );

    // kill -9 of the leader: the standby waits out the lease.
    let killed = Instant::now();
    a.kill9().await;
    let second = vec!["second".to_string()];
    env.create(&ns, &second).await?;
    let takeover = wait_holder(env, &ns, "replica-b", LEASE_DURATION * 3).await?;
    wait_reconciled(env, &ns, "second", Duration::from_secs(60)).await?;
    let reconciled = killed.elapsed();
    env.wait_ready(&ns, &second, Duration::from_secs(60))
        .await?;
    let converged = killed.elapsed();
    r.figure(
        "kill -9: lease taken over after (s)",
        format!("{:.1}", takeover.as_secs_f64()),
    );
    r.figure(
        "kill -9: new BookStore reconciled after (s)",
        format!("{:.1}", reconciled.as_secs_f64()),
    );
    r.figure(
        "kill -9: new BookStore Ready after (s)",
        format!("{:.1}", converged.as_secs_f64()),
    );
    r.check(
        takeover <= LEASE_DURATION + Duration::from_secs(4),
        format!("takeover after {takeover:?}, beyond the {LEASE_DURATION:?} lease + a retry"),
    );

    // SIGTERM of the new leader: it releases the lease on its way out.
    let c = Bosun::start(env, "replica-c", &ns, &flags).await?;
    c.wait_ready(Duration::from_secs(30)).await?;
    let stopped = Instant::now();
    b.stop().await?;
    let third = vec!["third".to_string()];
    env.create(&ns, &third).await?;
    let handover = wait_holder(env, &ns, "replica-c", LEASE_DURATION * 3).await?;
    env.wait_ready(&ns, &third, Duration::from_secs(60)).await?;
    r.figure(
        "SIGTERM: lease taken over after (s)",
        format!("{:.1}", handover.as_secs_f64()),
    );
    r.figure(
        "SIGTERM: new BookStore Ready after (s)",
        format!("{:.1}", stopped.elapsed().as_secs_f64()),
    );
    r.check(
        handover < LEASE_DURATION / 2,
        format!("handover after {handover:?}: the lease was not released"),
    );

    // Never two writers: each identity's writes form one block, in the order they led.
    let all = env.writes_since(since)?;
    let mut order: Vec<&str> = Vec::new();
    let mut counts = Vec::new();
    for id in ["replica-a", "replica-b", "replica-c"] {
        counts.push(format!("{id} {}", writes_by(&all, &Env::user(id)).len()));
    }
    for w in all.iter().filter(|w| !w.resource.starts_with("leases")) {
        let Some(id) = w.user.strip_prefix("system:serviceaccount:bosun-system:") else {
            continue;
        };
        if order.last() != Some(&id) {
            order.push(id);
        }
    }
    r.figure("writes per identity", counts.join(", "));
    r.figure("writers in order", order.join(" → "));
    r.check(
        order == ["replica-a", "replica-b", "replica-c"],
        format!("writers interleaved: {order:?}"),
    );
    let problems = env
        .check_children(&ns, &[first, second, third].concat())
        .await?;
    r.check(problems.is_empty(), format!("{problems:?}"));
    c.stop().await?;
    Ok(r)
}
