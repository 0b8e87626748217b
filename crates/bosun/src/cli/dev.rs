//! `bosun dev`: try bosun with no cluster at all. Starts the project's local control plane
//! (etcd + kube-apiserver + kube-controller-manager, built on first use) with a simulated node
//! agent, installs the CRDs, runs the operators, applies the seed's sample BookStore and shows
//! what happened. Ctrl-C stops and cleans up. `--use-current-cluster` runs against the cluster
//! in KUBECONFIG instead — with leader election on the Lease an installed bosun holds, so it
//! never writes next to one: while that bosun runs, `bosun dev` is a standby and shows what
//! the installed one does.
mod assets;

use std::sync::Arc;
use std::time::Duration;

use bosun_bookstore::BookStore;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{shutdown_signal, Manager, ManagerConfig};
use bosun_testenv::{ControlPlane, NodeAgent, NodeAgentConfig, Options};
use clap::Args;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt, ResourceExt};

pub const SAMPLE: &str = include_str!("../../../../deploy/samples/bookstore.yaml");

#[derive(Args, Debug, Clone)]
pub struct DevArgs {
    /// Run against the cluster in KUBECONFIG instead of a local control plane.
    #[arg(long)]
    pub use_current_cluster: bool,
    /// Namespace for the sample.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Stop after showing the converged state (for scripts and CI) instead of waiting for Ctrl-C.
    #[arg(long)]
    pub once: bool,
    /// Seconds to wait for the sample to become Ready.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// With --use-current-cluster: the namespace of the installed bosun's leader Lease.
    #[arg(long, default_value = "bosun-system")]
    pub lease_namespace: String,
    /// With --use-current-cluster: the name of the installed bosun's leader Lease.
    #[arg(long, default_value = "bosun-leader")]
    pub lease_name: String,
}

/// Leader election for `--use-current-cluster`: on the installed bosun's Lease (or, when its
/// namespace does not exist, on one in the sample's namespace, which at least keeps two
/// `bosun dev` apart). Returns the config and, when another replica holds the lease now,
/// its identity.
async fn dev_leader(
    client: &Client,
    args: &DevArgs,
) -> anyhow::Result<(LeaderConfig, Option<String>)> {
    let identity = format!(
        "bosun-dev-{}-{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into()),
        std::process::id()
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = if namespaces.get_opt(&args.lease_namespace).await?.is_some() {
        args.lease_namespace.clone()
    } else {
        say(format!(
            "no bosun installed in namespace {} (it does not exist); if one runs elsewhere, pass --lease-namespace",
            args.lease_namespace
        ));
        args.namespace.clone()
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let holder = leases
        .get_opt(&args.lease_name)
        .await?
        .and_then(|l| l.spec)
        .filter(|s| {
            // Only to say so: the election itself never trusts another machine's clock.
            let expires = s
                .renew_time
                .as_ref()
                .map(|t| t.0.as_second() + i64::from(s.lease_duration_seconds.unwrap_or(0)));
            expires.is_some_and(|e| e > Timestamp::now().as_second())
        })
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty() && *h != identity);
    if let Some(h) = &holder {
        say(format!(
            "bosun is already running in this cluster: {h} holds Lease {ns}/{}. bosun dev will not write next to it; it waits as a standby and shows what {h} does",
            args.lease_name
        ));
    }
    Ok((LeaderConfig::new(&args.lease_name, &ns, &identity), holder))
}

fn say(msg: impl AsRef<str>) {
    eprintln!("\x1b[1m==>\x1b[0m {}", msg.as_ref());
}

async fn install(client: &Client) -> anyhow::Result<()> {
    let pp = PatchParams::apply("bosun").force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = BookStore::crd();
    crds.patch(&crd.name_any(), &pp, &Patch::Apply(&crd))
        .await?;
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, &crd.name_any(), conditions::is_crd_established()),
    )
    .await??;
    Ok(())
}

async fn local_storage_class(client: &Client) -> anyhow::Result<()> {
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "bosun.dev/simulated", "allowVolumeExpansion": true,
    }))?;
    Api::<StorageClass>::all(client.clone())
        .patch(
            "standard",
            &PatchParams::apply("bosun").force(),
            &Patch::Apply(&sc),
        )
        .await?;
    Ok(())
}

