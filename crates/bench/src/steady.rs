//! The rows each bosun flavour case (Helm, Ansible) ends with once its CRs converged: the
//! steady RSS and idle CPU of the process that converged them, then a restart of the same
//! command and its mutating requests until idle.
use std::time::Duration;

use bosun_bench::measure::{mutating, Counts, Operator};
use bosun_testenv::ControlPlane;

use crate::{Args, Row};

/// `op` has converged `n` CRs of `flavour` ("helm", "ansible": the rows' names and the name
/// `bosun run` is started under again, with `extra`). Returns (steady, restart).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn steady_then_restart(
    op: Operator,
    flavour: &str,
    extra: &[String],
    args: &Args,
    cp: &ControlPlane,
    client: &kube::Client,
    n: usize,
    resources: &[&str],
) -> anyhow::Result<(Row, Row)> {
    op.wait_idle(Duration::from_secs(3)).await;
    // Past the first resync's burst, then 30 s of idle.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let cpu0 = op.cpu_seconds();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let idle_cpu = op.cpu_seconds() - cpu0;
    let (anon, file) = op.rss_split_mb();
    let steady = Row {
        case: format!("{flavour} steady RSS and idle CPU (bosun)"),
        n,
        peak_rss_mb: op.rss_mb(),
        cpu_seconds: idle_cpu,
        note: format!(
            "VmRSS idle, of the bosun process alone: {anon:.1} MB anonymous + {file:.1} MB of \
             the binary's pages; CPU seconds over 30 s idle ({:.1} % of a core)",
            idle_cpu / 30.0 * 100.0
        ),
        ..Default::default()
    };
    op.stop().await;
    let before = Counts::read(cp, client).await?;
    let op = Operator::bosun_with(
        &args.bosun,
        cp.kubeconfig(),
        extra,
        flavour,
        args.concurrency,
    )
    .await?;
    op.wait_ready().await;
    op.wait_idle(Duration::from_secs(3)).await;
    let after = Counts::read(cp, client).await?;
    let writes = mutating(&before, &after, resources);
    let restart = Row {
        case: format!("{flavour} restart (bosun)"),
        n,
        seconds: op.uptime(),
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        note: format!(
            "{:.0} mutating requests until idle",
            writes.values().copied().fold(0.0, |a, b| a + b)
        ),
        writes,
        ..Default::default()
    };
    op.stop().await;
    Ok((steady, restart))
}
