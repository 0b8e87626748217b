//! The Helm chart renders, with Helm's own engine, the same objects `bosun manifests` prints
//! for the same settings. The renderer comes from `scripts/setup-helm.sh`.
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let venv = std::env::var_os("BOSUN_HELM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                .join(".cache/bosun/helm-venv")
        });
    let py = venv.join("bin/python");
    assert!(
        py.exists(),
        "chart renderer missing: run `bash scripts/setup-helm.sh`"
    );
    py
}

fn render(values: &Value, namespace: &str) -> Vec<Value> {
    let out = render_output(values, namespace);
    assert!(
        out.status.success(),
        "render failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn render_output(values: &Value, namespace: &str) -> std::process::Output {
    std::process::Command::new(python())
        .arg(repo().join("charts/render.py"))
        .arg(repo().join("charts/bosun"))
        .arg(values.to_string())
        .arg(namespace)
        .output()
        .expect("render")
}

fn manifests(args: &[&str]) -> Vec<Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bosun"))
        .arg("manifests")
        .args(args)
        .output()
        .expect("bosun");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf8");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn key(v: &Value) -> String {
    format!(
        "{}/{}/{}",
        v["kind"].as_str().unwrap_or(""),
        v["metadata"]["namespace"].as_str().unwrap_or(""),
        v["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// Objects by kind/namespace/name, without the Namespace (Helm installs into an existing or
/// `--create-namespace` namespace) and with CRDs split out (the chart ships all in `crds/`).
fn index(objs: Vec<Value>) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let (crds, rest): (Vec<Value>, Vec<Value>) = objs
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    (
        rest.into_iter().map(|o| (key(&o), o)).collect(),
        crds.into_iter().map(|o| (key(&o), o)).collect(),
    )
}

fn assert_same(chart: Vec<Value>, cli: Vec<Value>) {
    let (chart, chart_crds) = index(chart);
    let (cli, cli_crds) = index(cli);
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        cli.keys().collect::<Vec<_>>(),
        "same objects"
    );
    for (k, v) in &cli {
        assert_eq!(&chart[k], v, "{k} differs");
    }
    for (k, v) in &cli_crds {
        assert_eq!(
            chart_crds.get(k),
            Some(v),
            "chart crds/ lacks or differs on {k}"
        );
    }
}

#[test]
fn chart_defaults_render_what_bosun_manifests_prints() {
    assert_same(
        render(&serde_json::json!({}), "bosun-system"),
        manifests(&[]),
    );
}

#[test]
fn chart_with_settings_renders_the_same_as_the_flags() {
    let values = serde_json::json!({
        "image": "registry.example/bosun:1.2.3", "replicas": 3, "logFormat": "text",
        "watchNamespaces": ["shop", "books"], "operators": ["bookstore", "myownshell"]
    });
    let cli = manifests(&[
        "--image=registry.example/bosun:1.2.3",
        "--replicas=3",
        "--log-format=text",
        "--watch-namespaces=shop,books",
        "--operators=bookstore,myownshell",
        "--namespace=ops",
    ]);
    assert_same(render(&values, "ops"), cli);
}

#[test]
fn chart_with_webhooks_renders_the_same_as_the_flags() {
    let values = serde_json::json!({
        "operators": ["bookstore", "vmgroup"], "webhooks": ["vmgroup"]
    });
    let cli = manifests(&[
        "--operators=bookstore,vmgroup",
        "--webhooks=vmgroup",
        "--namespace=ops",
    ]);
    assert!(cli
        .iter()
        .any(|o| o["kind"] == "ValidatingWebhookConfiguration"));
    assert_same(render(&values, "ops"), cli);
}

/// Watched namespaces: the admission webhooks review those namespaces only, in the chart as
/// in the flags.
#[test]
fn chart_with_webhooks_and_watched_namespaces_renders_the_same_as_the_flags() {
    let values = serde_json::json!({
        "operators": ["vmgroup"], "webhooks": ["vmgroup"], "watchNamespaces": ["shop", "books"]
    });
    let cli = manifests(&[
        "--operators=vmgroup",
        "--webhooks=vmgroup",
        "--watch-namespaces=shop,books",
        "--namespace=ops",
    ]);
    let hooks: Vec<&Value> = cli
        .iter()
        .filter(|o| {
            o["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("WebhookConfiguration"))
        })
        .flat_map(|o| o["webhooks"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(hooks.len(), 2);
    for h in hooks {
        assert_eq!(
            h["namespaceSelector"]["matchExpressions"][0]["values"],
            serde_json::json!(["books", "shop"]),
            "{h}"
        );
    }
    assert_same(render(&values, "ops"), cli);
}

/// The chart cannot template the BookStore CRD's conversion (it ships in crds/): it says so
/// and where to get it, instead of installing a conversion webhook nothing calls.
#[test]
fn chart_refuses_webhooks_it_cannot_install() {
    for (values, says) in [
        (
            serde_json::json!({"operators": ["bookstore"], "webhooks": ["bookstore"]}),
            "bosun manifests --operators=bookstore --webhooks=bookstore",
        ),
        (
            serde_json::json!({"operators": ["bookstore"], "webhooks": ["vmgroup"]}),
            "not among the operators installed",
        ),
    ] {
        let out = render_output(&values, "ops");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{values}: {err}"
        );
    }
}

#[test]
fn chart_crds_are_fresh() {
    let committed =
        std::fs::read_to_string(repo().join("charts/bosun/crds/crds.yaml")).expect("chart crds");
    assert_eq!(
        committed,
        include_str!("../../../deploy/crds/crds.yaml"),
        "charts/bosun/crds/crds.yaml is stale: copy deploy/crds/crds.yaml"
    );
}

/// `sharding.enabled` and `--sharding`: the same Deployment arg and Lease rule, also with
/// watched namespaces and several operators (each must let the sharder label its objects;
/// postgres' rules are compared by `chart_with_postgres_renders_the_same_as_the_flags`).
#[test]
fn chart_with_sharding_renders_the_same_as_the_flags() {
    let values = serde_json::json!({
        "sharding": {"enabled": true}, "replicas": 3,
        "operators": ["bookstore", "myownshell", "vmgroup"]
    });
    let cli = manifests(&[
        "--sharding",
        "--replicas=3",
        "--operators=bookstore,myownshell,vmgroup",
    ]);
    assert_same(render(&values, "bosun-system"), cli);
    let values = serde_json::json!({"sharding": {"enabled": true}, "watchNamespaces": ["shop"]});
    let cli = manifests(&["--sharding", "--watch-namespaces=shop"]);
    assert_same(render(&values, "bosun-system"), cli);
}

/// `sharding.shards` and `--shards`: the replicas, the flag and the Lease rule follow it.
#[test]
fn chart_with_shards_renders_the_same_as_the_flags() {
    let values = serde_json::json!({"sharding": {"shards": 3}});
    assert_same(render(&values, "bosun-system"), manifests(&["--shards=3"]));
}

#[test]
fn chart_with_postgres_renders_the_same_as_the_flags() {
    let values = serde_json::json!({"operators": ["postgres"]});
    assert_same(
        render(&values, "bosun-system"),
        manifests(&["--operators=postgres"]),
    );
}

/// The PostgresCluster alert rules, rendered by Helm's engine on a cluster that serves
/// PrometheusRule, read only series the operator writes (a renamed metric would leave an
/// alert that can never fire).
#[test]
fn chart_alert_rules_read_only_series_the_postgres_operator_serves() {
    let out = std::process::Command::new(python())
        .arg(repo().join("scripts/helm-oracle.py"))
        .arg("render")
        .arg(repo().join("charts/bosun"))
        .arg(serde_json::json!({"operators": ["postgres"]}).to_string())
        .arg(
            serde_json::json!({"kube_version": "v1.31.0",
                "api_versions": ["monitoring.coreos.com/v1/PrometheusRule"]})
            .to_string(),
        )
        .output()
        .expect("helm oracle");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("json");
    let text = result["ok"]["bosun/templates/prometheusrule.yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("no PrometheusRule rendered: {result}"));
    let rule: Value = serde_yaml::from_str(text).expect("yaml");
    let exprs: Vec<&str> = rule["spec"]["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["expr"].as_str().expect("expr"))
        .collect();
    assert_eq!(exprs.len(), 6, "{text}");
    let served: Vec<&str> = bosun_postgres::controller::metrics::FAMILIES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    for e in &exprs {
        let used: Vec<&str> = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|t| t.starts_with("bosun_"))
            .collect();
        assert!(!used.is_empty(), "{e}");
        for u in used {
            assert!(
                served.contains(&u),
                "{u} (in `{e}`) is not served: {served:?}"
            );
        }
    }
    // The thresholds come from the values.
    assert!(exprs.iter().any(|e| e.ends_with("> 67108864")), "{exprs:?}");
}