/// A kubectl-style view of the sample's objects.
pub async fn show(client: &Client, ns: &str) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    let bss: Api<BookStore> = Api::namespaced(client.clone(), ns);
    writeln!(
        out,
        "{:<28} {:<6} {:<5} {:<5} {:<8}",
        "BOOKSTORE", "READY", "APP", "DB", "DB-SIZE"
    )?;
    for b in bss.list(&ListParams::default()).await?.items {
        let st = b.status.clone().unwrap_or_default();
        let ready = st
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.clone())
            .unwrap_or_default();
        writeln!(
            out,
            "{:<28} {:<6} {:<5} {:<5} {:<8}",
            b.name_any(),
            ready,
            st.app,
            st.db,
            st.volume_size.unwrap_or_default()
        )?;
        for c in &st.conditions {
            writeln!(
                out,
                "  {:<12} {:<6} {:<18} {}",
                c.type_, c.status, c.reason, c.message
            )?;
        }
    }
    writeln!(out)?;
    writeln!(out, "{:<44} STATE", "CHILD")?;
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        let s = d.status.clone().unwrap_or_default();
        writeln!(
            out,
            "{:<44} ready {}/{}",
            format!("deployment/{}", d.name_any()),
            s.ready_replicas.unwrap_or(0),
            d.spec.and_then(|s| s.replicas).unwrap_or(0)
        )?;
    }
    for d in Api::<StatefulSet>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        let s = d.status.clone().unwrap_or_default();
        writeln!(
            out,
            "{:<44} ready {}/{}",
            format!("statefulset/{}", d.name_any()),
            s.ready_replicas.unwrap_or(0),
            d.spec.and_then(|s| s.replicas).unwrap_or(0)
        )?;
    }
    for s in Api::<Service>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        if s.name_any() == "kubernetes" {
            continue;
        }
        let spec = s.spec.clone().unwrap_or_default();
        writeln!(
            out,
            "{:<44} {} {}",
            format!("service/{}", s.name_any()),
            spec.type_.unwrap_or_default(),
            spec.cluster_ip.unwrap_or_default()
        )?;
    }
    for p in Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        writeln!(out, "{:<44} {}", format!("pod/{}", p.name_any()), phase)?;
    }
    for c in Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
    {
        let st = c.status.clone().unwrap_or_default();
        let cap = st
            .capacity
            .and_then(|c| c.get("storage").map(|q| q.0.clone()))
            .unwrap_or_default();
        writeln!(
            out,
            "{:<44} {} {}",
            format!("pvc/{}", c.name_any()),
            st.phase.unwrap_or_default(),
            cap
        )?;
    }
    Ok(out)
}

pub async fn dev(args: DevArgs) -> anyhow::Result<()> {
    bosun_runtime::telemetry::init_with(
        bosun_runtime::telemetry::LogFormat::Text,
        "warn,kube_client=off,bosun_runtime=info",
    );
    let mut _cp: Option<ControlPlane> = None;
    let mut _agent: Option<NodeAgent> = None;
    let client = if args.use_current_cluster {
        say("using the cluster in KUBECONFIG");
        super::run::client(None, 0.0, 0).await?
    } else {
        assets::ensure().await?;
        say("starting a local control plane: etcd, kube-apiserver, kube-controller-manager");
        let cp = ControlPlane::start(Options {
            controller_manager: true,
        })
        .await?;
        let client = cp.client().await?;
        say(format!("control plane up at {}", cp.server()));
        local_storage_class(&client).await?;
        say("starting the simulated node agent (test support: marks pods Ready, binds volumes)");
        _agent = Some(NodeAgent::start(client.clone(), NodeAgentConfig::default()));
        _cp = Some(cp);
        client
    };
    say("installing the BookStore CRD");
    install(&client).await?;

    let mut config = ManagerConfig::default();
    let mut installed = None;
    if args.use_current_cluster {
        let (leader, holder) = dev_leader(&client, &args).await?;
        config.leader = Some(leader);
        installed = holder;
    }
    let mut manager = Manager::new(client.clone(), config)
        .with_operator(Arc::new(bosun_bookstore::BookStoreOperator));
    if args.use_current_cluster {
        // Its own connections: renewals never queue behind reconciles.
        manager = manager.with_leader_client(super::run::client(None, 0.0, 0).await?);
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(
        async move {
            let _ = stop_rx.await;
        },
        |_| {},
    ));

    say(format!(
        "applying the seed's sample BookStore in namespace {}",
        args.namespace
    ));
    let mut sample: BookStore = serde_yaml::from_str(SAMPLE)?;
    sample.metadata.namespace = Some(args.namespace.clone());
    let bss: Api<BookStore> = Api::namespaced(client.clone(), &args.namespace);
    bss.patch(
        &sample.name_any(),
        &PatchParams::apply("bosun-dev").force(),
        &Patch::Apply(&sample),
    )
    .await?;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    let ready = loop {
        let bs = bss.get(&sample.name_any()).await?;
        let ok = bs.status.as_ref().is_some_and(|s| {
            s.observed_generation == bs.metadata.generation
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if ok || tokio::time::Instant::now() > deadline {
            break ok;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("\n{}", show(&client, &args.namespace).await?);
    if let Some(cp) = &_cp {
        println!(
            "kubeconfig: {}\n  try: KUBECONFIG={} kubectl get bs,deploy,sts,svc,pvc",
            cp.kubeconfig().display(),
            cp.kubeconfig().display()
        );
    }
    if !ready {
        let _ = stop_tx.send(());
        match installed {
            Some(h) => anyhow::bail!(
                "the sample BookStore did not become Ready within {} s; the installed bosun ({h}) holds the lease and is the one to converge it: is it running?",
                args.timeout
            ),
            None => anyhow::bail!(
                "the sample BookStore did not become Ready within {} s",
                args.timeout
            ),
        }
    }
    say("BookStore bookstore-sample is Ready");
    if !args.once {
        say("operators running; Ctrl-C stops everything and cleans up");
        shutdown_signal().await;
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    say("stopped; the local control plane is removed");
    Ok(())
}
