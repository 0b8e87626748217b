//! A sharded member's term begins with one read of its share, on the real API server.
//!
//! The member is this test process: a manager with sharding and the widget operator, its
//! operators' client counted. As its first term begins it lists its share once (a metadata
//! LIST of the widgets labelled with it and asking no hand-off, no `resourceVersion`: a
//! quorum read). The sharder places the widgets on it after that read: each one's cached
//! version is newer than the read, so none is read alone (no GET of a single widget) before
//! its first reconcile. Before, a member's first term read nothing, and a later one GET each
//! object of its share.
//!
//! And a replica started under a member's name while its objects move away — its Lease held,
//! as the sharder holds a lost member's while it moves them — whose cache has not seen the
//! moves when its first term begins (its widget watch held back by the test) starts none of
//! them.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_testenv::{shared, test_namespace};
use common::*;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

const WIDGETS: usize = 30;

/// What the member's operators asked the API server of the widgets.
#[derive(Clone, Default)]
struct Reads {
    /// LISTs of its share (their selector asks for no drain label).
    shares: Arc<AtomicUsize>,
    /// GETs of one widget.
    singles: Arc<AtomicUsize>,
}

impl Reads {
    fn layer(&self) -> layers::Observe {
        let seen = self.clone();
        layers::Observe::new(move |method, uri| {
            if method != http::Method::GET {
                return;
            }
            let query = uri.query().unwrap_or("");
            if layers::is_list(method, uri, "widgets") {
                // `!<drain label>` in the selector: no cache selects so.
                if query.contains("%21drain.bosun.dev") || query.contains("!drain.bosun.dev") {
                    seen.shares.fetch_add(1, Ordering::SeqCst);
                }
            } else if !query.contains("watch=")
                && uri
                    .path()
                    .rsplit_once('/')
                    .is_some_and(|(collection, _)| collection.ends_with("/widgets"))
            {
                seen.singles.fetch_add(1, Ordering::SeqCst);
            }
        })
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.shares.load(Ordering::SeqCst),
            self.singles.load(Ordering::SeqCst),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_s_first_term_reads_its_share_once_and_no_widget_alone() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    install_crd(&admin).await.expect("crd");
    let ns = test_namespace(&admin, "term-list").await.expect("ns");
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    create_widgets(&widgets, "w", "x", WIDGETS).await;

    let config = cp.config().await.expect("config");
    let reads = Reads::default();
    let m = ShardedMember::new(&config, "termlist", &ns, "m")
        .concurrency(4)
        .layered(reads.layer())
        .manager()
        .expect("member")
        .with_operator(Arc::new(WidgetOperator {
            identity: "m".into(),
        }));
    let (stop, run) = run_until_stopped(m);

    eventually(120, || async {
        for i in 0..WIDGETS {
            if reconciled_by(&admin, &ns, &format!("w{i}"))
                .await
                .as_deref()
                != Some("m")
            {
                return None;
            }
        }
        Some(())
    })
    .await
    .expect("the member reconciles every widget");
    let (shares, singles) = reads.counts();
    println!("reads of the share {shares}, widgets read alone {singles}");
    assert!(
        shares >= 1,
        "the member's term began with no read of its share"
    );
    assert_eq!(
        singles, 0,
        "widgets placed after the read of the share were read one by one"
    );
    let _ = stop.send(());
    run.await
        .expect("join")
        .expect("the member stopped cleanly");
}

/// A Lease held by someone else for an hour.
fn held_lease(name: &str) -> Lease {
    let now = MicroTime(Timestamp::now());
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("someone-else".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..Default::default()
        }),
    }
}

/// The widget controller's queue depth, summed over its priorities, from `/metrics`.
async fn queue_depth(metrics: std::net::SocketAddr) -> Option<f64> {
    let (_, text) = http_get(metrics, "/metrics").await.ok()?;
    let depths: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("workqueue_depth{") && l.contains("name=\"widget\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!depths.is_empty()).then(|| depths.iter().sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_restarted_while_its_widgets_moved_away_starts_none_of_them() {
    const LEASE: &str = "termmoved";
    const SHARD: &str = "shard.bosun.dev/widget";
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    install_crd(&admin).await.expect("crd");
    let ns = test_namespace(&admin, "term-moved").await.expect("ns");
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns);
    // No sharder places anything (the test holds its Lease), and m's membership Lease is
    // held too, as the sharder holds a lost member's while it moves its objects.
    for lease in [format!("{LEASE}-sharder"), format!("{LEASE}-member-m")] {
        leases
            .create(&PostParams::default(), &held_lease(&lease))
            .await
            .expect("hold a lease");
    }
    let names: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    for n in &names {
        let mut w = widget(&ns, n, "x", 0);
        w.metadata.labels = Some([(SHARD.to_string(), "m".to_string())].into());
        widgets
            .create(&PostParams::default(), &w)
            .await
            .expect("create");
    }

    // m starts: its cache lists the ten widgets labelled with it, its watch held back.
    let config = cp.config().await.expect("config");
    let metrics = free_addr();
    let held = layers::HeldWatch::held("widgets");
    let m = ShardedMember::new(&config, LEASE, &ns, "m")
        .concurrency(16)
        .metrics(metrics)
        .layered(held.clone())
        .manager()
        .expect("member")
        .with_operator(Arc::new(WidgetOperator {
            identity: "m".into(),
        }));
    let (stop, run) = run_until_stopped(m);
    eventually(60, || async {
        (queue_depth(metrics).await? >= 10.0).then_some(())
    })
    .await
    .expect("m's cache listed the ten widgets and queued them");

    // The widgets move away; then m's Lease is let go and m's first term begins.
    let moved = serde_json::json!({ "metadata": { "labels": { SHARD: "o" } } });
    for n in &names {
        widgets
            .patch(n, &PatchParams::default(), &Patch::Merge(&moved))
            .await
            .expect("move");
    }
    leases
        .delete(&format!("{LEASE}-member-m"), &DeleteParams::default())
        .await
        .expect("let m's Lease go");
    eventually(60, || async {
        (lease_holder(&admin, &ns, &format!("{LEASE}-member-m"))
            .await
            .as_deref()
            == Some("m"))
        .then_some(())
    })
    .await
    .expect("m holds its Lease: its first term began");
    eventually(60, || async {
        (queue_depth(metrics).await? == 0.0).then_some(())
    })
    .await
    .expect("m took every queued key of its first term");

    // Its watch goes on: once it shows a widget placed on m after the moves, it has shown
    // the moves too.
    held.release();
    let mut marker = widget(&ns, "marker", "x", 0);
    marker.metadata.labels = Some([(SHARD.to_string(), "m".to_string())].into());
    widgets
        .create(&PostParams::default(), &marker)
        .await
        .expect("create");
    eventually(60, || reconciled_by_is(&admin, &ns, "marker", "m"))
        .await
        .expect("m reconciles a widget placed on it after the moves");
    let mut worked = Vec::new();
    for n in &names {
        if reconciled_by(&admin, &ns, n).await.as_deref() == Some("m") {
            worked.push(n.clone());
        }
    }
    assert_eq!(
        worked,
        Vec::<String>::new(),
        "m worked widgets that had moved away before its first term began"
    );
    let (_, text) = http_get(metrics, "/metrics").await.expect("metrics");
    assert_eq!(
        series_value(
            &text,
            r#"bosun_term_checks_total{controller="widget",check="moved"}"#
        ),
        Some(10.0),
        "m's metrics count the ten keys it did not start"
    );
    let _ = stop.send(());
    run.await
        .expect("join")
        .expect("the member stopped cleanly");
}
