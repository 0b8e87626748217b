//! bosun's heap profile (`bench/heap`): where the BookStore operator's memory goes at N
//! BookStores, measured with a counting allocator (`bosun_runtime::heap::Counting`, this
//! process's global allocator) on a fresh test control plane.
//!
//! 1. **converge**: the BookStore operator (the same `Manager` and operator `bosun run`
//!    starts) runs in this process over N fresh BookStores until idle: its peak and its
//!    steady live heap;
//! 2. **restart**: a second operator over the converged objects: its peak (the initial
//!    LISTs) and its steady live heap;
//! 3. **per cache**: each cache the operator holds, built alone as the operator builds it,
//!    against the same objects: live bytes per object, and the peak while its LIST is parsed.
//!    Alternatives (a full typed cache, a metadata-only one) are measured beside them.
//!
//! Live bytes are what the program holds; RSS adds the allocator's overhead and
//! fragmentation, thread stacks and the binary's pages (the `VmRSS` shown for reference).
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_bench::measure::{self, install_crd, wait_until};
use bosun_bookstore::operator::{keep_claim, slim_meta, strip_deployment, strip_statefulset};
use bosun_bookstore::{BookStore, BookStoreOperator};
use bosun_runtime::apply::Applier;
use bosun_runtime::cache::{
    reflect_with, ChildCache, MetaCache, ObjectStream, Packed, PackedCache, Synced,
};
use bosun_runtime::heap;
use bosun_runtime::manager::{Manager, ManagerConfig};
use bosun_testenv::{ControlPlane, Options};
use clap::Parser;
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

#[global_allocator]
static ALLOC: heap::Counting = heap::Counting;

#[derive(Parser)]
#[command(about = "heap profile of the BookStore operator at N BookStores")]
struct Args {
    #[arg(long, default_value_t = 1000)]
    n: usize,
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
}

const NS: &str = "heap";

fn kb(b: usize) -> f64 {
    b as f64 / 1024.0
}

fn vm(key: &str) -> f64 {
    measure::proc_status(std::process::id(), key) / 1024.0
}

