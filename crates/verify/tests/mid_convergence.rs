//! The `apiserver-restart` and `spec-change` faults land mid-convergence, found by the proxy
//! (right after a seeded write of the operator's work), not after a sleep: an operator slower
//! to start than any sleep is still caught between its first write and its convergence, and a
//! bug that only a fault in that window reveals is found.
//!
//! The operator is tests/planted/widget.py (Python, standard library only) with START seconds
//! before each start's first request: 5 s, more than the old sleeps (0.2-1.5 s before the
//! restart, 0.2-2 s before the second spec), which then landed before it had done anything.
//! Each test starts its own control plane; the harness runs them side by side.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bosun_verify::report::Fault;
use bosun_verify::{operator, verify, Options, Report, Target};
use serde_json::json;

/// A slow start made certain: longer than the sleeps the faults used to follow.
const START: u32 = 5;

fn planted() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/planted")
}

/// What tests/planted/{crd,role,samples}.yaml say (this crate reads no YAML): the Widget kind,
/// what widget.py needs, and three Widgets, one with a credentials Secret.
fn target(bug: &str) -> Target {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.verify.bosun.dev"},
        "spec": {
            "group": "verify.bosun.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 5},
                        "color": {"type": "string", "enum": ["red", "blue", "green"]},
                        "credentialsSecret": {"type": "string"},
                    }},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        },
    });
    let rules = json!([
        {"apiGroups": ["verify.bosun.dev"], "resources": ["widgets", "widgets/status"],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
    ]);
    let widget = |name: &str, spec: serde_json::Value| {
        json!({"apiVersion": "verify.bosun.dev/v1", "kind": "Widget",
               "metadata": {"name": name}, "spec": spec})
    };
    Target {
        name: format!("python3 widget.py {bug} {START}"),
        command: operator::Command {
            shell: format!("python3 widget.py {bug} {START}"),
            dir: planted(),
            env: vec![],
        },
        crds: vec![serde_json::from_value(crd).expect("the Widget CRD")],
        rules: serde_json::from_value(rules).expect("the rules"),
        service_account: ("bosun-verify".into(), "operator".into()),
        samples: vec![
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "widget-credentials"},
                   "stringData": {"password": "verify-canary-8c1f3a"}}),
            widget(
                "alpha",
                json!({"size": 2, "color": "red", "credentialsSecret": "widget-credentials"}),
            ),
            widget("beta", json!({"size": 3, "color": "blue"})),
            widget("gamma", json!({"size": 1, "color": "green"})),
        ],
    }
}

struct Logs(PathBuf);

impl Drop for Logs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `bosun verify --quick --rest=3 --timeout=30 --only=<only> --seed=<seed>` of widget.py with
/// `bug`, starting START seconds late.
async fn run(bug: &str, only: &str, seed: u64) -> (Report, Logs) {
    let logs = Logs(std::env::temp_dir().join(format!(
        "bosun-verify-mid-{}-{bug}-{only}",
        std::process::id()
    )));
    let mut opts = Options::new(true, seed, logs.0.clone());
    opts.only = vec![only.to_string()];
    opts.rest = Duration::from_secs(3);
    opts.timeout = Duration::from_secs(30);
    opts.replay = format!("widget.py {bug} {START} --only={only} --seed={seed}");
    let report = verify(&target(bug), &opts).await.expect("verify runs");
    eprintln!("{}", report.text());
    (report, logs)
}

fn failed(r: &Report) -> BTreeSet<(String, String)> {
    r.failed()
        .iter()
        .map(|v| (v.scenario.clone(), v.check.to_string()))
        .collect()
}

/// The scenario's fault landed right after the seeded write of the operator's work (not on a
/// fallback), after its first write at least, and the operator wrote again after it: it had
/// not converged.
fn landed_mid_convergence<'a>(r: &'a Report, scenario: &str) -> &'a Fault {
    let f = r
        .faults
        .iter()
        .find(|f| f.scenario == scenario)
        .unwrap_or_else(|| panic!("no fault recorded for {scenario}\n{}", r.text()));
    assert_eq!(f.fallback, None, "{}", r.text());
    assert!(f.after >= 1, "{}", r.text());
    assert_eq!(f.after, f.wanted, "{}", r.text());
    assert!(f.wanted < f.of, "{}", r.text());
    assert!(f.write.is_some(), "{}", r.text());
    assert!(f.later >= 1, "{}", r.text());
    f
}

/// The operator without a bug, starting late: the restart still lands after one of its
/// writes and before its last, and every check passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restart_lands_mid_convergence_however_late_the_operator_starts() {
    let (r, _logs) = run("none", "apiserver-restart", 7).await;
    landed_mid_convergence(&r, "apiserver-restart");
    assert!(r.passed(), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_change_lands_mid_convergence_however_late_the_operator_starts() {
    let (r, _logs) = run("none", "spec-change", 7).await;
    landed_mid_convergence(&r, "spec-change");
    assert!(r.passed(), "{}", r.text());
}

/// widget.py forget-on-reconnect drops its work queue when a watch breaks. Restarted while
/// it works on beta (seed 3: after write #5, beta's ConfigMap created), it never gets to
/// gamma, waiting behind.
/// With the restart 0.2-1.5 s after the apply, this run passed every check (the operator
/// had not started yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_dropped_on_a_broken_watch_is_found_by_a_restart_mid_convergence() {
    let (r, _logs) = run("forget-on-reconnect", "apiserver-restart", 3).await;
    landed_mid_convergence(&r, "apiserver-restart");
    assert_eq!(
        failed(&r),
        BTreeSet::from([("apiserver-restart".to_string(), "converges".to_string())]),
        "{}",
        r.text()
    );
    let text = r.text();
    assert!(text.contains("not ready: Widget"), "{text}");
}

/// widget.py lost-spec-change stamps the generation it reads at the end of a reconcile:
/// the second spec (seed 2: alpha's color) applied after alpha's write #2, its ConfigMap's
/// create, is marked done and never reaches that ConfigMap. With the second spec 0.2-2 s after the apply, this run passed every
/// check (the operator's first read already saw the second spec).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_change_forgotten_mid_reconcile_is_found() {
    let (r, _logs) = run("lost-spec-change", "spec-change", 2).await;
    landed_mid_convergence(&r, "spec-change");
    assert_eq!(
        failed(&r),
        BTreeSet::from([("spec-change".to_string(), "converges".to_string())]),
        "{}",
        r.text()
    );
    let text = r.text();
    assert!(text.contains("configmaps/alpha-config"), "{text}");
}
