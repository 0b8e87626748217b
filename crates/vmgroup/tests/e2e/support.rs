//! One control plane per test binary (the CRD and the operator's ClusterRole, bound to its
//! ServiceAccount user); per test a namespace, a vcsim with its credentials Secret, and a
//! manager running the VmGroup operator **as that user** (impersonated), so every test also
//! proves the generated RBAC suffices. What is asserted about VMs is read back from vcsim.
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::manager::{Manager, ManagerConfig, ManagerError, Operator, Scope};
use bosun_testenv::{eventually, kit, shared, test_namespace, ControlPlane, Vcsim};
use bosun_vmgroup::{Settings, VmGroup, VmGroupOperator};
use bosun_vsphere::{Client as VcClient, Config, Tls, VmInfo};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use tokio::sync::{oneshot, OnceCell};

pub const SA_USER: &str = "system:serviceaccount:bosun-system:bosun-vmgroup";
pub const SA_GROUPS: [&str; 2] = ["system:serviceaccounts", "system:authenticated"];
pub const PARENT: &str = "/DC0/vm";

pub struct Env {
    pub cp: &'static ControlPlane,
    pub admin: Client,
    pub ns: String,
    /// More namespaces the operator watches (the credentials Secret is in `ns`).
    pub more_ns: Vec<String>,
    /// The settings the next operator start uses.
    pub settings: Settings,
    pub sim: Vcsim,
    pub vc: VcClient,
    pub op: Option<Arc<VmGroupOperator>>,
    pub metrics: Option<bosun_runtime::metrics::Metrics>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ManagerError>>>,
}

fn settings() -> Settings {
    Settings {
        // A period, not a synchronisation: how soon a VM changed in vCenter is repaired.
        resync: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        // Longer than any test: a refused login is tried again only once the Secret changes.
        login_retry: Duration::from_secs(600),
        parent_folder: PARENT.into(),
        ..Settings::default()
    }
}

async fn cluster_setup(client: &Client) -> anyhow::Result<()> {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_try_init(|| async {
        let need = VmGroupOperator::new(settings())
            .rbac()
            .merge(bosun_runtime::rbac::runtime_rules(false));
        let mut rules = need.namespaced;
        rules.extend(need.cluster);
        kit::install(
            client,
            [VmGroup::crd()],
            "bosun-vmgroup-test",
            rules,
            SA_USER,
        )
        .await?;
        anyhow::Ok(())
    })
    .await?;
    Ok(())
}

/// A namespace, a vcsim, the credentials Secret (`password` as given), the operator running.
pub async fn env(prefix: &str, password: Option<&str>) -> Env {
    env_with(prefix, password, &[]).await
}

/// [`env`] with more of vcsim's flags (e.g. `-method-delay`).
pub async fn env_with(prefix: &str, password: Option<&str>, vcsim_flags: &[&str]) -> Env {
    env_full(Namespaces::Fresh(prefix), password, vcsim_flags).await
}

/// Which namespaces a test runs in.
pub enum Namespaces<'a> {
    /// A fresh one named after the prefix.
    Fresh(&'a str),
    /// These exact names (created when absent), the first holding the Secret: for tests that
    /// must name them (`team`, `a-b`). Each name belongs to one test of the binary.
    Named(&'a [&'a str]),
}

/// Namespaces named exactly, created when absent.
async fn named_namespace(client: &Client, name: &str) -> String {
    use k8s_openapi::api::core::v1::Namespace;
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
    name.to_string()
}

