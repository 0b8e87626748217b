//! `bosun dev`: try bosun with no cluster at all. Starts the project's local control plane
//! (etcd + kube-apiserver + kube-controller-manager, built on first use) with a simulated node
//! agent, installs the CRDs, runs the operators, applies the seed's sample BookStore and shows
//! what happened. Ctrl-C stops and cleans up. `--use-current-cluster` runs against the cluster
//! in KUBECONFIG instead — with leader election on the Lease an installed bosun holds, so it
//! never writes next to one: while that bosun runs, `bosun dev` is a standby and shows what
//! the installed one does. With the VmGroup operator it starts vcsim too, applies the sample
//! VmGroup and shows its VMs as vcsim has them ([`vcenter`]). With the PostgresCluster
//! operator the node agent runs pods as real processes, the sample is a 3-instance cluster of
//! real PostgreSQL, and a `psql` command for its primary is printed ([`postgres`]).
pub(super) mod assets;
mod postgres;
mod vcenter;

use std::sync::Arc;
use std::time::Duration;

use bosun_bookstore::BookStore;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{shutdown_signal, Manager, ManagerConfig, Operator};
use bosun_testenv::{ControlPlane, NodeAgent, NodeAgentConfig, Options};
use clap::Args;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, ResourceExt};

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
    /// Coded operators to run (default: bookstore, or none with --watches).
    #[arg(long, value_delimiter = ',')]
    pub operators: Option<Vec<String>>,
    /// An operator-sdk watches.yaml: run its charts and roles as operators.
    #[arg(long, visible_alias = "watches-file")]
    pub watches: Option<std::path::PathBuf>,
    /// A custom resource to apply once the operators run (default: the seed's BookStore
    /// sample when no --watches is given).
    #[arg(long)]
    pub sample: Option<std::path::PathBuf>,
    /// Release storage of chart entries: secret or none.
    #[arg(long, default_value = "secret")]
    pub release_storage: bosun_helm_operator::Storage,
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

pub(super) fn say(msg: impl AsRef<str>) {
    eprintln!("\x1b[1m==>\x1b[0m {}", msg.as_ref());
}

/// Installs every CRD the operators serve and waits until each is established.
async fn install(client: &Client, ops: &[Arc<dyn Operator>]) -> anyhow::Result<()> {
    let pp = PatchParams::apply("bosun").force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in ops.iter().flat_map(|o| o.crds()) {
        crds.patch(&crd.name_any(), &pp, &Patch::Apply(&crd))
            .await?;
        // Established is not served: on a loaded machine the sample's apply right after
        // could still get the API server's "404 page not found" (the suite saw it).
        bosun_testenv::kit::wait_served(client, &crd).await?;
    }
    Ok(())
}

/// A custom resource read from YAML, applied in `ns`; returns it with its kind as served.
async fn apply_sample(
    client: &Client,
    text: &str,
    ns: &str,
) -> anyhow::Result<(DynamicObject, ApiResource)> {
    let json =
        bosun_yaml::goyaml::yaml_to_json(text).map_err(|e| anyhow::anyhow!("sample: {e}"))?;
    let mut obj: DynamicObject = serde_json::from_str(&json)?;
    let types = obj
        .types
        .clone()
        .ok_or_else(|| anyhow::anyhow!("sample: apiVersion and kind are required"))?;
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", &types.api_version));
    let gvk = GroupVersionKind::gvk(group, version, &types.kind);
    let resolved = bosun_runtime::dynamic::Discovery::new(client.clone())
        .resolve(&gvk)
        .await?;
    obj.metadata.namespace = Some(ns.to_string());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resolved.resource);
    let applied = api
        .patch(
            &obj.name_any(),
            &PatchParams::apply("bosun-dev").force(),
            &Patch::Apply(&obj),
        )
        .await?;
    Ok((applied, resolved.resource))
}

/// Ready (BookStore, Helm charts) or Successful (Ansible roles) for the current spec.
fn converged(o: &DynamicObject) -> bool {
    let st = &o.data["status"];
    let current = st
        .get("observedGeneration")
        .and_then(|g| g.as_i64())
        .is_none_or(|g| Some(g) == o.metadata.generation);
    let ok = st["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| (c["type"] == "Ready" || c["type"] == "Successful") && c["status"] == "True")
    });
    current && ok
}

/// The conditions of every object of the sample's kind.
async fn show_custom(client: &Client, ar: &ApiResource, ns: &str) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    writeln!(out, "{:<28} CONDITIONS", ar.kind.to_uppercase())?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, ar);
    for o in api.list(&ListParams::default()).await?.items {
        writeln!(out, "{}", o.name_any())?;
        for c in o.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            writeln!(
                out,
                "  {:<14} {:<6} {:<20} {}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
                c["message"]
                    .as_str()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            )?;
        }
    }
    Ok(out)
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
    let mut out = show_bookstores(client, ns).await?;
    writeln!(out)?;
    out.push_str(&show_children(client, ns).await?);
    Ok(out)
}

async fn show_bookstores(client: &Client, ns: &str) -> anyhow::Result<String> {
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
    Ok(out)
}

