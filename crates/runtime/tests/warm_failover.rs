//! A leader that loses its lease keeps its caches: paused (SIGSTOP) past its renew deadline
//! while it works, it wakes to find the lease taken, goes back to standby at once — its
//! reconcile in flight aborted, no write — and when it wins the lease again it reconciles
//! what changed meanwhile without listing anything again, and leaves the widgets that had
//! converged alone. On the real API server.
//!
//! The leader is a process of its own (this test binary started again on an ignored test) so
//! it can be stopped whole, as a stalled node or VM stops it. It reports on its stdout, one
//! `WARM …` line each, every LIST its operators' client sends (a request counter right above
//! the connection pool), every reconcile it starts, every write it makes and every reconcile
//! dropped before its end. The other replica is the test itself, holding the Lease with the
//! runtime's own elector: while it does, nothing else reconciles, so the object it creates
//! then waits for the paused leader's return.
mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::apply::Applier;
use bosun_runtime::cache::ChildCache;
use bosun_runtime::client::{client_with, Pool};
use bosun_runtime::fence::Fence;
use bosun_runtime::leader::{LeaderConfig, LeaderElector};
use bosun_runtime::manager::{Manager, ManagerConfig, Operator};
use bosun_runtime::{Scope, Wiring};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};

/// What the leader process reads: kubeconfig, namespace, identity, probe address.
const CHILD: &str = "BOSUN_TEST_WARM_LEADER";
const LEASE: &str = "warm";
const LABEL_KEY: &str = "bosun-test/warm";
const LABEL: &str = "bosun-test/warm=yes";
/// Widgets that converge before the pause.
const CONVERGED: usize = 30;

/// Prints one report line of the leader process.
fn report(line: &str) {
    println!("WARM {line}");
}

struct WarmCtx {
    client: Client,
    applier: Applier,
    cms: ChildCache<ConfigMap>,
    identity: String,
    ticks: AtomicU64,
}

/// Whether the first reconcile of `hang` in this process has started.
static HUNG: AtomicBool = AtomicBool::new(false);

/// Reports a reconcile dropped before its end.
struct Dropped(Option<String>);

impl Drop for Dropped {
    fn drop(&mut self) {
        if let Some(name) = self.0.take() {
            report(&format!("aborted {name}"));
        }
    }
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<WarmCtx>) -> Result<Action, WidgetError> {
    let name = w.name_any();
    report(&format!("start {name}"));
    if w.spec.value == "hang" && !HUNG.swap(true, Ordering::SeqCst) {
        let _dropped = Dropped(Some(name.clone()));
        std::future::pending::<()>().await;
    }
    let ns = w.namespace().unwrap_or_default();
    let tick = w.spec.value == "tick";
    let mut data = vec![("writer".to_string(), ctx.identity.clone())];
    if tick {
        // Every write of a ticker changes its ConfigMap; the others' are written once.
        let n = ctx.ticks.fetch_add(1, Ordering::SeqCst);
        data.push(("tick".to_string(), n.to_string()));
    }
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-w")),
            namespace: Some(ns.clone()),
            labels: Some([(LABEL_KEY.to_string(), "yes".to_string())].into()),
            // A ticker's writes are paced by its timer alone (its ConfigMap is not its
            // child, whose every change would trigger it again): the fewer writes in flight,
            // the rarer a pause lands between the fence's check and the socket, the gap no
            // client can close (see `fence`).
            owner_references: if tick {
                None
            } else {
                w.controller_owner_ref(&()).map(|o| vec![o])
            },
            ..Default::default()
        },
        data: Some(data.into_iter().collect()),
        ..Default::default()
    };
    apply_child(&ctx.client, &ctx.applier, &ctx.cms, &cm).await?;
    report(&format!("wrote {name}"));
    Ok(if tick {
        Action::requeue(Duration::from_millis(200))
    } else {
        Action::await_change()
    })
}

