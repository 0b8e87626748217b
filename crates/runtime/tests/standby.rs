//! Warm standbys on the real API server: a standby's caches are synced before it leads, it
//! sends no mutating request, and on taking the lease it reconciles from those caches — no
//! list of its primary kind between the lease and its first writes.
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_runtime::fence::Fence;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError};
use bosun_runtime::Scope;
use common::*;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What one replica's operators asked of the API server: writes attempted (counted above the
/// fence, so a refused one counts too) and lists of Widgets.
#[derive(Clone, Default)]
struct Requests {
    writes: Arc<AtomicUsize>,
    widget_lists: Arc<AtomicUsize>,
}

impl Requests {
    fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }
    fn widget_lists(&self) -> usize {
        self.widget_lists.load(Ordering::SeqCst)
    }
}

impl Requests {
    /// A layer that counts, above the fence, what this replica's operators send.
    fn layer(&self) -> layers::Observe {
        let seen = self.clone();
        layers::Observe::new(move |m, uri| {
            if m != http::Method::GET && m != http::Method::HEAD {
                seen.writes.fetch_add(1, Ordering::SeqCst);
            } else if layers::is_list(m, uri, "widgets") {
                seen.widget_lists.fetch_add(1, Ordering::SeqCst);
            }
        })
    }
}

type Run = JoinHandle<Result<(), ManagerError>>;

/// A replica running the widget operator with bosun's default lease timings, its operators'
/// client fenced and counted; returns its stop switch, task and probe address.
async fn replica(
    cp: &bosun_testenv::ControlPlane,
    ns: &str,
    identity: &str,
    seen: &Requests,
) -> (oneshot::Sender<()>, Run, SocketAddr) {
    let config = cp.config().await.expect("config");
    let fence = Fence::new();
    let client = fenced_client(config.clone(), &fence, &seen.layer());
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.into()]),
        leader: Some(LeaderConfig::new("widgets", ns, identity)),
        probe_addr: Some("127.0.0.1:0".parse().expect("addr")),
        ..Default::default()
    };
    let m = Manager::new(client, cfg)
        .with_leader_client(Client::try_from(config).expect("leader client"))
        .with_fence(fence)
        .with_operator(Arc::new(WidgetOperator {
            identity: identity.into(),
        }));
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (addr_tx, addr_rx) = oneshot::channel::<SocketAddr>();
    let run = tokio::spawn(m.run(
        async move {
            let _ = stop_rx.await;
        },
        move |addrs| {
            let _ = addr_tx.send(addrs[0]);
        },
    ));
    (stop_tx, run, addr_rx.await.expect("bound"))
}

async fn all_reconciled_by(client: &Client, ns: &str, names: &[&str], by: &str) -> Option<()> {
    for n in names {
        let v = reconciled_by(client, ns, n).await;
        if v.as_deref() != Some(by) {
            return None;
        }
    }
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_keeps_its_caches_synced_writes_nothing_and_leads_without_a_list() {
    let WidgetEnv { cp, admin, ns } = widget_env("le-warm").await;
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);

    let a_seen = Requests::default();
    let (stop_a, run_a, _) = replica(cp, &ns, "a", &a_seen).await;
    eventually(20, || async {
        (lease_holder(&admin, &ns, "widgets").await.as_deref() == Some("a")).then_some(())
    })
    .await
    .expect("a leads");
    for n in ["w1", "w2"] {
        widgets
            .create(&PostParams::default(), &widget(&ns, n, "x", 0))
            .await
            .expect("create");
    }
    eventually(20, || all_reconciled_by(&admin, &ns, &["w1", "w2"], "a"))
        .await
        .expect("a reconciles");

    let b_seen = Requests::default();
    let (stop_b, run_b, b_probe) = replica(cp, &ns, "b", &b_seen).await;
    eventually(20, || async {
        let (code, body) = http_get(b_probe, "/readyz").await.ok()?;
        (code == 200 && body.contains("standby: caches synced")).then_some(())
    })
    .await
    .expect("b's caches synced while it waits for the lease");
    let lists_before_leading = b_seen.widget_lists();
    assert!(
        lists_before_leading >= 1,
        "b listed its widgets as a standby"
    );

    // A change while b stands by: a reconciles it, b's cache follows, b writes nothing.
    widgets
        .create(&PostParams::default(), &widget(&ns, "w3", "y", 0))
        .await
        .expect("create");
    eventually(20, || {
        all_reconciled_by(&admin, &ns, &["w1", "w2", "w3"], "a")
    })
    .await
    .expect("a reconciles w3");
    assert_eq!(b_seen.writes(), 0, "a standby sends no mutating request");

    // a stops and releases the lease: b leads, and reconciles every widget (its identity is
    // part of what it applies) from the caches it kept — without listing widgets again.
    let _ = stop_a.send(());
    run_a.await.expect("join").expect("a stopped cleanly");
    eventually(20, || {
        all_reconciled_by(&admin, &ns, &["w1", "w2", "w3"], "b")
    })
    .await
    .expect("b took over");
    assert_eq!(
        lease_holder(&admin, &ns, "widgets").await.as_deref(),
        Some("b")
    );
    assert!(b_seen.writes() > 0, "b writes once it leads");
    assert_eq!(
        b_seen.widget_lists(),
        lists_before_leading,
        "b listed widgets again after taking the lease: a cold start"
    );
    let _ = stop_b.send(());
    run_b.await.expect("join").expect("b stopped cleanly");
}
