//! What the CLI tests share: running the `bosun` binary, reading a written tree, applying
//! YAML to the test control plane, and a kubeconfig for a ServiceAccount (an operator run as
//! its own account, as in a cluster). Each test binary uses a part of it.
#![allow(dead_code)]
pub mod sharded;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::ResourceExt;
use serde::Deserialize;
use serde_json::Value;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn run(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run bosun")
}

/// What a successful command printed.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "bosun {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// Every file under `dir` (relative, `/`-separated) with its contents.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).expect("ls").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).expect("under root");
                out.insert(
                    rel.to_string_lossy().replace('\\', "/"),
                    std::fs::read(&p).expect("read"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The documents of a YAML stream.
pub fn docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).expect("yaml"))
        .filter(|v| !v.is_null())
        .collect()
}

/// Server-side applies `value` (as kubectl apply --server-side), in `namespace` when given,
/// else where its metadata says; its kind is discovered.
pub async fn apply(client: &kube::Client, mut value: Value, namespace: Option<&str>) {
    if let Some(ns) = namespace {
        value["metadata"]["namespace"] = ns.into();
    }
    let obj: DynamicObject = serde_json::from_value(value.clone()).expect("object");
    let tm = obj.types.clone().expect("types");
    let gvk = GroupVersionKind::try_from(&tm).expect("gvk");
    // Rediscovered per object: a CRD applied just before is served by the next one.
    let (ar, caps) = bosun_testenv::eventually(30, || async {
        let d = kube::discovery::Discovery::new(client.clone())
            .run()
            .await
            .ok()?;
        d.resolve_gvk(&gvk)
    })
    .await
    .unwrap_or_else(|| panic!("{gvk:?} is not served"));
    let api: Api<DynamicObject> = match (caps.scope, obj.namespace()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), &ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        &obj.name_any(),
        &PatchParams::apply("bosun-cli-test").force(),
        &Patch::Apply(&value),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {} {}: {e}", tm.kind, obj.name_any()));
}

/// Applies every object of a YAML stream.
pub async fn apply_yaml(client: &kube::Client, yaml: &str, namespace: Option<&str>) {
    for doc in docs(yaml) {
        apply(client, doc, namespace).await;
    }
}

/// Writes to `path` a kubeconfig for the control plane that authenticates as the
/// ServiceAccount `namespace/name` (a TokenRequest's token), as an operator in a pod would.
pub async fn service_account_kubeconfig(
    cp: &bosun_testenv::ControlPlane,
    admin: &kube::Client,
    namespace: &str,
    name: &str,
    path: &Path,
) {
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            name,
            &PostParams::default(),
            &TokenRequest::default(),
        )
        .await
        .expect("token request")
        .status
        .expect("status")
        .token;
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: sa}}\ncurrent-context: c\n",
            cp.server()
        ),
    )
    .expect("kubeconfig");
}
