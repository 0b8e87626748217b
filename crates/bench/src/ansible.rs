//! g. The Ansible flavour: `bosun run --watches` with seed 000's Ansible BookStore (its role,
//! run by the native engine), N custom resources (one per namespace), against the raw write
//! floor of the same objects and statuses; restart writes; steady RSS; CPU while idle. The
//! set-up and the floor are `bosun_ansible_operator::bench`'s (which also runs in-process).
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_bench::ansible_flavour::{self as bench, BenchConfig};
use bosun_testenv::{ControlPlane, Options};
use kube::api::{Api, DynamicObject};
use kube::ResourceExt;

use crate::{Args, Row};
use bosun_bench::measure::{mutating, server_cpu, wait_watched, Counts, Operator};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const RESOURCES: [&str; 3] = ["deployments", "services", "bookstores"];

/// The resources whose requests (reads included) the converge row lists.
const REQUESTED: [&str; 4] = ["deployments", "services", "bookstores", "events"];

/// Every request (reads too) between two readings on `resources`, as "VERB resource[/sub]=n"
/// (the harness's own polls of the CRs included: a LIST every 250 ms).
fn all_requests(before: &Counts, after: &Counts, resources: &[&str]) -> String {
    let mut out = Vec::new();
    for verb in [
        "GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "APPLY", "DELETE",
    ] {
        for res in resources {
            for sub in ["", "status"] {
                let d = after.get(verb, res, sub) - before.get(verb, res, sub);
                if d > 0.0 {
                    let sub = if sub.is_empty() {
                        String::new()
                    } else {
                        format!("/{sub}")
                    };
                    out.push(format!("{verb} {res}{sub}={d:.0}"));
                }
            }
        }
    }
    out.join(" ")
}

pub async fn case_ansible(args: &Args, n: usize) -> anyhow::Result<Vec<Row>> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    let mut cfg = BenchConfig::seed(&repo(), n);
    cfg.concurrency = u16::try_from(args.concurrency).unwrap_or(u16::MAX);
    let ops = bench::operators(&cfg)?;
    let (ar, names) = bench::populate(&client, &cfg, &ops).await?;
    drop(ops);
    let extra = vec![
        format!("--watches={}", cfg.watches.display()),
        "--ansible-engine=native".to_string(),
    ];
    let before = Counts::read(&cp, &client).await?;
    let server0 = server_cpu(&cp);
    let t0 = Instant::now();
    let op = Operator::bosun_with(
        &args.bosun,
        cp.kubeconfig(),
        &extra,
        "ansible",
        args.concurrency,
    )
    .await?;
    let ready_after = op.wait_ready().await;
    let crs = Api::<DynamicObject>::all_with(client.clone(), &ar);
    wait_watched(crs, n, Duration::from_secs(1800), |o| {
        bench::successful(o) && o.namespace().is_some_and(|ns| names.contains(&ns))
    })
    .await?;
    let from_start = t0.elapsed().as_secs_f64();
    let seconds = from_start - ready_after;
    let server_s = server_cpu(&cp) - server0;
    let after = Counts::read(&cp, &client).await?;
    let requests = all_requests(&before, &after, &REQUESTED);
    let converge = Row {
        ratio: None,
        case: "ansible role converge (bosun)".into(),
        n,
        seconds,
        peak_rss_mb: op.peak_rss_mb(),
        cpu_seconds: op.cpu_seconds(),
        writes: mutating(&before, &after, &RESOURCES),
        note: format!(
            "seed BookStore role, native engine, one CR per namespace; from caches synced; \
             {from_start:.2} s from start; requests by the operator and harness: {requests}; \
             API server + etcd CPU from start {server_s:.2} s"
        ),
    };
    let (steady, restart) = crate::steady::steady_then_restart(
        op, "ansible", &extra, args, &cp, &client, n, &RESOURCES,
    )
    .await?;

    // The floor: each converged CR's objects created afresh in a floor namespace and its
    // status written, by a bare client, on the same control plane.
    let config = cp.config().await?;
    let plan = bench::floor_plan(&client, &cfg, &ar, &names).await?;
    let server0 = server_cpu(&cp);
    let (floor_s, floor_writes) = bench::floor_send(plan, config, &cfg).await?;
    let floor_server_s = server_cpu(&cp) - server0;
    let floor = Row {
        case: "ansible raw write floor".into(),
        n,
        seconds: floor_s,
        ratio: Some(seconds / floor_s),
        note: format!(
            "{floor_writes} writes: the same objects + a status each; bosun/floor = {:.2}; \
             API server + etcd CPU {floor_server_s:.2} s",
            seconds / floor_s
        ),
        ..Default::default()
    };
    Ok(vec![converge, floor, restart, steady])
}
