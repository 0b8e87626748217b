//! g. VmGroup on vcsim: a group of N VMs created (0 → N) and deleted (N → 0) through the
//! operator — clones in flight up to its bound, a reconcile reading the group in one
//! property retrieval — against the original operator's approach in the same run and on the
//! same vcsim: one VM at a time (clone, reconfigure, power on; then power off, destroy),
//! straight on the vSphere client, no Kubernetes in the way. Time and vCenter calls of each.
//! h. Webhook latency: VmGroup's validating webhook served over HTTPS exactly as the operator
//! serves it (generated certificate, the runtime's server), AdmissionReviews of a valid
//! VmGroup sent at a fixed rate over a kept-alive client; p50/p99 of the answers as the
//! client sees them, checked against the count in the server's own histogram.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bosun_runtime::manager::{Manager, ManagerConfig, Scope};
use bosun_runtime::metrics::Metrics;
use bosun_runtime::webhook::{serve, CertSource, Certificates};
use bosun_testenv::{ControlPlane, Options, Vcsim};
use bosun_vmgroup::{Settings, VmGroup, VmGroupOperator};
use bosun_vsphere::{Client as VcClient, Config, PowerState, Shape, Tls};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{json, Value};

use crate::Row;
use bosun_bench::measure::install_crd;

const NS: &str = "bench-vm";
const PARENT: &str = "/DC0/vm";
const TEMPLATE: &str = "DC0_H0_VM0";
const SHAPE: Shape = Shape {
    num_cpus: 2,
    memory_mb: 2048,
};
/// vcsim finishes every task at once; a real vCenter takes seconds to clone. These delays
/// (of the method's answer) model that, so that doing VMs in parallel can show — a model, not
/// a measurement of vCenter.
pub const METHOD_DELAYS: &str =
    "CloneVM_Task:500,ReconfigVM_Task:100,PowerOnVM_Task:100,PowerOffVM_Task:100,Destroy_Task:100";

/// Generous: a bound on a run gone wrong, not a target.
const LIMIT: Duration = Duration::from_secs(300);

