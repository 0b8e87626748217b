//! Sharded, a member that loses its membership Lease keeps its caches, on the real API server.
//!
//! Two members, each a process of its own (this test binary started again on an ignored
//! test). Member b reports on its stdout, one `WARM …` line each, every LIST its operators'
//! client sends (a counting layer above its connection pool) and every write of its
//! reconciles. b is paused (SIGSTOP) past its lease: the sharder takes its membership Lease
//! over and moves its widgets to a (relabelled: they leave b's label-selected caches). b is
//! resumed: it finds its Lease lost and stands by, its watches running; once the sharder has
//! let the Lease go, b holds it again, widgets are placed on it again and it reconciles them —
//! without having listed anything since the pause but its share (a metadata LIST of the
//! widgets labelled with it, as each term begins), and no widget read alone.
mod common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::manager::Operator;
use common::*;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;

const CHILD: &str = "BOSUN_TEST_WARM_MEMBER";
/// Set in the member whose LISTs and writes are reported.
const REPORTING: &str = "BOSUN_TEST_WARM_MEMBER_REPORTS";
const LEASE: &str = "warmshard";
const OPERATOR: &str = "warmrec";
const SHARD: &str = "shard.bosun.dev/warmrec";
const CHILD_LABEL: &str = "bosun-test/warmrec";
const WIDGETS: usize = 12;

fn report(line: &str) {
    if std::env::var_os(REPORTING).is_some() {
        println!("WARM {line}");
    }
}

struct RecCtx {
    identity: String,
    children: OwnedConfigMaps,
}

async fn reconcile(w: Arc<Widget>, ctx: Arc<RecCtx>) -> Result<Action, WidgetError> {
    let child = owned_configmap(&w, "-child", CHILD_LABEL, &[("writer", &ctx.identity)]);
    ctx.children.apply(&child).await?;
    report(&format!("reconciled {}", w.name_any()));
    Ok(Action::requeue(Duration::from_millis(500)))
}

