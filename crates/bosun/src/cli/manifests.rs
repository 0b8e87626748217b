//! `bosun manifests`: everything needed to install bosun, generated from the code (CRDs, RBAC
//! from each operator's rule list, the Deployment, the metrics Service). Pure builders; the
//! committed `deploy/base/bosun.yaml` is this output at the defaults (checked by a test), and
//! the Helm chart under `charts/bosun` renders the same objects.
use bosun_bookstore::BookStore;
use clap::Args;
use kube::CustomResourceExt;
use serde_json::{json, Value};

#[derive(Args, Debug, Clone)]
pub struct ManifestArgs {
    /// Container image of bosun.
    #[arg(long, default_value = "ghcr.io/bosun-dev/bosun:0.1.0")]
    pub image: String,
    /// Namespace bosun runs in.
    #[arg(long, default_value = "bosun-system")]
    pub namespace: String,
    /// Operators to enable (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "bookstore")]
    pub operators: Vec<String>,
    /// Namespaces to watch (comma-separated); all when empty. When set, RBAC for the
    /// operators' resources is granted with a Role in each watched namespace only.
    #[arg(long, value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Replicas (leader election keeps one active).
    #[arg(long, default_value_t = 2)]
    pub replicas: i32,
    /// Log format: text or json.
    #[arg(long, default_value = "json")]
    pub log_format: String,
}

impl Default for ManifestArgs {
    fn default() -> Self {
        ManifestArgs {
            image: "ghcr.io/bosun-dev/bosun:0.1.0".into(),
            namespace: "bosun-system".into(),
            operators: vec!["bookstore".into()],
            watch_namespaces: vec![],
            replicas: 2,
            log_format: "json".into(),
        }
    }
}

const NAME: &str = "bosun";

fn labels() -> Value {
    json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "operator"})
}

fn rules_json(rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>) -> Value {
    serde_json::to_value(rules).unwrap_or(Value::Null)
}

/// Every object, in apply order.
pub fn objects(a: &ManifestArgs) -> Vec<Value> {
    let ns = &a.namespace;
    let mut out = Vec::new();
    if a.operators.iter().any(|o| o == "bookstore") {
        out.push(serde_json::to_value(BookStore::crd()).unwrap_or(Value::Null));
    }
    if a.operators.iter().any(|o| o == "myownshell") {
        out.push(serde_json::to_value(bosun_myownshell::MyOwnShell::crd()).unwrap_or(Value::Null));
    }
    out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": ns, "labels": labels()}}));

    let mut namespaced_rules = Vec::new();
    let mut cluster_rules = Vec::new();
    if a.operators.iter().any(|o| o == "bookstore") {
        namespaced_rules.extend(bosun_bookstore::rbac::rules());
        cluster_rules.extend(bosun_bookstore::rbac::cluster_rules());
    }
    if a.operators.iter().any(|o| o == "myownshell") {
        namespaced_rules.extend(bosun_myownshell::controller::rbac_rules());
    }
    // The metrics endpoint checks scrapers with TokenReview + SubjectAccessReview.
    cluster_rules.push(serde_json::from_value(json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]})).unwrap_or_default());
    cluster_rules.push(serde_json::from_value(json!({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]})).unwrap_or_default());
    let subject = json!([{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]);
    let binding = |kind: &str, name: &str, role_kind: &str, namespace: Option<&str>| {
        let mut meta = json!({"name": name, "labels": labels()});
        if let Some(n) = namespace {
            meta["namespace"] = json!(n);
        }
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
               "subjects": subject})
    };
    if a.watch_namespaces.is_empty() {
        let mut all = namespaced_rules.clone();
        all.extend(cluster_rules.clone());
        out.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": NAME, "labels": labels()}, "rules": rules_json(all)}),
        );
        out.push(binding("ClusterRoleBinding", NAME, "ClusterRole", None));
    } else {
        let cluster_name = format!("{NAME}-cluster");
        out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                        "metadata": {"name": cluster_name, "labels": labels()}, "rules": rules_json(cluster_rules)}));
        out.push(binding(
            "ClusterRoleBinding",
            &cluster_name,
            "ClusterRole",
            None,
        ));
        for w in &a.watch_namespaces {
            out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                            "metadata": {"name": NAME, "namespace": w, "labels": labels()}, "rules": rules_json(namespaced_rules.clone())}));
            out.push(binding("RoleBinding", NAME, "Role", Some(w)));
        }
    }
    // Bind this to Prometheus' ServiceAccount to let it scrape /metrics.
    out.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": format!("{NAME}-metrics-reader"), "labels": labels()},
                    "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
    );
    // Leader election: only the Lease it uses, in its own namespace.
    let lease_name = format!("{NAME}-leader-election");
    out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": lease_name, "namespace": ns, "labels": labels()},
                    "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]}));
    out.push(binding("RoleBinding", &lease_name, "Role", Some(ns)));

    let mut args = vec![
        "run".to_string(),
        "--leader-elect".into(),
        "--lease-name=bosun-leader".into(),
        format!("--operators={}", a.operators.join(",")),
        format!("--log-format={}", a.log_format),
        "--metrics-addr=0.0.0.0:8080".into(),
        "--metrics-secure".into(),
        "--probe-addr=0.0.0.0:8081".into(),
    ];
    if !a.watch_namespaces.is_empty() {
        args.push(format!("--namespaces={}", a.watch_namespaces.join(",")));
    }
    out.push(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": ns, "labels": labels()},
        "spec": {
            "replicas": a.replicas,
            "selector": {"matchLabels": labels()},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": NAME,
                        "image": a.image,
                        "args": args,
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
                        ],
                        "ports": [
                            {"name": "metrics", "containerPort": 8080, "protocol": "TCP"},
                            {"name": "probes", "containerPort": 8081, "protocol": "TCP"}
                        ],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "probes"}, "initialDelaySeconds": 5, "periodSeconds": 10},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "probes"}, "periodSeconds": 5},
                        // Sized from the benchmark (BENCHMARKS.md): ~20 MB RSS at 1000 BookStores.
                        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                            "privileged": false, "capabilities": {"drop": ["ALL"]}}
                    }]
                }
            }
        }
    }));
    out.push(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("{NAME}-metrics"), "namespace": ns, "labels": labels()},
        "spec": {"selector": labels(), "ports": [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]}
    }));
    out
}

