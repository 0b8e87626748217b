//! A sharded member's term begins with one read of its share, on the real API server.
//!
//! The member is this test process: a manager with sharding and the widget operator, its
//! operators' client counted. As its first term begins it lists its share once (a metadata
//! LIST of the widgets labelled with it and asking no hand-off, no `resourceVersion`: a
//! quorum read). The sharder places the widgets on it after that read: each one's cached
//! version is newer than the read, so none is read alone (no GET of a single widget) before
//! its first reconcile. Before, a member's first term read nothing, and a later one GET each
//! object of its share.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bosun_testenv::{shared, test_namespace};
use common::*;
use kube::api::Api;

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
        .observed(reads.layer())
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