/// Widgets whose value is `tick` are written again and again; `hang` hangs its first
/// reconcile before it writes (it is in flight when the leader is paused); any other is
/// written once. Each write is a ConfigMap naming the writer.
fn warm(identity: String) -> Arc<dyn Operator> {
    widget_controller(
        "warm",
        move |client, ns| {
            let (cms, cm_stream) =
                ChildCache::<ConfigMap>::watch(client.clone(), ns, LABEL, |c| c.data = None);
            let state = Arc::new(WarmCtx {
                client: client.clone(),
                applier: Applier::new(MANAGER),
                cms: cms.clone(),
                identity: identity.clone(),
                ticks: AtomicU64::new(0),
            });
            Wiring::new(widget_primary(client, ns), state).owns(cm_stream, cms.synced())
        },
        reconcile,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "not a test on its own: the leader process that a_leader_that_lost_its_lease_stays_warm starts and pauses"]
async fn warm_leader_process() {
    let (config, ns, identity, probe) = replica_spec(CHILD).await;
    let fence = Fence::new();
    // As `bosun run --leader-elect` builds it (the fence right above the pool), counted.
    let lists =
        layers::Observe::lists(&["widgets", "configmaps"], |r| report(&format!("list {r}")));
    let client = fenced_client(config.clone(), &fence, &lists);
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.clone()]),
        leader: Some(LeaderConfig::new(LEASE, &ns, &identity)),
        probe_addr: Some(probe),
        concurrency: 4,
        ..Default::default()
    };
    let m = Manager::new(client, cfg)
        .with_leader_client(client_with(config, None, Pool::default()).expect("client"))
        .with_fence(fence)
        .with_operator(warm(identity));
    m.run(std::future::pending::<()>(), |_| {})
        .await
        .expect("manager");
}

/// A write of the test's own, in the writers' order: `writer` names it.
async fn mark(client: &Client, ns: &str, name: &str) {
    let cm = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "labels": { LABEL_KEY: "yes" } },
        "data": { "writer": "t" },
    });
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::apply("bosun-test-t").force(),
            &Patch::Apply(&cm),
        )
        .await
        .expect("mark");
}

/// The LISTs the leader process reported.
fn lists(report: &Report) -> usize {
    report
        .lines()
        .iter()
        .filter(|l| l.starts_with("list "))
        .count()
}

