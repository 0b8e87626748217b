//! Leader election timing on the real API server, with the network between one elector and
//! the API server made slow or cut by a tower layer on that elector's client.
mod common;

use std::time::Duration;

use bosun_runtime::leader::{LeaderConfig, LeaderElector};
use bosun_testenv::{shared, test_namespace};
use common::layers::SlowThenPartition;
use tokio::time::Instant;

fn lease(ns: &str, identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_name: "bosun".into(),
        namespace: ns.into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(7),
        renew_deadline: Duration::from_secs(5),
        retry_period: Duration::from_millis(500),
    }
}

/// A renewal written at once but answered 4 s later, then silence. The lease on the server
/// was renewed when the request was sent, so a standby may take over `lease_duration` after
/// that; the leader must stop `renew_deadline` after the *start* of that attempt (client-go's
/// rule), not after the late answer, or both lead at once.
#[tokio::test]
async fn the_renew_deadline_counts_from_the_start_of_the_attempt() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "le-deadline").await.expect("ns");

    let network = SlowThenPartition::new("/leases/", Duration::from_secs(4));
    let mut a = LeaderElector::new(network.client(cp).await, lease(&ns, "a")).expect("a");
    a.acquire().await;
    let leader = tokio::spawn(async move {
        a.hold().await;
        Instant::now()
    });
    let mut b = LeaderElector::new(admin.clone(), lease(&ns, "b")).expect("b");
    let standby = tokio::spawn(async move {
        b.acquire().await;
        Instant::now()
    });
    // A few normal renewals, then the slow one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    network.arm();

    let lost_at = tokio::time::timeout(Duration::from_secs(30), leader)
        .await
        .expect("a stepped down")
        .expect("join");
    let acquired_at = tokio::time::timeout(Duration::from_secs(30), standby)
        .await
        .expect("b took over")
        .expect("join");
    let sent_at = network.slow_sent_at().expect("the slow renewal was sent");
    println!(
        "slow renewal sent at 0; a stepped down at {:?}, b acquired at {:?}",
        lost_at - sent_at,
        acquired_at - sent_at
    );
    assert!(
        lost_at < acquired_at,
        "a stepped down {:?} after b acquired: two leaders",
        lost_at - acquired_at
    );
}