pub fn yaml(a: &ManifestArgs) -> anyhow::Result<String> {
    let mut s = String::new();
    for o in objects(a) {
        s.push_str("---\n");
        s.push_str(&serde_yaml::to_string(&o)?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_base_is_fresh() {
        let committed = include_str!("../../../../deploy/base/bosun.yaml");
        assert!(
            committed == yaml(&ManifestArgs::default()).expect("yaml"),
            "deploy/base/bosun.yaml is stale: run `cargo run -p bosun -- manifests > deploy/base/bosun.yaml`"
        );
    }

    #[test]
    fn committed_namespaced_overlay_is_fresh() {
        let committed = include_str!("../../../../deploy/overlays/namespaced/bosun.yaml");
        let args = ManifestArgs {
            watch_namespaces: vec!["shop".into()],
            ..Default::default()
        };
        assert!(
            committed == yaml(&args).expect("yaml"),
            "deploy/overlays/namespaced/bosun.yaml is stale: run `cargo run -p bosun -- manifests --watch-namespaces=shop > deploy/overlays/namespaced/bosun.yaml`"
        );
    }

    #[test]
    fn no_wildcard_in_any_rule() {
        for args in [
            ManifestArgs::default(),
            ManifestArgs {
                watch_namespaces: vec!["a".into(), "b".into()],
                ..Default::default()
            },
        ] {
            let text = serde_json::to_string(&objects(&args)).expect("json");
            assert!(!text.contains("\"*\""), "wildcard found");
        }
    }

    #[test]
    fn restricted_security_context() {
        let objs = objects(&ManifestArgs::default());
        let dep = objs
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        let pod = &dep["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(
            (
                c["readOnlyRootFilesystem"].as_bool(),
                c["allowPrivilegeEscalation"].as_bool()
            ),
            (Some(true), Some(false))
        );
        assert_eq!(c["capabilities"]["drop"][0], "ALL");
        assert_eq!(dep["spec"]["replicas"], 2);
    }

    #[test]
    fn namespaced_install_uses_roles_per_watched_namespace() {
        let objs = objects(&ManifestArgs {
            watch_namespaces: vec!["shop".into()],
            ..Default::default()
        });
        let role = objs
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == "shop")
            .expect("role in shop");
        assert!(role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["resources"][0] == "bookstores"));
        let cr = objs
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        assert!(
            !serde_json::to_string(cr)
                .expect("json")
                .contains("bookstores"),
            "cluster role is only cluster-scoped reads"
        );
    }
}
