//! The sharded-replica tests' plumbing: `bosun run --sharding` replicas as processes of this
//! test, their metrics read over HTTP, and the Helm or Ansible operator they run written into
//! a temporary directory (a chart or a role, its `watches.yaml`, the CRDs installed).
use std::path::{Path, PathBuf};
use std::process::Stdio;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ApiResource;
use kube::core::GroupVersionKind;
use kube::Client;

/// The admin client of the shared control plane, a new test namespace named after `prefix`,
/// and a temporary directory for the operator's files and the replicas' logs.
pub async fn operator_env(prefix: &str) -> (Client, String, tempfile::TempDir) {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = bosun_testenv::test_namespace(&admin, prefix)
        .await
        .expect("ns");
    let dir = tempfile::tempdir().expect("dir");
    (admin, ns, dir)
}

/// A replica, `bosun run --sharding` under the pod name `name`, its log in a file.
pub struct Replica {
    pub name: &'static str,
    pub child: tokio::process::Child,
    pub metrics: u16,
    pub log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// Starts replica `name` of the namespace `ns` (its Leases there too) with `flags`, its
/// stderr logged to `<dir>/<name>.log`, its metrics on a free port.
pub fn start(
    kubeconfig: &Path,
    ns: &str,
    name: &'static str,
    flags: &[String],
    dir: &Path,
) -> Replica {
    let metrics = free_port();
    let log = dir.join(format!("{name}.log"));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("run")
        .arg("--sharding")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespaces={ns}"))
        .arg(format!("--lease-namespace={ns}"))
        .arg(format!("--metrics-addr=127.0.0.1:{metrics}"))
        .arg("--probe-addr=off")
        .args(flags)
        .env("POD_NAME", name)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .kill_on_drop(true)
        .spawn()
        .expect("spawn bosun run");
    Replica {
        name,
        child,
        metrics,
        log,
    }
}

/// Sends `signal` (`-9`, `-TERM`, …) to `child`.
pub fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("pid");
    let ok = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {signal} {pid}");
}

/// The `/metrics` text served on `port`, once it answers.
pub async fn metrics(port: u16) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    Some(buf)
}

/// The value of the one series whose line starts with `prefix` and contains `with`.
pub fn series(text: &str, prefix: &str, with: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix) && l.contains(with))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

pub async fn install(client: &Client, crds: Vec<CustomResourceDefinition>) {
    bosun_testenv::kit::install_crds(client, crds)
        .await
        .expect("crds served");
}

/// The CRDs `bosun crd --watches` prints for `watches`.
pub fn watches_crds(watches: &Path) -> Vec<CustomResourceDefinition> {
    let out = super::ok(
        watches.parent().expect("dir"),
        &["crd", &format!("--watches={}", watches.display())],
    );
    super::docs(&out)
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("a CRD"))
        .collect()
}

/// The custom resource `kind` (`plural`) of `group`, version v1.
pub fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

/// A chart's template: the ConfigMap `<release>-cm` holding the value `size`.
pub const CM_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  size: {{ .Values.size | quote }}\n";

/// A chart's template: a hook that persists, the ConfigMap `<release>-hook` created at the
/// install only (by a plain POST, not by the applier) and never updated.
pub const HOOK_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-hook\n  annotations:\n    helm.sh/hook: post-install\ndata:\n  at: install\n";

/// Writes the chart `<dir>/chart` named `name`, its values `size: 1`, with `templates`
/// (file name, text) under `templates/`; returns its directory.
pub fn write_chart(dir: &Path, name: &str, templates: &[(&str, &str)]) -> PathBuf {
    let chart = dir.join("chart");
    std::fs::create_dir_all(chart.join("templates")).expect("chart dir");
    std::fs::write(
        chart.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
    )
    .expect("Chart.yaml");
    std::fs::write(chart.join("values.yaml"), "size: 1\n").expect("values");
    for (file, text) in templates {
        std::fs::write(chart.join("templates").join(file), text).expect("template");
    }
    chart
}

/// Writes the role `<dir>/roles/<name>`, its defaults `size: 1`, its tasks `tasks`; returns
/// its directory.
pub fn write_role(dir: &Path, name: &str, tasks: &str) -> PathBuf {
    let role = dir.join("roles").join(name);
    std::fs::create_dir_all(role.join("tasks")).expect("role dir");
    std::fs::create_dir_all(role.join("defaults")).expect("role dir");
    std::fs::write(role.join("defaults/main.yml"), "---\nsize: 1\n").expect("defaults");
    std::fs::write(role.join("tasks/main.yml"), tasks).expect("tasks");
    role
}

/// Writes `<dir>/watches.yaml` with one entry: `kind` of `group` (v1) served by `what`
/// (`chart` or `role`) at `path`, with `more` (entry lines, each `  key: value\n`); installs
/// the CRDs `bosun crd` prints for it; returns its path.
pub async fn write_watches(
    client: &Client,
    dir: &Path,
    group: &str,
    kind: &str,
    what: &str,
    path: &Path,
    more: &str,
) -> PathBuf {
    let watches = dir.join("watches.yaml");
    std::fs::write(
        &watches,
        format!(
            "- group: {group}\n  version: v1\n  kind: {kind}\n  {what}: {}\n{more}",
            path.display()
        ),
    )
    .expect("watches");
    install(client, watches_crds(&watches)).await;
    watches
}
