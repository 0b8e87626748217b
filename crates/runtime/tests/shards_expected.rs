//! `bosun run --shards 2`, on the real API server: a rollout of two members that start one
//! after the other starts balanced. Member a starts alone, expecting two members; it holds
//! the sharder Lease and decides rounds, but places no widget while it is the only member.
//! Member b joins: each widget is then labelled once, with its owner among a and b — none is
//! placed on a and moved to b (a test watches every shard label each widget ever carried).
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bosun_runtime::manager::{Manager, Operator};
use common::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::ResourceExt;

const LEASE: &str = "shardsexp";
const OPERATOR: &str = "expecting";
const SHARD: &str = "shard.bosun.dev/expecting";
const WIDGETS: usize = 12;

/// Reconciles nothing but its place: the test looks at the labels the sharder writes.
fn operator() -> Arc<dyn Operator> {
    widget_controller(
        OPERATOR,
        |client, ns| owning_configmaps(client, ns, "bosun-test/expecting", "expecting", |c| c),
        |_w: Arc<Widget>, _c: Arc<OwnedConfigMaps>| async {
            Ok::<_, WidgetError>(Action::await_change())
        },
    )
}

fn member(config: &kube::Config, ns: &str, identity: &str, addr: std::net::SocketAddr) -> Manager {
    ShardedMember::new(config, LEASE, ns, identity)
        .expected(2)
        .metrics(addr)
        .manager()
        .expect("member")
        .with_operator(operator())
}

/// The sharder's decided rounds of this test's shard label, from a member's `/metrics`.
async fn decided_rounds(addr: std::net::SocketAddr) -> f64 {
    let series = format!("bosun_shard_rounds_total{{label=\"{SHARD}\",work=\"decided\"}}");
    match http_get(addr, "/metrics").await {
        Ok((200, text)) => series_value(&text, &series).unwrap_or(0.0),
        _ => 0.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollout_of_two_places_each_widget_once() {
    let env = widget_env("shards-expected").await;
    let ns = env.ns.clone();
    let widgets: Api<Widget> = Api::namespaced(env.admin.clone(), &ns);
    // At least one widget of each member: the test asserts both get some.
    let made = create_widgets_spread(
        &widgets,
        WIDGETS,
        &["a", "b"],
        |name| widget(&ns, &name, "v", 0),
        "w",
    )
    .await
    .len();

    // Every distinct shard label each widget carried, in the order the watch showed them.
    let history: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let seen = history.clone();
    let watch = tokio::spawn(
        watcher::watcher(widgets.clone(), watcher::Config::default()).for_each(move |ev| {
            if let Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) = ev {
                if let Some(m) = w.labels().get(SHARD) {
                    let mut h = seen.lock().expect("history");
                    let labels = h.entry(w.name_any()).or_default();
                    if labels.last() != Some(m) {
                        labels.push(m.clone());
                    }
                }
            }
            async {}
        }),
    );

    let config = env.cp.config().await.expect("config");
    let (a_addr, b_addr) = (free_addr(), free_addr());
    let (stop_a, run_a) = run_until_stopped(member(&config, &ns, "a", a_addr));
    // a leads the placement and has decided rounds, alone.
    let leases: Api<Lease> = Api::namespaced(env.admin.clone(), &ns);
    let sharder = format!("{LEASE}-sharder");
    let mut waited = 0u32;
    loop {
        let holder = leases
            .get_opt(&sharder)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        if holder.as_deref() == Some("a") && decided_rounds(a_addr).await >= 2.0 {
            break;
        }
        waited += 1;
        assert!(waited < 600, "a never led the placement");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        history.lock().expect("history").is_empty(),
        "a placed widgets while it was alone of the two expected: {:?}",
        history.lock().expect("history")
    );

    let (stop_b, run_b) = run_until_stopped(member(&config, &ns, "b", b_addr));
    let mut polls = 0u32;
    loop {
        let placed = history.lock().expect("history").len();
        if placed == made {
            break;
        }
        polls += 1;
        assert!(polls < 1200, "only {placed} of {made} widgets placed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Each widget's current label, read once all are placed: none was moved since.
    let now: BTreeMap<String, String> = widgets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .iter()
        .filter_map(|w| Some((w.name_any(), w.labels().get(SHARD)?.clone())))
        .collect();
    let h = history.lock().expect("history").clone();
    for (w, labels) in &h {
        assert_eq!(labels.len(), 1, "{w} was placed, then moved: {labels:?}");
        assert_eq!(Some(&labels[0]), now.get(w), "{w}");
    }
    let on_b = h.values().filter(|l| l[0] == "b").count();
    assert!(
        on_b > 0 && on_b < made,
        "placed over both members: {on_b} of {made} on b"
    );
    println!("placed once each: {on_b} of {made} on b");

    watch.abort();
    let _ = stop_b.send(());
    let _ = stop_a.send(());
    run_b.await.expect("join b").expect("b");
    run_a.await.expect("join a").expect("a");
}