/// A sum of one counter family in the manager's metrics text.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs the BookStore operator in this process until it is ready and its reconcile count has
/// been still for 3 s; returns (peak live bytes from start, live bytes when idle, reconciles)
/// and stops it.
async fn operator_run(client: &Client, concurrency: u16) -> anyhow::Result<(usize, usize, f64)> {
    heap::reset_peak();
    let manager = Manager::new(
        client.clone(),
        ManagerConfig {
            concurrency,
            ..Default::default()
        },
    )
    .with_operator(Arc::new(BookStoreOperator));
    let (metrics, health) = (manager.metrics(), manager.health());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        manager
            .run(
                async {
                    let _ = stopped.await;
                },
                |_| {},
            )
            .await
    });
    let start = Instant::now();
    while health.readiness().is_err() {
        anyhow::ensure!(start.elapsed() < Duration::from_secs(300), "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (mut last, mut since) = (-1.0, Instant::now());
    loop {
        let text = metrics.encode();
        let done = metric(&text, "controller_runtime_reconcile_total{");
        let active = metric(&text, "controller_runtime_active_workers{");
        if done != last || active > 0.0 || done <= 0.0 {
            (last, since) = (done, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(3) {
            break;
        }
        anyhow::ensure!(start.elapsed() < Duration::from_secs(900), "never idle");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (peak, live) = (heap::peak(), heap::live());
    let _ = stop.send(());
    task.await??;
    Ok((peak, live, last))
}

/// Live bytes once two readings 100 ms apart agree within 1 % (connection buffers and the
/// last parsed page freed), at most 5 s.
async fn settled() -> usize {
    let mut last = heap::live();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = heap::live();
        if now.abs_diff(last) * 100 <= last {
            return now;
        }
        last = now;
    }
    last
}

/// A cache, its event stream, its synced signal and how to count what it holds.
type Built<C, K> = (C, ObjectStream<K>, Synced, Box<dyn Fn(&C) -> usize>);

/// One cache built alone: live bytes it holds once synced, and the peak while it listed.
struct Line {
    what: &'static str,
    objects: usize,
    live: usize,
    peak: usize,
}

/// Builds a cache with `build`, drains its stream until synced, and measures it; the cache
/// and its watch are dropped before returning.
async fn measure<C, K, F>(what: &'static str, build: F) -> anyhow::Result<Line>
where
    K: Send + 'static,
    F: FnOnce() -> Built<C, K>,
{
    let before = heap::live();
    heap::reset_peak();
    let (cache, stream, synced, len) = build();
    // The stream is drained as a controller would: the listed objects are handed out as
    // triggers after the list; they are measured once taken and dropped.
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = taken.clone();
    let drain = tokio::spawn(stream.for_each(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        futures::future::ready(())
    }));
    anyhow::ensure!(synced.wait().await, "{what}: watch ended before its list");
    let objects = len(&cache);
    let start = Instant::now();
    while taken.load(std::sync::atomic::Ordering::Relaxed) < objects {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: triggers not taken"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let line = Line {
        what,
        objects,
        live: settled().await.saturating_sub(before),
        peak: heap::peak().saturating_sub(before),
    };
    drain.abort();
    let _ = drain.await;
    drop(cache);
    Ok(line)
}

fn child<K>((cache, stream): (ChildCache<K>, ObjectStream<K>)) -> Built<ChildCache<K>, K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Send + Sync + 'static,
{
    let synced = cache.synced().clone();
    (cache, stream, synced, Box::new(|c| c.len()))
}

fn packed<K>(
    (cache, stream): (PackedCache<K>, ObjectStream<Packed<K>>),
) -> Built<PackedCache<K>, Packed<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + serde::Serialize,
    K: std::fmt::Debug + Send + Sync + 'static,
{
    let synced = cache.synced().clone();
    (cache, stream, synced, Box::new(|c| c.len()))
}

fn meta<K>(
    (cache, stream): (MetaCache<K>, ObjectStream<kube::core::PartialObjectMeta<K>>),
) -> Built<MetaCache<K>, kube::core::PartialObjectMeta<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Send + Sync + 'static,
{
    let synced = cache.synced().clone();
    (cache, stream, synced, Box::new(|c| c.len()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let n = args.n;
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    install_crd(&client, &bosun_bookstore::api::crd()).await?;
    let bss: Api<BookStore> = Api::namespaced(client.clone(), NS);
    wait_until(Duration::from_secs(60), || async {
        Ok(bss.list(&ListParams::default().limit(1)).await.is_ok())
    })
    .await?;
    stream::iter(0..n)
        .map(|i| {
            let bss = bss.clone();
            async move {
                let bs: BookStore = serde_json::from_value(json!({"apiVersion": "charts.example.com/v1", "kind": "BookStore", "metadata": {"name": format!("store-{i}")}, "spec": {}}))?;
                bss.create(&PostParams::default(), &bs).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;

    let baseline = heap::live();
    println!("heap profile of the BookStore operator, N = {n} (live bytes: counting allocator)");
    println!(
        "process before any operator: {:.0} KB live, VmRSS {:.1} MB",
        kb(baseline),
        vm("VmRSS:")
    );

    let (peak, live, reconciles) = operator_run(&client, args.concurrency).await?;
    let converged = measure::converged(&bss.list(&ListParams::default()).await?.items);
    anyhow::ensure!(
        converged == n,
        "only {converged} of {n} BookStores converged"
    );
    println!(
        "converge: peak {:.1} MB, idle {:.1} MB live above the baseline ({reconciles} reconciles), VmRSS {:.1} MB",
        kb(peak.saturating_sub(baseline)) / 1024.0,
        kb(live.saturating_sub(baseline)) / 1024.0,
        vm("VmRSS:")
    );
    let statuses = |list: Vec<BookStore>| -> std::collections::BTreeMap<String, String> {
        list.iter()
            .map(|b| {
                (
                    b.name_any(),
                    serde_json::to_string(&b.status).unwrap_or_default(),
                )
            })
            .collect()
    };
    let before_restart = statuses(bss.list(&ListParams::default()).await?.items);
    let after_stop = heap::live();
    let (peak, live, reconciles) = operator_run(&client, args.concurrency).await?;
    let after_restart = statuses(bss.list(&ListParams::default()).await?.items);
    let changed: Vec<_> = before_restart
        .iter()
        .filter(|(k, v)| after_restart.get(*k) != Some(*v))
        .collect();
    println!("restart changed {} status(es)", changed.len());
    for (k, v) in changed.iter().take(3) {
        println!(
            "  {k}: {v}\n  now: {}",
            after_restart.get(*k).map(String::as_str).unwrap_or("")
        );
    }
    println!(
        "restart:  peak {:.1} MB, idle {:.1} MB live above the baseline ({reconciles} reconciles); {:.0} KB left after the first one stopped",
        kb(peak.saturating_sub(after_stop)) / 1024.0,
        kb(live.saturating_sub(after_stop)) / 1024.0,
        kb(after_stop.saturating_sub(baseline)),
    );
    let steady = live.saturating_sub(after_stop);

    let applier = Applier::new("bosun-bookstore");
    let c = || client.clone();
    let ns = Some(NS);
    let mut lines = vec![
        measure("bookstores (as cached: typed, no managedFields)", || {
            let (s, st, sy) = reflect_with(
                Api::<BookStore>::namespaced(c(), NS),
                (),
                Default::default(),
            );
            (
                s,
                st,
                sy,
                Box::new(|s: &kube::runtime::reflector::Store<BookStore>| s.len())
                    as Box<dyn Fn(&_) -> usize>,
            )
        })
        .await?,
        measure(
            "deployments (as cached: metadata + status, packed, fingerprint)",
            || {
                packed(PackedCache::watch_owned(
                    c(),
                    ns,
                    "",
                    strip_deployment,
                    &applier,
                ))
            },
        )
        .await?,
        measure(
            "statefulsets (as cached: + replicas, claim template, packed)",
            || {
                packed(PackedCache::watch_owned(
                    c(),
                    ns,
                    "",
                    strip_statefulset,
                    &applier,
                ))
            },
        )
        .await?,
        measure("services (as cached: metadata only, fingerprint)", || {
            meta(MetaCache::<Service>::watch_owned(
                c(),
                ns,
                "",
                slim_meta,
                &applier,
            ))
        })
        .await?,
        measure("claims (as cached: whole, labelled)", || {
            child(ChildCache::<PersistentVolumeClaim>::watch(
                c(),
                ns,
                bosun_bookstore::names::CLAIM_SELECTOR,
                keep_claim,
            ))
        })
        .await?,
    ];
    let cached: usize = lines.iter().map(|l| l.live).sum();
    lines.extend([
        measure(
            "  for comparison: deployments whole (no managedFields)",
            || {
                child(ChildCache::<Deployment>::watch(c(), ns, "", |d| {
                    d.metadata.managed_fields = None
                }))
            },
        )
        .await?,
        measure("  for comparison: deployments slimmed, unpacked", || {
            child(ChildCache::watch_owned(
                c(),
                ns,
                "",
                strip_deployment,
                &applier,
            ))
        })
        .await?,
        measure("  for comparison: statefulsets slimmed, unpacked", || {
            child(ChildCache::watch_owned(
                c(),
                ns,
                "",
                strip_statefulset,
                &applier,
            ))
        })
        .await?,
        measure("  for comparison: deployments metadata-only", || {
            meta(MetaCache::<Deployment>::watch(c(), ns, ""))
        })
        .await?,
        measure("  for comparison: statefulsets metadata-only", || {
            meta(MetaCache::<StatefulSet>::watch(c(), ns, ""))
        })
        .await?,
    ]);
    println!();
    println!(
        "{:<68} {:>7} {:>9} {:>9} {:>11}",
        "cache, built alone", "objects", "live KB", "B/object", "list peak KB"
    );
    for l in &lines {
        println!(
            "{:<68} {:>7} {:>9.0} {:>9.0} {:>11.0}",
            l.what,
            l.objects,
            kb(l.live),
            l.live as f64 / l.objects.max(1) as f64,
            kb(l.peak)
        );
    }
    println!();
    println!(
        "steady operator {:.0} KB = caches {:.0} KB + the rest {:.0} KB (memos, queues, scheduler, watch connections beyond the caches')",
        kb(steady),
        kb(cached),
        kb(steady.saturating_sub(cached))
    );
    println!("allocations made in all: {}", heap::allocations());
    Ok(())
}