/// Polls `done` every 50 ms (the figures are seconds: a coarser poll would show in them).
async fn until<F, Fut>(what: &str, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let start = Instant::now();
    while !done().await? {
        anyhow::ensure!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

fn calls_note(calls: &BTreeMap<String, u64>) -> String {
    let total: u64 = calls.values().sum();
    let each = calls
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!("vCenter calls {total}: {each}")
}

fn row(case: &str, n: usize, seconds: f64, calls: &BTreeMap<String, u64>) -> Row {
    Row {
        case: case.into(),
        n,
        seconds,
        note: calls_note(calls),
        ..Default::default()
    }
}

/// The group's VMs as vcsim has them: (powered on with the shape asked for, all).
async fn vms(vc: &VcClient, folder: &str) -> anyhow::Result<(usize, usize)> {
    let Some(f) = vc.find_by_inventory_path(folder).await? else {
        return Ok((0, 0));
    };
    let vms = vc.vms_in_folder(&f).await?;
    let good = vms
        .iter()
        .filter(|v| {
            v.power_state == Some(PowerState::PoweredOn)
                && v.num_cpu == Some(SHAPE.num_cpus)
                && v.memory_mb == Some(SHAPE.memory_mb)
        })
        .count();
    Ok((good, vms.len()))
}

fn vc_config(sim: &Vcsim) -> Config {
    Config::new(
        &sim.url,
        &sim.user,
        &sim.password,
        Tls::CaBundle(sim.ca_pem().as_bytes().to_vec()),
    )
}

async fn credentials(client: &Client, sim: &Vcsim) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let data = [
        ("VC_USER", sim.user.as_str()),
        ("VC_PASS", sim.password.as_str()),
        ("VC_HOST", sim.url.as_str()),
        ("ca.crt", sim.ca_pem()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let mut secret: Secret = serde_json::from_value(json!({"metadata": {"name": "vc-creds"}}))?;
    secret.data = Some(data);
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// 0 → N → 0 through the operator (`parallel` clones in flight), then one at a time.
pub async fn case_vmgroup(n: usize, parallel: usize, delays: bool) -> anyhow::Result<Vec<Row>> {
    let cp = ControlPlane::start(Options::default()).await?;
    let client = cp.client().await?;
    install_crd(&client, &VmGroup::crd()).await?;
    let sim = if delays {
        Vcsim::start_with(&["-method-delay", METHOD_DELAYS])?
    } else {
        Vcsim::start()?
    };
    let on = if delays {
        "vcsim with task delays"
    } else {
        "vcsim"
    };
    credentials(&client, &sim).await?;
    let vc = VcClient::connect(vc_config(&sim)).await?;
    let op = Arc::new(VmGroupOperator::new(Settings {
        secret_namespace: Some(NS.into()),
        parent_folder: PARENT.into(),
        parallel,
        ..Settings::default()
    }));
    let manager = Manager::new(
        client.clone(),
        ManagerConfig {
            scope: Scope::Namespaces(vec![NS.into()]),
            ..Default::default()
        },
    )
    .with_operator(op.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(
        async move {
            let _ = stopped.await;
        },
        |_| {},
    ));

    let api: Api<VmGroup> = Api::namespaced(client.clone(), NS);
    let folder = format!("{PARENT}/{NS}_bench");
    let c0 = op.vcenter_calls().await;
    let t0 = Instant::now();
    let vg: VmGroup = serde_json::from_value(json!({
        "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
        "metadata": {"name": "bench"},
        "spec": {"cpu": SHAPE.num_cpus, "memory": SHAPE.memory_mb / 1024, "template": TEMPLATE, "replicas": n},
    }))?;
    api.create(&PostParams::default(), &vg).await?;
    // Done when the status says so and vcsim agrees.
    until("0 → N", || async {
        let vg = api.get("bench").await?;
        let running = vg.status.as_ref().is_some_and(|s| {
            s.phase == "RUNNING"
                && s.current_replicas == n as i32
                && s.observed_generation == vg.metadata.generation
        });
        Ok(running && vms(&vc, &folder).await? == (n, n))
    })
    .await?;
    let up = t0.elapsed().as_secs_f64();
    let c1 = op.vcenter_calls().await;
    let t1 = Instant::now();
    api.delete("bench", &DeleteParams::default()).await?;
    until("N → 0", || async {
        Ok(api.get_opt("bench").await?.is_none())
    })
    .await?;
    let down = t1.elapsed().as_secs_f64();
    let c2 = op.vcenter_calls().await;
    anyhow::ensure!(
        vc.find_by_inventory_path(&folder).await?.is_none(),
        "the group's folder outlived the group"
    );
    let _ = stop.send(());
    task.await??;

    // The original's way, on a client of its own (its own counter).
    let base = VcClient::connect(vc_config(&sim)).await?;
    let b0 = base.counts().snapshot();
    let t2 = Instant::now();
    let template = base.require_path(&format!("{PARENT}/{TEMPLATE}")).await?;
    let parent = base.require_path(PARENT).await?;
    let f = base.create_folder(&parent, "baseline").await?;
    let mut made = Vec::new();
    for i in 1..=n {
        let vm = base
            .clone_vm(&template, &f, &format!("baseline-{i}"), SHAPE)
            .await?;
        base.reconfigure(&vm, SHAPE).await?;
        base.power_on(&vm).await?;
        made.push(vm);
    }
    let base_up = t2.elapsed().as_secs_f64();
    anyhow::ensure!(
        vms(&vc, &format!("{PARENT}/baseline")).await? == (n, n),
        "the baseline did not make its VMs"
    );
    let b1 = base.counts().snapshot();
    let t3 = Instant::now();
    for vm in &made {
        base.power_off(vm).await?;
        base.destroy(vm).await?;
    }
    base.destroy(&f).await?;
    let base_down = t3.elapsed().as_secs_f64();
    let b2 = base.counts().snapshot();

    let mut rows = vec![
        row(
            &format!("vmgroup 0→N bosun ({parallel} in flight), {on}"),
            n,
            up,
            &delta(&c0, &c1),
        ),
        row(
            &format!("vmgroup N→0 bosun, {on}"),
            n,
            down,
            &delta(&c1, &c2),
        ),
        row(
            &format!("vmgroup 0→N one at a time, {on}"),
            n,
            base_up,
            &delta(&b0, &b1),
        ),
        row(
            &format!("vmgroup N→0 one at a time, {on}"),
            n,
            base_down,
            &delta(&b1, &b2),
        ),
    ];
    rows[2].ratio = Some(up / base_up);
    rows[3].ratio = Some(down / base_down);
    Ok(rows)
}

/// DER of the first certificate of a PEM text.
fn der(pem: &str) -> anyhow::Result<Vec<u8>> {
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    // k8s-openapi's ByteString reads base64: no decoder of our own.
    Ok(serde_json::from_value::<ByteString>(Value::String(body))?.0)
}

fn review(i: usize) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("bench-{i}"),
            "kind": {"group": "vm.codeconnect.vmworld.com", "version": "v1alpha1", "kind": "VmGroup"},
            "resource": {"group": "vm.codeconnect.vmworld.com", "version": "v1alpha1", "resource": "vmgroups"},
            "namespace": "team", "name": format!("web-{i}"), "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": {
                "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
                "metadata": {"name": format!("web-{i}"), "namespace": "team"},
                "spec": {"cpu": 2, "memory": 2, "template": TEMPLATE, "replicas": 3},
            },
        }
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// `rate` reviews a second for `seconds` to the validating webhook.
pub async fn case_webhook(rate: u32, seconds: u64) -> anyhow::Result<Vec<Row>> {
    let certs = Arc::new(Certificates::new(CertSource::Generated {
        hosts: vec!["127.0.0.1".into()],
        validity: Duration::from_secs(3600),
    })?);
    let ca = der(certs.ca_pem().unwrap_or_default())?;
    let metrics = Metrics::new();
    let shutdown = tokio_util::sync::CancellationToken::new();
    // The server on a runtime of its own with one worker, as in a pod with one CPU: the
    // client's work does not share its threads.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let hooks = bosun_vmgroup::webhook::webhooks(PARENT).with_metrics(metrics.clone());
    let token = shutdown.clone();
    let serving = server_rt
        .spawn(async move {
            serve(hooks, "127.0.0.1:0".parse()?, certs, token)
                .await
                .map_err(anyhow::Error::from)
        })
        .await??;
    let mut config = kube::Config::new(format!("https://{}", serving.local_addr).parse()?);
    config.root_cert = Some(vec![ca]);
    let client = Client::try_from(config)?;
    let path = bosun_vmgroup::webhook::VALIDATE_PATH;
    let total = rate as usize * seconds as usize;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    let mut tasks = tokio::task::JoinSet::new();
    let t0 = Instant::now();
    for i in 0..total {
        tick.tick().await;
        let (client, body) = (client.clone(), serde_json::to_vec(&review(i))?);
        tasks.spawn(async move {
            let req = http::Request::post(path)
                .header("content-type", "application/json")
                .body(body)?;
            let start = Instant::now();
            let text = client.request_text(req).await?;
            let latency = start.elapsed().as_secs_f64();
            let v: Value = serde_json::from_str(&text)?;
            anyhow::ensure!(
                v["response"]["allowed"] == true,
                "a valid VmGroup was refused: {text}"
            );
            anyhow::Ok(latency)
        });
    }
    let mut latencies = Vec::with_capacity(total);
    while let Some(done) = tasks.join_next().await {
        latencies.push(done??);
    }
    let wall = t0.elapsed().as_secs_f64();
    shutdown.cancel();
    serving.stopped().await;
    server_rt.shutdown_background();
    latencies.sort_by(f64::total_cmp);
    let served = bosun_testenv::sum_series(
        &metrics.encode(),
        "controller_runtime_webhook_latency_seconds_count",
        &[("webhook", path)],
    );
    anyhow::ensure!(
        served as usize == total,
        "the server measured {served} reviews of {total}"
    );
    let ms = |p: f64| percentile(&latencies, p) * 1000.0;
    Ok(vec![Row {
        case: format!("webhook validate @{rate}/s"),
        n: total,
        seconds: wall,
        note: format!(
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (client-side, HTTPS kept alive); {} reviews at {:.0}/s achieved",
            ms(0.50),
            ms(0.99),
            ms(1.0),
            total,
            total as f64 / wall
        ),
        ..Default::default()
    }])
}
