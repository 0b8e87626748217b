//! What the differential tests against operator-sdk's operators share: where the peers are,
//! the seed's BookStore kind, a running operator process, and a CR's conditions.
#![allow(dead_code)]
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where `scripts/setup-peers.sh` installs the peers: `$BOSUN_PEERS`, else the cache directory
/// named after the operator-sdk release pinned in scripts/peers/go.mod.
pub fn peers() -> PathBuf {
    if let Some(dir) = std::env::var_os("BOSUN_PEERS") {
        return PathBuf::from(dir);
    }
    let gomod = std::fs::read_to_string(repo().join("scripts/peers/go.mod"))
        .expect("scripts/peers/go.mod pins the peers");
    let version = gomod
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("github.com/operator-framework/operator-sdk ")
        })
        .find_map(|rest| rest.split_whitespace().next())
        .expect("scripts/peers/go.mod requires github.com/operator-framework/operator-sdk");
    let home = std::env::var_os("HOME").expect("HOME");
    Path::new(&home).join(".cache/bosun/peers").join(version)
}

/// The peer binary `name`; a missing one fails the test naming the script that builds it.
pub fn peer(name: &str) -> PathBuf {
    let p = peers().join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `bash scripts/setup-peers.sh` first (or `bash scripts/test-peers.sh`, \
         which runs it and these tests)",
        p.display()
    );
    p
}