/// Deployments, StatefulSets, Services, Pods and claims of a namespace.
async fn show_children(client: &Client, ns: &str) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
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
    let pg_operator = args
        .operators
        .as_ref()
        .is_some_and(|o| o.iter().any(|n| n == "postgres"));
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
        if pg_operator {
            say("starting the process-mode node agent (test support: runs pods as local processes, PostgreSQL included, each on a loopback pod IP)");
            _agent = Some(postgres::agent(client.clone())?);
        } else {
            say(
                "starting the simulated node agent (test support: marks pods Ready, binds volumes)",
            );
            _agent = Some(NodeAgent::start(client.clone(), NodeAgentConfig::default()));
        }
        _cp = Some(cp);
        client
    };
    // The server's version, and a refusal here (not mid-reconcile) when it is too old.
    let server = bosun_runtime::kubeversion::check(&client).await?;
    say(format!(
        "Kubernetes {} (bosun supports 1.{} to 1.{})",
        server.git_version,
        bosun_runtime::kubeversion::MIN_MINOR,
        bosun_runtime::kubeversion::MAX_TESTED_MINOR
    ));
    let ops = crate::registry::operators(&crate::registry::Sources {
        operators: args.operators.as_deref(),
        watches: args.watches.as_deref(),
        release_storage: args.release_storage,
        ..Default::default()
    })?;
    let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
    say(format!("installing the CRDs of {}", names.join(", ")));
    install(&client, &ops).await?;
    let coded_bookstore = names.contains(&"bookstore");
    let vmgroup = names.contains(&"vmgroup");
    let pg_sample = names.contains(&"postgres");
    // Against a real cluster the operator talks to the vCenter of its Secret; locally, vcsim.
    let sim = if vmgroup && !args.use_current_cluster {
        Some(vcenter::start(&client, &args.namespace).await?)
    } else {
        None
    };
    let mut config = ManagerConfig::default();
    let mut installed = None;
    if args.use_current_cluster {
        let (leader, holder) = dev_leader(&client, &args).await?;
        config.leader = Some(leader);
        installed = holder;
    }
    let mut manager = Manager::new(client.clone(), config);
    if args.use_current_cluster {
        // Its own connections: renewals never queue behind reconciles.
        manager = manager.with_leader_client(super::run::client(None, 0.0, 0).await?);
    }
    for op in ops {
        manager = manager.with_operator(op);
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(
        async move {
            let _ = stop_rx.await;
        },
        |_| {},
    ));

    let sample = match (&args.sample, &args.watches) {
        (Some(p), _) => {
            Some(std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?)
        }
        (None, None) if coded_bookstore => Some(SAMPLE.to_string()),
        (None, None) if vmgroup => Some(vcenter::SAMPLE.to_string()),
        (None, None) if pg_sample => Some(postgres::SAMPLE.to_string()),
        _ => None,
    };
    let ready = match &sample {
        None => true,
        Some(text) => {
            let (obj, ar) = apply_sample(&client, text, &args.namespace).await?;
            say(format!(
                "applied {} {} in namespace {}",
                ar.kind,
                obj.name_any(),
                args.namespace
            ));
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &args.namespace, &ar);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
            let ready = loop {
                let o = api.get(&obj.name_any()).await?;
                if converged(&o) || tokio::time::Instant::now() > deadline {
                    break converged(&o);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            let view = if coded_bookstore && ar.group == "charts.example.com" && ar.version == "v1"
            {
                show(&client, &args.namespace).await?
            } else if ar.kind == "PostgresCluster" {
                format!(
                    "{}\n{}",
                    show_custom(&client, &ar, &args.namespace).await?,
                    postgres::show(
                        &client,
                        &args.namespace,
                        &obj.name_any(),
                        _cp.as_ref().map(|cp| cp.dir()),
                    )
                    .await?
                )
            } else if let (Some(sim), "VmGroup") = (&sim, ar.kind.as_str()) {
                format!(
                    "{}\n{}",
                    show_custom(&client, &ar, &args.namespace).await?,
                    vcenter::show_vms(&client, sim, &args.namespace).await?
                )
            } else {
                format!(
                    "{}\n{}",
                    show_custom(&client, &ar, &args.namespace).await?,
                    show_children(&client, &args.namespace).await?
                )
            };
            println!("\n{view}");
            if ready {
                say(format!("{} {} is ready", ar.kind, obj.name_any()));
            }
            ready
        }
    };
    if let Some(cp) = &_cp {
        println!(
            "kubeconfig: {}\n  try: KUBECONFIG={} kubectl get all",
            cp.kubeconfig().display(),
            cp.kubeconfig().display()
        );
    }
    if !ready {
        let _ = stop_tx.send(());
        match installed {
            Some(h) => anyhow::bail!(
                "the sample did not become ready within {} s; the installed bosun ({h}) holds the lease and is the one to converge it: is it running?",
                args.timeout
            ),
            None => anyhow::bail!("the sample did not become ready within {} s", args.timeout),
        }
    }
    if !args.once {
        say("operators running; Ctrl-C stops everything and cleans up");
        shutdown_signal().await;
    }
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    drop(sim);
    say("stopped; the local control plane is removed");
    Ok(())
}
