//! `bosun dev --use-current-cluster` next to an installed bosun (issue 12, finding 11): the
//! installed one holds its leader Lease, and `bosun dev` must not run a second writer next to
//! it. Here the "installed bosun" is a Lease held by another identity, renewed for an hour;
//! nothing converges the sample, so `bosun dev --once` gives up after its timeout — having
//! written no child.
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use bosun_testenv::{shared, test_namespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

const HANG_GUARD: Duration = Duration::from_secs(300);

#[tokio::test]
async fn dev_on_a_cluster_with_bosun_installed_writes_nothing() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let pp = PatchParams::apply("test").force();
    let system: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "bosun-system"}}))
            .expect("ns");
    Api::<Namespace>::all(client.clone())
        .patch("bosun-system", &pp, &Patch::Apply(&system))
        .await
        .expect("namespace");
    let now = MicroTime(Timestamp::now());
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "bosun-leader", "namespace": "bosun-system"},
        "spec": {"holderIdentity": "installed-bosun-7d9f", "leaseDurationSeconds": 3600,
                 "acquireTime": now, "renewTime": now}
    }))
    .expect("lease");
    Api::<Lease>::namespaced(client.clone(), "bosun-system")
        .patch("bosun-leader", &pp, &Patch::Apply(&lease))
        .await
        .expect("lease");
    let ns = test_namespace(&client, "dev-installed")
        .await
        .expect("namespace");

    let home = tempfile::tempdir().expect("home");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bosun"));
    cmd.args(["dev", "--use-current-cluster", "--once", "--timeout", "10"])
        .args(["--namespace", &ns])
        .env("KUBECONFIG", cp.kubeconfig())
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().expect("spawn bosun dev");
    let pgid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(HANG_GUARD) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .status();
            panic!("bosun dev still running after {HANG_GUARD:?}");
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let written = deployments
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .len();
    assert_eq!(
        written, 0,
        "bosun dev wrote children next to the installed bosun; its output:\n{stderr}"
    );
    assert!(
        stderr.contains("installed-bosun-7d9f"),
        "the installed bosun is named: {stderr}"
    );
}