pub fn bookstores() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
        "bookstores",
    )
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub fn conditions(o: &DynamicObject) -> BTreeMap<String, (String, String)> {
    o.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_string(),
                (
                    c["status"].as_str().unwrap_or_default().to_string(),
                    c["reason"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect()
}

/// An operator process, killed when dropped (a failing assertion must not leave it running).
/// A peer's process, and for ansible-operator the machine-wide lock it runs under.
pub struct Running(pub tokio::process::Child, pub Option<std::fs::File>);

impl Running {
    pub async fn stop(mut self) {
        let _ = self.0.start_kill();
        let _ = self.0.wait().await;
    }
}

/// ansible-operator as its image and scaffolded Deployment run it, from the project directory
/// `project` (roles found under it): Ansible and ansible-runner from the peer's venv first on
/// PATH, the project's own `operator_sdk.util` collection (Galaxy is out of reach here),
/// limited to `ns`, its log in `log`.
pub fn start_ansible_operator(
    project: &Path,
    watches: &str,
    kubeconfig: &Path,
    ns: &str,
    log: &Path,
    tmp: &Path,
) -> Running {
    let bin = peer("ansible-operator");
    let venv = peers().join("venv/bin");
    assert!(
        venv.join("ansible-runner").is_file(),
        "{} is missing: run `bash scripts/setup-peers.sh` first",
        venv.join("ansible-runner").display()
    );
    let path = std::env::join_paths(std::iter::once(venv).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    // Its proxy for the roles listens on localhost:8888, and v1.42.2 points the roles' client
    // there whatever `--proxy-port` says: one ansible-operator at a time on the machine (test
    // binaries run in parallel), held until this one stops.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("bosun-ansible-operator-8888.lock"))
        .expect("ansible-operator's lock file");
    lock.lock().expect("ansible-operator's lock");
    let child = tokio::process::Command::new(bin)
        .args([
            "run",
            &format!("--watches-file={watches}"),
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
        ])
        .current_dir(project)
        .env("KUBECONFIG", kubeconfig)
        .env("WATCH_NAMESPACE", ns)
        .env("PATH", path)
        .env(
            "ANSIBLE_COLLECTIONS_PATH",
            repo().join("crates/ansible-runner/collection"),
        )
        // As the scaffold's manager Deployment sets it: roles run without gathering facts.
        .env("ANSIBLE_GATHERING", "explicit")
        .env("ANSIBLE_LOCAL_TEMP", tmp)
        .env("HOME", tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .kill_on_drop(true)
        .spawn()
        .expect("start ansible-operator");
    Running(child, Some(lock))
}

/// `bosun run --watches <watches>` limited to `ns`, its log in `log`.
pub fn start_bosun_watches(watches: &Path, kubeconfig: &Path, ns: &str, log: &Path) -> Running {
    bosun_watches(watches, kubeconfig, ns, log, None)
}

/// The same with real Ansible at hand (`scripts/setup-ansible.sh`'s ansible-runner), for
/// roles that run whole under it.
pub fn start_bosun_with_ansible(
    watches: &Path,
    kubeconfig: &Path,
    ns: &str,
    log: &Path,
) -> Running {
    let runner = ansible_venv().join("bin/ansible-runner");
    bosun_watches(watches, kubeconfig, ns, log, Some(runner))
}

fn bosun_watches(
    watches: &Path,
    kubeconfig: &Path,
    ns: &str,
    log: &Path,
    ansible_runner: Option<PathBuf>,
) -> Running {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"));
    cmd.args([
        "run".to_string(),
        format!("--watches={}", watches.display()),
        format!("--metrics-addr=127.0.0.1:{}", free_port()),
        format!("--probe-addr=127.0.0.1:{}", free_port()),
    ])
    .env("KUBECONFIG", kubeconfig)
    .env("WATCH_NAMESPACE", ns);
    if let Some(runner) = ansible_runner {
        cmd.env("BOSUN_ANSIBLE_RUNNER", runner);
    }
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .kill_on_drop(true)
        .spawn()
        .expect("start bosun");
    Running(child, None)
}

/// The Ansible venv `scripts/setup-ansible.sh` makes (or finds), as the script prints it.
pub fn ansible_venv() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/setup-ansible.sh"))
        .output()
        .expect("run scripts/setup-ansible.sh");
    assert!(
        out.status.success(),
        "scripts/setup-ansible.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A condition of `o` as written: (status, reason, message).
pub fn condition(o: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    o.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("status"), s("reason"), s("message"))
        })
}

// What the Helm differential tests compare (peer_helm, peer_helm_scenarios).
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use serde_json::{json, Value};

/// An object with what the API server or the cluster decides removed or replaced:
/// identities, times, versions, allocated addresses and ports, the namespace, and the status
/// other controllers write.
pub fn normalise(mut v: Value, ns: &str) -> Value {
    let m = &mut v["metadata"];
    if let Some(m) = m.as_object_mut() {
        for k in [
            "managedFields",
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "generation",
            "namespace",
        ] {
            m.remove(k);
        }
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            // The Deployment controller's, after either operator wrote the object.
            a.remove("deployment.kubernetes.io/revision");
            if a.is_empty() {
                m.remove("annotations");
            }
        }
        if let Some(refs) = m.get_mut("ownerReferences").and_then(Value::as_array_mut) {
            for r in refs {
                if let Some(r) = r.as_object_mut() {
                    r.remove("uid");
                }
            }
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(spec) = v["spec"].as_object_mut() {
        for k in ["clusterIP", "clusterIPs"] {
            spec.remove(k);
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                if let Some(p) = p.as_object_mut() {
                    p.remove("nodePort");
                }
            }
        }
    }
    let text = v.to_string().replace(ns, "NAMESPACE");
    serde_json::from_str(&text).expect("json")
}

/// A release record as the facts that must agree: decoded, times dropped, the namespace
/// replaced; with the Secret's labels (timestamps dropped) and whether the CR owns it.
pub fn record(s: &Secret, ns: &str) -> Value {
    let data = s.data.as_ref().expect("release data");
    let text = String::from_utf8(data["release"].0.clone()).expect("base64 text");
    let rec = bosun_helm_operator::release::decode(&text).expect("a Helm release record");
    let mut labels = s.labels().clone();
    labels.remove("createdAt");
    labels.remove("modifiedAt");
    let v = json!({
        "type": s.type_,
        "labels": labels,
        "name": rec.name,
        "version": rec.version,
        "namespace": rec.namespace,
        "status": rec.info.status,
        "description": rec.info.description,
        "notes": rec.info.notes,
        "chart": rec.chart["metadata"],
        "values": rec.chart["values"],
        "config": rec.config,
        "manifest": rec.manifest,
        "hooks": rec.hooks.len(),
    });
    let v = serde_json::from_str(&v.to_string().replace(ns, "NAMESPACE")).expect("json");
    as_go_decodes(v)
}

/// A JSON value as Go's `encoding/json` decodes it into `interface{}`: every number a float64,
/// so `80` and `80.0` are one value (Helm reads a record's values that way).
pub fn as_go_decodes(v: Value) -> Value {
    match v {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(a) => Value::Array(a.into_iter().map(as_go_decodes).collect()),
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, v)| (k, as_go_decodes(v))).collect())
        }
        other => other,
    }
}

/// A release manifest with each document's trailing whitespace removed, as Helm v3's
/// `releaseutil.SplitManifests` leaves it.
pub fn trimmed_documents(manifest: &str) -> String {
    manifest
        .split("---\n# Source: ")
        .filter(|d| !d.is_empty())
        .map(|d| format!("---\n# Source: {}\n", d.trim_end()))
        .collect()
}
