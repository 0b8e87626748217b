//! The generated install manifests on the real API server: they apply, and `bosun run` (the
//! binary), authenticated with a token of the ServiceAccount they create, converges a
//! BookStore — so the generated RBAC is enough — and serves its metrics and probes.
use std::process::Stdio;
use std::time::Duration;

use bosun_testenv::{shared, test_namespace, NodeAgent, NodeAgentConfig};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::Discovery;
use kube::ResourceExt;

fn bosun(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(args)
        .output()
        .expect("run bosun");
    assert!(
        out.status.success(),
        "bosun {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

async fn apply_all(client: &kube::Client, yaml: &str) {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        if value.is_null() {
            continue;
        }
        if value["kind"] == "CustomResourceDefinition" {
            // Applied and waited for until its kind is served.
            let crd = serde_json::from_value(value).expect("CRD");
            bosun_testenv::kit::install_crds(client, [crd])
                .await
                .expect("CRD served");
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(value.clone()).expect("object");
        let tm = obj.types.clone().expect("types");
        let gvk = GroupVersionKind::try_from(&tm).expect("gvk");
        let (ar, caps) = match discovery.resolve_gvk(&gvk) {
            Some(found) => found,
            None => {
                // A CRD applied just before: rediscover.
                let d = Discovery::new(client.clone())
                    .run()
                    .await
                    .expect("discovery");
                d.resolve_gvk(&gvk).expect("resolvable kind")
            }
        };
        let api: Api<DynamicObject> = match (caps.scope, obj.namespace()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), &ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            &obj.name_any(),
            &PatchParams::apply("bosun-install-test").force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {} {}: {e}", tm.kind, obj.name_any()));
    }
}

/// The README claims a restricted pod: the operator's pod, as the manifests' Deployment
/// makes it, is admitted by Pod Security admission in a namespace that enforces `restricted`
/// (server-side dry run of a Pod from the template), while a privileged pod is refused there
/// (so the label is enforced, not ignored).
#[tokio::test]
async fn the_operator_pod_is_admitted_where_pod_security_is_restricted() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "install-psa").await.expect("ns");
    let restricted = serde_json::json!({
        "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}
    });
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&restricted))
        .await
        .expect("label the namespace restricted");
    let yaml = bosun(&["manifests", &format!("--namespace={ns}")]);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), &ns);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut admitted = 0;
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        if value["kind"] != "Deployment" {
            continue;
        }
        let template = &value["spec"]["template"];
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "psa-check", "labels": template["metadata"]["labels"]},
            "spec": template["spec"],
        }))
        .expect("pod from the template");
        pods.create(&dry, &pod).await.unwrap_or_else(|e| {
            panic!(
                "the {} Deployment's pod is refused: {e}",
                value["metadata"]["name"]
            )
        });
        admitted += 1;
    }
    assert!(admitted >= 1, "no Deployment in the manifests");
    let privileged: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "psa-negative"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "securityContext": {"privileged": true}}]}
    }))
    .expect("pod");
    match pods.create(&dry, &privileged).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            assert!(s.message.contains("restricted"), "{}", s.message);
        }
        other => panic!("a privileged pod was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn generated_manifests_install_and_the_service_account_can_run_the_operator() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let yaml = bosun(&["manifests"]);
    assert!(
        !yaml.contains("\"*\"") && !yaml.contains("- '*'") && !yaml.contains("- \"*\""),
        "no wildcard"
    );
    apply_all(&admin, &yaml).await;
    // Storage class for the claims (a real cluster has one).
    let sc: k8s_openapi::api::storage::v1::StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "bosun.dev/simulated", "allowVolumeExpansion": true
    }))
    .expect("sc");
    let _ = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &sc)
        .await;

    // A real token of the ServiceAccount the manifests created.
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "bosun-system");
    let tr = TokenRequest {
        spec: Default::default(),
        ..Default::default()
    };
    let token = sas
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "bosun",
            &PostParams::default(),
            &tr,
        )
        .await
        .expect("token request")
        .status
        .expect("status")
        .token;
    let kubeconfig = cp.dir().join("bosun-sa.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: sa}}\ncurrent-context: c\n",
            cp.server()
        ),
    )
    .expect("kubeconfig");

    let ns = test_namespace(&admin, "install").await.expect("ns");
    let _agent = NodeAgent::start(
        admin.clone(),
        NodeAgentConfig {
            namespace: Some(ns.clone()),
            resize_needs_restart: false,
        },
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args([
            "run",
            "--leader-elect",
            "--lease-name=bosun-leader",
            "--lease-namespace=bosun-system",
        ])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--metrics-addr=127.0.0.1:{port}"))
        .arg(format!("--probe-addr=127.0.0.1:{port}"))
        .arg("--metrics-secure")
        .arg("--log-format=json")
        .env("POD_NAME", "bosun-test-0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn bosun run");

    let bs: bosun_bookstore::BookStore = serde_yaml::from_str(&format!(
        "apiVersion: charts.example.com/v1\nkind: BookStore\nmetadata:\n  name: installed\n  namespace: {ns}\nspec: {{}}\n"
    ))
    .expect("bs");
    let bss: Api<bosun_bookstore::BookStore> = Api::namespaced(admin.clone(), &ns);
    bss.create(&PostParams::default(), &bs)
        .await
        .expect("create");
    let mut ready = false;
    for _ in 0..300 {
        if let Ok(b) = bss.get("installed").await {
            if b.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            }) {
                ready = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !ready {
        let _ = child.start_kill();
        let out = child.wait_with_output().await.expect("output");
        panic!(
            "not Ready; bosun run said:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Leader election used the Lease the Role allows.
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(admin.clone(), "bosun-system")
            .get("bosun-leader")
            .await
            .expect("lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("bosun-test-0")
    );

    // Metrics from the binary, behind TokenReview + SubjectAccessReview.
    assert!(
        http_get(port, "/metrics", None)
            .await
            .starts_with("HTTP/1.0 401"),
        "no token: 401"
    );
    assert!(
        http_get(port, "/metrics", Some("not-a-token"))
            .await
            .starts_with("HTTP/1.0 401"),
        "bad token: 401"
    );
    assert!(
        http_get(port, "/metrics", Some(&token))
            .await
            .starts_with("HTTP/1.0 403"),
        "bosun's own SA may not read metrics: 403"
    );
    let kc = std::fs::read_to_string(cp.kubeconfig()).expect("kubeconfig");
    let admin_token = kc
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("admin token")
        .to_string();
    let body = http_get(port, "/metrics", Some(&admin_token)).await;
    assert!(
        body.contains(
            r#"controller_runtime_reconcile_total{controller="bookstore",result="success"}"#
        ),
        "{body}"
    );
    assert!(body.contains(r#"leader_election_master_status{name="bosun-leader"} 1"#));
    assert!(
        http_get(port, "/readyz", None)
            .await
            .contains("caches synced"),
        "probes need no token"
    );

    // SIGTERM: graceful shutdown releases the lease.
    let pid = child.id().expect("pid");
    // SAFETY: sending a signal to our own child.
    unsafe { libc_kill(pid as i32, 15) };
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exited")
        .expect("status");
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(admin.clone(), "bosun-system")
            .get("bosun-leader")
            .await
            .expect("lease");
    assert_eq!(lease.spec.and_then(|s| s.holder_identity), None, "released");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

async fn http_get(port: u16, path: &str, token: Option<&str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.expect("read");
    buf
}

/// The webhook objects `bosun manifests --webhooks` adds pass the API server's validation
/// (server-side dry run: cert-manager's kinds are left out, the test control plane has none).
#[tokio::test]
async fn webhook_manifests_are_valid_objects() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "install-webhooks")
        .await
        .expect("namespace");
    let yaml = bosun(&[
        "manifests",
        "--operators=bookstore,vmgroup",
        "--webhooks=bookstore,vmgroup",
        &format!("--namespace={ns}"),
    ]);
    let discovery = Discovery::new(admin.clone())
        .run()
        .await
        .expect("discovery");
    let mut checked = vec![];
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let wanted = [
            "CustomResourceDefinition",
            "Deployment",
            "Service",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ];
        if !wanted.contains(&kind.as_str()) {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(value.clone()).expect("object");
        let gvk = GroupVersionKind::try_from(&obj.types.clone().expect("types")).expect("gvk");
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .expect("a kind the API server has");
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => Api::namespaced_with(admin.clone(), &ns, &ar),
            _ => Api::all_with(admin.clone(), &ar),
        };
        let mut pp = PatchParams::apply("bosun-install-test").force();
        pp.dry_run = true;
        api.patch(&obj.name_any(), &pp, &Patch::Apply(&value))
            .await
            .unwrap_or_else(|e| panic!("{kind} {}: {e}", obj.name_any()));
        checked.push(format!("{kind}/{}", obj.name_any()));
    }
    for expected in [
        "MutatingWebhookConfiguration/bosun-vmgroup",
        "ValidatingWebhookConfiguration/bosun-vmgroup",
        "Service/bosun-webhook",
        "CustomResourceDefinition/bookstores.charts.example.com",
    ] {
        assert!(
            checked.iter().any(|c| c == expected),
            "{expected}: {checked:?}"
        );
    }
}
