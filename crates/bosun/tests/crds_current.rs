//! Every CRD bosun generates — the coded operators' and those it infers for the Helm and
//! Ansible flavours from the seed's watches files — is accepted by the current API server
//! **without a warning** (a schema a newer server only tolerates, an unknown format, a
//! deprecated field, shows up as a `Warning` response header before it becomes an error).
use std::path::Path;

use bosun_testenv::shared;

fn bosun_crd(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("crd")
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("run bosun crd");
    assert!(
        out.status.success(),
        "bosun crd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

#[tokio::test]
async fn generated_crds_are_accepted_by_the_current_server_without_warnings() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(client.clone());
    let mut checked = Vec::new();
    for args in [
        vec![],
        vec!["--watches", "examples/helm-bookstore/watches.yaml"],
        vec!["--watches", "examples/ansible-bookstore/watches.yaml"],
    ] {
        // The flavours' CRDs share the coded BookStore's name with other versions: each set
        // starts from no CRD of its names (a stored version may not be dropped).
        let yaml = bosun_crd(&args);
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&yaml) {
            let value: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            if !value.is_null() {
                docs.push(value);
            }
        }
        assert!(!docs.is_empty(), "bosun crd {args:?} printed no CRD");
        for crd in &docs {
            let name = crd["metadata"]["name"].as_str().expect("name");
            let _ = crds.delete(name, &Default::default()).await;
            let gone = bosun_testenv::eventually(60, || {
                let crds = crds.clone();
                async move { crds.get_opt(name).await.ok()?.is_none().then_some(()) }
            })
            .await;
            assert!(gone.is_some(), "{name} not deleted");
        }
        for crd in docs {
            checked.push(apply_and_check(&client, crd).await);
        }
    }
    assert!(
        checked
            .iter()
            .filter(|n| *n == "bookstores.charts.example.com")
            .count()
            == 3,
        "{checked:?}"
    );
}

/// Applies one CRD, asserting no warning, and waits until it is served.
async fn apply_and_check(client: &kube::Client, crd: serde_json::Value) -> String {
    let name = crd["metadata"]["name"].as_str().expect("name").to_string();
    let warnings = bosun_testenv::kit::apply_crd_warnings(client, &crd)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        warnings.is_empty(),
        "{name}: the server warns: {warnings:?}"
    );
    bosun_testenv::kit::install_crds(client, [serde_json::from_value(crd).expect("a CRD")])
        .await
        .expect("served");
    name
}