/// Applies each widget's child ConfigMap (naming the writer) and comes back soon.
fn warm_recorder(identity: String) -> Arc<dyn Operator> {
    widget_controller(
        OPERATOR,
        move |client, ns| {
            owning_configmaps(client, ns, CHILD_LABEL, "warmrec-child", |children| {
                RecCtx {
                    identity: identity.clone(),
                    children,
                }
            })
        },
        reconcile,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "not a test on its own: a member that a_member_that_lost_its_lease_stays_warm starts and pauses"]
async fn warm_member_process() {
    let (config, ns, identity, metrics) = replica_spec(CHILD).await;
    // As `bosun run --sharding` builds it, the operators' LISTs counted on their way to the
    // fence.
    let lists = layers::Observe::new(share_or_list);
    ShardedMember::new(&config, LEASE, &ns, &identity)
        .concurrency(4)
        .metrics(metrics)
        .layered(lists)
        .manager()
        .expect("member")
        .with_operator(warm_recorder(identity))
        .run(bosun_runtime::manager::shutdown_signal(), |_| {})
        .await
        .expect("manager");
}

/// Reports a LIST of widgets or ConfigMaps as `list …`, except the member's read of its share
/// as a term begins (`share widgets`: its selector asks for no drain label, no cache's does),
/// and a GET of one widget as `get widget`.
fn share_or_list(method: &http::Method, uri: &http::Uri) {
    let share = uri.query().unwrap_or("").contains("%21drain.bosun.dev");
    for r in ["widgets", "configmaps"] {
        if layers::is_list(method, uri, r) {
            report(&format!("{} {r}", if share { "share" } else { "list" }));
        }
    }
    let watch = uri.query().unwrap_or("").contains("watch=");
    let one = uri
        .path()
        .rsplit_once('/')
        .is_some_and(|(collection, _)| collection.ends_with("/widgets"));
    if method == http::Method::GET && one && !watch {
        report("get widget");
    }
}

fn member(
    kubeconfig: &std::path::Path,
    ns: &str,
    name: &str,
    reports: bool,
) -> tokio::process::Child {
    let mut cmd = replica_command(
        "warm_member_process",
        CHILD,
        kubeconfig,
        ns,
        name,
        free_addr(),
    );
    if reports {
        cmd.env(REPORTING, "1").stdout(Stdio::piped());
    }
    cmd.spawn().expect("spawn a member")
}

/// Each widget's member, by the shard label.
async fn placement(widgets: &Api<Widget>) -> Option<BTreeMap<String, String>> {
    let list = widgets.list(&ListParams::default()).await.ok()?;
    list.items
        .iter()
        .map(|w| Some((w.name_any(), w.labels().get(SHARD)?.clone())))
        .collect()
}

/// The widgets placed on `who`, once every widget is placed.
async fn placed_on(widgets: &Api<Widget>, who: &str) -> Option<Vec<String>> {
    let p = placement(widgets).await?;
    Some(
        p.into_iter()
            .filter(|(_, m)| m == who)
            .map(|(w, _)| w)
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_lost_its_lease_stays_warm() {
    let WidgetEnv { cp, admin, ns } = widget_env("shard-warm").await;
    let kubeconfig = cp.kubeconfig().to_path_buf();
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), &ns);
    // At least one widget of each member: b must hold some.
    create_widgets_spread(
        &widgets,
        WIDGETS,
        &["a", "b"],
        |name| widget(&ns, &name, "x", 0),
        "w",
    )
    .await;
    let _a = member(&kubeconfig, &ns, "a", false);
    let mut b = member(&kubeconfig, &ns, "b", true);
    let report = Report::default();
    let reading = report.read(&mut b, "WARM ");
    let before = eventually(90, || async {
        let mine = placed_on(&widgets, "b").await?;
        let lines = report.lines();
        let all_reconciled = !mine.is_empty()
            && mine
                .iter()
                .all(|w| lines.contains(&format!("reconciled {w}")));
        all_reconciled.then_some(mine)
    })
    .await
    .expect("b holds some widgets and reconciles them");
    let lines = report.lines();
    assert!(
        lines.iter().any(|l| l == "list widgets") && lines.iter().any(|l| l == "list configmaps"),
        "b listed its widgets and their children (the count works): {lines:?}"
    );

    // Paused past its lease: its widgets go to a.
    let b_pid = b.id().expect("pid");
    signal(b_pid, "-STOP");
    eventually(90, || async {
        placed_on(&widgets, "b")
            .await
            .filter(|m| m.is_empty())
            .map(|_| ())
    })
    .await
    .expect("the sharder moved b's widgets to a");
    let paused_at = report.lines().len();

    // Resumed: b stands by, holds its Lease again, gets widgets placed on it and works them.
    signal(b_pid, "-CONT");
    let after = eventually(120, || async {
        let mine = placed_on(&widgets, "b").await?;
        let since: Vec<String> = report.lines().split_off(paused_at);
        let all_reconciled = !mine.is_empty()
            && mine
                .iter()
                .all(|w| since.contains(&format!("reconciled {w}")));
        all_reconciled.then_some(mine)
    })
    .await
    .expect("b holds widgets again and reconciles them");
    let since = report.lines().split_off(paused_at);
    println!("b's widgets before the pause {before:?}, after {after:?}");
    let lists: Vec<&String> = since.iter().filter(|l| l.starts_with("list ")).collect();
    assert_eq!(
        lists,
        Vec::<&String>::new(),
        "b listed again after it lost its membership Lease: a cold standby"
    );
    // Its new term began with one read of its share, not a read of each widget.
    assert!(
        since.iter().any(|l| l == "share widgets"),
        "b's new term began without a read of its share: {since:?}"
    );
    let singles = report.lines().iter().filter(|l| *l == "get widget").count();
    assert_eq!(singles, 0, "b read widgets one by one");
    assert!(matches!(b.try_wait(), Ok(None)), "b stayed up");
    let _ = b.kill().await;
    reading.abort();
}