async fn written_by(client: &Client, ns: &str, widget: &str) -> Option<String> {
    configmap_value(client, ns, &format!("{widget}-w"), "writer").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_that_lost_its_lease_stays_warm() {
    let WidgetEnv { cp, admin, ns } = widget_env("le-warm-lost").await;
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    for (name, value) in [
        ("tick-0", "tick"),
        ("tick-1", "tick"),
        ("tick-2", "tick"),
        ("hang", "hang"),
    ] {
        widgets
            .create(&PostParams::default(), &widget(&ns, name, value, 0))
            .await
            .expect("create");
    }
    // Converged widgets: written once, then nothing changes for them.
    create_widgets(&widgets, "conv-", "x", CONVERGED).await;
    let writers = Writers::default();
    let watch = writers.watch(&admin, &ns, LABEL);

    // a: the leader, in a process of its own, its reports read here.
    let a_probe: SocketAddr = free_addr();
    let mut a = replica_command(
        "warm_leader_process",
        CHILD,
        cp.kubeconfig(),
        &ns,
        "a",
        a_probe,
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn the leader");
    let a_pid = a.id().expect("pid");
    let report = Report::default();
    let reading = report.read(&mut a, "WARM ");
    eventually(60, || async {
        let lines = report.lines();
        let converged = (0..CONVERGED).all(|i| lines.contains(&format!("wrote conv-{i}")));
        (converged && writers.count("a") >= 8 && report.position("start hang").is_some())
            .then_some(())
    })
    .await
    .expect("a leads, writes, converges, and a reconcile of hang is in flight");
    let lists_while_leading = lists(&report);
    assert!(
        lists_while_leading >= 2,
        "a listed its widgets and ConfigMaps (the count works): {:?}",
        report.lines()
    );

    // Pause a mid-work; t (the test) takes the lease once it has expired, as a standby would.
    signal(a_pid, "-STOP");
    let other = cp.client().await.expect("client");
    let mut t = LeaderElector::new(other, LeaderConfig::new(LEASE, &ns, "t")).expect("elector");
    tokio::time::timeout(Duration::from_secs(60), t.acquire())
        .await
        .expect("t takes the expired lease");
    mark(&admin, &ns, "t-took").await;
    let (release_t, released) = tokio::sync::oneshot::channel::<()>();
    let holding = tokio::spawn(async move {
        tokio::select! {
            _ = t.hold() => panic!("t lost the lease it holds for the test"),
            _ = released => {}
        }
        t.release().await.expect("t releases the lease");
    });

    // Resume a: it finds the lease lost and stands by, its reconcile in flight aborted.
    signal(a_pid, "-CONT");
    eventually(30, || in_role(a_probe, true))
        .await
        .expect("a went back to standby");
    let aborted = eventually(30, || async { report.position("aborted hang") })
        .await
        .unwrap_or_else(|| {
            panic!(
                "(d) the reconcile in flight at the loss was not aborted: {:?}",
                report.lines()
            )
        });

    // A new object while a stands by and t holds the lease: nobody reconciles it yet.
    widgets
        .create(&PostParams::default(), &widget(&ns, "late", "late", 0))
        .await
        .expect("create late");
    assert_eq!(lease_holder(&admin, &ns, LEASE).await.as_deref(), Some("t"));

    // t steps down; a wins the lease back and works what waited for it.
    mark(&admin, &ns, "t-leaves").await;
    let _ = release_t.send(());
    holding.await.expect("t released");
    eventually(60, || async {
        (lease_holder(&admin, &ns, LEASE).await.as_deref() == Some("a")).then_some(())
    })
    .await
    .expect("a leads again");
    eventually(60, || async {
        (written_by(&admin, &ns, "late").await.as_deref() == Some("a")).then_some(())
    })
    .await
    .expect("(c) a reconciles the widget created while it stood by");
    let lines = report.lines();
    println!("a's report: {lines:?}");
    // (b) The watches of the widgets and their ConfigMaps went on: no list since the loss.
    let lists_after: Vec<&String> = lines[aborted..]
        .iter()
        .filter(|l| l.starts_with("list "))
        .collect();
    assert_eq!(
        lists_after,
        Vec::<&String>::new(),
        "(b) a listed again after it lost the lease: a cold standby"
    );
    assert_eq!(lists(&report), lists_while_leading, "(b) no list at all");
    // (c) The new widget was reconciled as soon as a led again: no list before it.
    let late = report.position("start late").expect("late started");
    assert!(
        late > aborted && lines[aborted..late].iter().all(|l| !l.starts_with("list ")),
        "(c) a listed before it reconciled the widget created while it stood by: {lines:?}"
    );
    eventually(60, || async {
        (written_by(&admin, &ns, "hang").await.as_deref() == Some("a")).then_some(())
    })
    .await
    .expect("the aborted reconcile's widget is reconciled in the next term");
    // a writes again: whatever it had on its way has reached the server by then.
    let seen = writers.count("a");
    eventually(30, || async {
        (writers.count("a") >= seen + 4).then_some(())
    })
    .await
    .expect("a goes on writing");
    // (e) Nothing changed for the converged widgets: the next term does not reconcile them
    // again (a cold standby's list queues every one of them).
    let since_loss = report.lines().split_off(aborted);
    let again: Vec<&String> = since_loss
        .iter()
        .filter(|l| l.starts_with("start conv-"))
        .collect();
    println!(
        "reconciles started since the loss: {} (of converged widgets: {})",
        since_loss
            .iter()
            .filter(|l| l.starts_with("start "))
            .count(),
        again.len()
    );
    assert_eq!(
        again,
        Vec::<&String>::new(),
        "(e) converged widgets reconciled again after the lost term"
    );

    let order = runs(&writers.snapshot());
    println!("writers in order: {order:?}");
    // (a) Between t's first and last write, none of a's.
    assert_eq!(
        order,
        ["(list)", "a", "t", "a"],
        "(a) a wrote while it did not lead"
    );
    assert!(matches!(a.try_wait(), Ok(None)), "a stayed up");
    watch.abort();
    let _ = a.kill().await;
    reading.abort();
}