pub async fn env_full(
    namespaces: Namespaces<'_>,
    password: Option<&str>,
    vcsim_flags: &[&str],
) -> Env {
    if std::env::var_os("RUST_LOG").is_some() {
        bosun_runtime::telemetry::init(Default::default());
    }
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    cluster_setup(&admin).await.expect("cluster setup");
    let (ns, more_ns) = match namespaces {
        Namespaces::Fresh(prefix) => (
            test_namespace(&admin, prefix).await.expect("namespace"),
            Vec::new(),
        ),
        Namespaces::Named(names) => {
            let mut all = Vec::new();
            for n in names {
                all.push(named_namespace(&admin, n).await);
            }
            let first = all.remove(0);
            (first, all)
        }
    };
    let sim = Vcsim::start_with(vcsim_flags)
        .expect("vcsim starts (bash scripts/setup-vcsim.sh installs it)");
    let data = [
        ("VC_USER", sim.user.as_str()),
        ("VC_PASS", password.unwrap_or(&sim.password)),
        ("VC_HOST", sim.url.as_str()),
        ("ca.crt", sim.ca_pem()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("vc-creds".into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let vc = VcClient::connect(Config::new(
        &sim.url,
        &sim.user,
        &sim.password,
        Tls::CaBundle(sim.ca_pem().as_bytes().to_vec()),
    ))
    .await
    .expect("test's own client connects to vcsim");
    let mut env = Env {
        cp,
        admin,
        settings: Settings {
            secret_namespace: Some(ns.clone()),
            ..settings()
        },
        ns,
        more_ns,
        sim,
        vc,
        op: None,
        metrics: None,
        stop: None,
        task: None,
    };
    env.start_operator().await;
    env
}

impl Env {
    /// Starts a manager with [`Env::settings`].
    pub async fn start_operator(&mut self) {
        let client = self
            .cp
            .client_as(SA_USER, &SA_GROUPS)
            .await
            .expect("client");
        let mut namespaces = vec![self.ns.clone()];
        namespaces.extend(self.more_ns.iter().cloned());
        let cfg = ManagerConfig {
            scope: Scope::Namespaces(namespaces),
            ..Default::default()
        };
        let op = Arc::new(VmGroupOperator::new(self.settings.clone()));
        let m = Manager::new(client, cfg).with_operator(op.clone());
        self.op = Some(op);
        self.metrics = Some(m.metrics());
        let (tx, rx) = oneshot::channel::<()>();
        self.task = Some(tokio::spawn(m.run(
            async move {
                let _ = rx.await;
            },
            |_| {},
        )));
        self.stop = Some(tx);
    }

    pub fn api(&self) -> Api<VmGroup> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    pub fn api_in(&self, ns: &str) -> Api<VmGroup> {
        Api::namespaced(self.admin.clone(), ns)
    }

    /// Stops the manager gracefully and keeps the rest; [`Env::start_operator`] starts one
    /// again.
    pub async fn halt(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            match tokio::time::timeout(Duration::from_secs(30), t).await {
                Ok(Ok(Ok(()))) => {}
                other => panic!("the manager did not stop cleanly: {other:?}"),
            }
        }
    }

    /// A VmGroup in namespace `ns`, with `annotations` and `finalizers` as given.
    pub async fn create_in(
        &self,
        ns: &str,
        name: &str,
        replicas: i32,
        template: &str,
        annotations: serde_json::Value,
        finalizers: &[&str],
    ) -> VmGroup {
        let vg: VmGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations,
                         "finalizers": finalizers},
            "spec": {"cpu": 1, "memory": 1, "template": template, "replicas": replicas},
        }))
        .expect("vmgroup");
        self.api_in(ns)
            .create(&PostParams::default(), &vg)
            .await
            .expect("create vmgroup")
    }

    /// Waits until the VmGroup `ns/name` is gone (its finalizer released).
    pub async fn wait_gone(&self, ns: &str, name: &str) {
        let api = self.api_in(ns);
        let gone = eventually(90, || async {
            matches!(api.get_opt(name).await, Ok(None)).then_some(())
        })
        .await;
        assert!(
            gone.is_some(),
            "{ns}/{name} was not released by its finalizer: {:#?}",
            api.get_opt(name).await
        );
    }

    /// The names of the VMs directly in the folder at `path`, sorted; None without a folder.
    pub async fn vm_names_at(&self, path: &str) -> Option<Vec<String>> {
        let folder = self
            .vc
            .find_by_inventory_path(path)
            .await
            .expect("find folder")?;
        let mut names: Vec<String> = self
            .vc
            .vms_in_folder(&folder)
            .await
            .expect("read vms")
            .into_iter()
            .map(|v| v.name)
            .collect();
        names.sort();
        Some(names)
    }

    /// A folder under the parent holding clones of vcsim's VM by these names, made outside
    /// bosun (powered on, 1 CPU, 32 MB, unmarked); the VMs as vcsim shows them.
    pub async fn foreign_folder(&self, name: &str, vms: &[&str]) -> Vec<VmInfo> {
        let parent = self.vc.require_path(PARENT).await.expect("parent");
        let folder = self.vc.create_folder(&parent, name).await.expect("folder");
        let template = self
            .vc
            .require_path(&format!("{PARENT}/DC0_H0_VM0"))
            .await
            .expect("vcsim's VM");
        let shape = bosun_vsphere::Shape {
            num_cpus: 1,
            memory_mb: 32,
        };
        let mut made = Vec::new();
        for n in vms {
            let vm = self
                .vc
                .clone_vm(&template, &folder, n, shape)
                .await
                .expect("clone outside bosun");
            self.vc.power_on(&vm).await.expect("power on");
            made.push(vm);
        }
        let mut seen = self.vc.vms(&made).await.expect("read");
        seen.sort_by(|a, b| a.name.cmp(&b.name));
        seen
    }

    pub async fn create(&self, name: &str, cpu: i32, memory: i32, template: &str, replicas: i32) {
        let vg: VmGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"cpu": cpu, "memory": memory, "template": template, "replicas": replicas},
        }))
        .expect("vmgroup");
        self.api()
            .create(&PostParams::default(), &vg)
            .await
            .expect("create vmgroup");
    }

    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        self.api()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "spec": spec })),
            )
            .await
            .expect("patch spec");
    }

    /// Waits until the status describes the current generation and `ok` holds of it.
    pub async fn wait_status(
        &self,
        name: &str,
        what: &str,
        ok: impl Fn(&bosun_vmgroup::VmGroupStatus) -> bool,
    ) -> VmGroup {
        let api = self.api();
        let got = eventually(90, || async {
            let vg = api.get(name).await.ok()?;
            let st = vg.status.as_ref()?;
            (st.observed_generation == vg.metadata.generation && ok(st)).then_some(vg)
        })
        .await;
        match got {
            Some(vg) => vg,
            None => panic!(
                "{name}: {what} not reached; status: {:#?}",
                api.get(name).await.ok().and_then(|v| v.status)
            ),
        }
    }

    pub fn folder_path(&self, name: &str) -> String {
        format!("{PARENT}/{}_{name}", self.ns)
    }

    /// The group's VMs as vcsim shows them, sorted by name; None when the folder is absent.
    pub async fn vms(&self, name: &str) -> Option<Vec<VmInfo>> {
        let folder = self
            .vc
            .find_by_inventory_path(&self.folder_path(name))
            .await
            .expect("find folder")?;
        let mut vms = self.vc.vms_in_folder(&folder).await.expect("read vms");
        vms.sort_by(|a, b| a.name.cmp(&b.name));
        Some(vms)
    }

    /// Waits until vcsim shows exactly `names`, each with the shape and powered on.
    pub async fn wait_vms(
        &self,
        name: &str,
        names: &[&str],
        cpu: u32,
        memory_gb: u64,
    ) -> Vec<VmInfo> {
        let got = eventually(90, || async {
            let vms = self.vms(name).await?;
            let ok = vms.len() == names.len()
                && vms.iter().zip(names).all(|(v, n)| {
                    v.name == *n
                        && v.num_cpu == Some(cpu)
                        && v.memory_mb == Some(memory_gb * 1024)
                        && v.power_state == Some(bosun_vsphere::PowerState::PoweredOn)
                });
            ok.then_some(vms)
        })
        .await;
        match got {
            Some(v) => v,
            None => panic!(
                "{name}: vcsim does not show {names:?} with {cpu} CPU(s), {memory_gb} GB, on: {:#?}",
                self.vms(name).await
            ),
        }
    }

    /// A credentials Secret `vc-creds` in `ns` with vcsim's user and password and `host`.
    pub async fn put_secret(&self, ns: &str, host: &str) {
        let data = [
            ("VC_USER", self.sim.user.as_str()),
            ("VC_PASS", self.sim.password.as_str()),
            ("VC_HOST", host),
            ("ca.crt", self.sim.ca_pem()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect();
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("vc-creds".into()),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        };
        Api::<Secret>::namespaced(self.admin.clone(), ns)
            .create(&PostParams::default(), &secret)
            .await
            .expect("secret");
    }

    /// Sets `VC_PASS` in the credentials Secret.
    pub async fn set_password(&self, password: &str) {
        self.set_secret_key("VC_PASS", password).await;
    }

    /// Sets one key of the credentials Secret.
    pub async fn set_secret_key(&self, key: &str, value: &str) {
        let value = serde_json::to_value(ByteString(value.as_bytes().to_vec())).expect("b64");
        Api::<Secret>::namespaced(self.admin.clone(), &self.ns)
            .patch(
                "vc-creds",
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({"data": {key: value}})),
            )
            .await
            .expect("patch the credentials Secret");
    }

    /// Warning/Normal events about an object, as (reason, note).
    pub async fn events_for(&self, name: &str) -> Vec<(String, String)> {
        self.events_in(&self.ns, name).await
    }

    pub async fn events_in(&self, ns: &str, name: &str) -> Vec<(String, String)> {
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.admin.clone(), ns);
        api.list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    /// Kills the manager (no graceful stop) and starts a new one, as a crashed pod's
    /// replacement.
    pub async fn kill_and_restart(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
        self.stop = None;
        self.start_operator().await;
    }

    /// Reconciles finished so far.
    pub fn reconciles(&self) -> f64 {
        let text = self
            .metrics
            .as_ref()
            .map(|m| m.encode())
            .unwrap_or_default();
        bosun_testenv::sum_series(&text, "controller_runtime_reconcile_total", &[])
    }

    /// Stops the manager gracefully.
    pub async fn stop(mut self) {
        self.halt().await;
    }
}
