//! Two replicas with leader election. The leader is killed (`-9`): the standby takes the
//! lease once it expires and converges a new BookStore. The new leader is stopped (SIGTERM):
//! it releases the lease and the other takes over at once. Throughout, the audit log's writes
//! by each identity never interleave: never two writers.
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use super::bosun::{Bosun, Flags};
use super::cluster::{now_us, writes_by, Env};
use super::Report;

const LEASE: &str = "bosun-leader";
/// bosun run's default.
const LEASE_DURATION: Duration = Duration::from_secs(15);

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

    // kill -9 of the leader: the standby waits out the lease.
    let killed = Instant::now();
    a.kill9().await;
    let second = vec!["second".to_string()];
    env.create(&ns, &second).await?;
    let takeover = wait_holder(env, &ns, "replica-b", LEASE_DURATION * 3).await?;
    env.wait_ready(&ns, &second, Duration::from_secs(60))
        .await?;
    let converged = killed.elapsed();
    r.figure(
        "kill -9: lease taken over after (s)",
        format!("{:.1}", takeover.as_secs_f64()),
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
