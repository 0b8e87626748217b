//! Differential tests of whole roles on the project's real kube-apiserver: each role runs in
//! ansible-playbook (ansible-core 2.18, kubernetes.core 5.4, extra vars as ansible-operator
//! passes them) in one namespace and in bosun in another; the task sequence, each task's
//! changed/failed/skipped and chosen result keys, the stats, the objects left behind and the
//! CR's status must match — on the first run and again on a second, idempotent run.
mod common;

use std::sync::Arc;

use bosun_ansible::modules::k8s_status;
use bosun_ansible::Discovery;
use common::diff::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value as Json};

/// Runs the case and returns bosun's last outcome.
async fn diff_case(
    case: Case<'_>,
    runs: usize,
    finalizer_vars: Option<Json>,
) -> bosun_ansible::Outcome {
    let cp = bosun_testenv::shared()
        .await
        .expect("test control plane (bash scripts/setup-assets.sh)");
    let client = cp.client().await.expect("test value");
    ensure_crd(&client, case.group, case.kind).await;
    let ns_a = bosun_testenv::test_namespace(&client, "ansible")
        .await
        .expect("test value");
    let ns_b = bosun_testenv::test_namespace(&client, "bosun")
        .await
        .expect("test value");
    create_cr(&client, &case, &ns_a).await;
    create_cr(&client, &case, &ns_b).await;
    let discovery = Arc::new(Discovery::new());
    let kubeconfig = cp.kubeconfig().to_path_buf();
    let mut last = None;
    for run in 0..runs + usize::from(finalizer_vars.is_some()) {
        let finalizing = run == runs;
        let with_vars = |mut extra: serde_json::Map<String, Json>| {
            if finalizing {
                for (k, v) in finalizer_vars
                    .as_ref()
                    .and_then(Json::as_object)
                    .into_iter()
                    .flatten()
                {
                    extra.insert(k.clone(), v.clone());
                }
            }
            extra
        };
        let served_before = served_groups(&client).await;
        let cr_a = get_cr(&client, &case, &ns_a).await;
        let extra_a = with_vars(extra_vars(&case, &cr_a));
        let (tasks_a, stats_a) =
            tokio::task::block_in_place(|| run_ansible(&case, &kubeconfig, &extra_a));
        let cr_b = get_cr(&client, &case, &ns_b).await;
        let extra_b = with_vars(extra_vars(&case, &cr_b));
        let outcome = run_bosun(&case, &client, &discovery, &cr_b, &extra_b).await;
        // The host's single status write: what k8s_status asked, merged into the status.
        if let Some(req) = &outcome.status {
            let status = k8s_status::apply(cr_b.get("status"), req);
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &ns_b, &cr_resource(case.group, case.kind));
            api.patch_status(
                "sample",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .expect("test value");
        }
        // The control plane is shared with tests installing CRDs at any moment: of the API
        // groups a role lists, only those served before the first run and after the second
        // are the same cluster for both (CI saw charts.example.com appear in between).
        let served_after = served_groups(&client).await;
        let mut tasks_a = tasks_a;
        let mut tasks_b = bosun_tasks(&outcome);
        for (_, result) in tasks_a.iter_mut().chain(tasks_b.iter_mut()) {
            if let Some(groups) = result
                .pointer_mut("/ansible_facts/api_groups")
                .and_then(Json::as_array_mut)
            {
                groups.retain(|g| {
                    g.as_str()
                        .is_some_and(|g| served_before.contains(g) && served_after.contains(g))
                });
            }
        }
        let a = Side {
            ns: ns_a.clone(),
            tasks: tasks_a,
            stats: stats_a,
            objects: objects(&client, &ns_a, &case.kinds).await,
            cr_status: get_cr(&client, &case, &ns_a).await["status"].clone(),
        };
        let b = Side {
            ns: ns_b.clone(),
            tasks: tasks_b,
            stats: bosun_stats(&outcome),
            objects: objects(&client, &ns_b, &case.kinds).await,
            cr_status: get_cr(&client, &case, &ns_b).await["status"].clone(),
        };
        let d = differences(&a, &b);
        if !d.is_empty() {
            for t in &outcome.tasks {
                eprintln!("bosun task {:?} {:?}", t.name, t.status);
            }
        }
        assert!(
            d.is_empty(),
            "role {} run {run}: bosun differs from Ansible:\n{}",
            case.role,
            d.join("\n")
        );
        assert!(!a.tasks.is_empty(), "the role ran tasks");
        last = Some(outcome);
    }
    last.expect("at least one run")
}

/// The API groups the server serves now, the core group as "".
async fn served_groups(client: &kube::Client) -> std::collections::BTreeSet<String> {
    let list = client.list_api_groups().await.expect("API groups");
    std::iter::once(String::new())
        .chain(list.groups.into_iter().map(|g| g.name))
        .collect()
}

fn kinds() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("v1", "ConfigMap", "configmaps"),
        ("v1", "Service", "services"),
        ("apps/v1", "Deployment", "deployments"),
        ("v1", "Secret", "secrets"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_bookstore_role_matches_ansible() {
    let spec = json!({
        "metadata": {"namespace": "__NS__"},
        "image": {"app": {"repository": "akash125/pyapp", "tag": "latest", "pullPolicy": "Always"},
                  "mongodb": {"repository": "mongo", "tag": "latest", "pullPolicy": "Always"}},
        "service": {"app": {"type": "ClusterIP"}, "mongodb": {"type": "ClusterIP"}}
    });
    let case = Case {
        roles_dir: common::repo_root().join("examples/ansible-bookstore/roles"),
        role: "bookstore",
        group: "charts.example.com",
        kind: "BookStore",
        spec,
        watch_vars: None,
        kinds: kinds(),
    };
    diff_case(case, 2, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn features_role_matches_ansible() {
    let spec = json!({"size": 3, "servicePort": 80, "tier": "backend", "greeting": "hi there",
                      "settings": {"logLevel": "debug", "cache": "skip", "workers": 4}, "extraKeys": ["gamma"]});
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "features",
        group: "test.bosun.dev",
        kind: "Widget",
        spec,
        watch_vars: Some(json!({"service_enabled": true})),
        kinds: kinds(),
    };
    diff_case(case, 2, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizer_role_matches_ansible() {
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "finalizer",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({}),
        watch_vars: None,
        kinds: kinds(),
    };
    diff_case(case, 1, Some(json!({"state": "absent"}))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_role_matches_ansible() {
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "failing",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({"size": 5}),
        watch_vars: None,
        kinds: kinds(),
    };
    diff_case(case, 1, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semantics_role_matches_ansible() {
    let spec = json!({"size": 3, "labels": {"app": "x", "tier": "y"}});
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "semantics",
        group: "test.bosun.dev",
        kind: "Widget",
        spec,
        watch_vars: None,
        kinds: vec![],
    };
    diff_case(case, 1, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_modes_role_matches_ansible() {
    let spec = json!({"replicas": 1, "image": "nginx:1.25", "args": ["--port", "8080"], "env": {"mode": "test", "level": 2}});
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "k8s_modes",
        group: "test.bosun.dev",
        kind: "Widget",
        spec,
        watch_vars: None,
        kinds: kinds(),
    };
    diff_case(case, 2, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_role_matches_ansible_and_shows_no_secret() {
    let token = "tok-5ecret-value";
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "no_log",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({"token": token}),
        watch_vars: None,
        kinds: vec![],
    };
    let outcome = diff_case(case, 1, None).await;
    // What a host shows (task results, failure messages) never holds the secret.
    let shown = format!("{:?} {:?}", outcome.tasks, outcome.failures);
    assert!(!shown.contains(token), "the token leaked: {shown}");
    assert_eq!(
        outcome.failure_messages(),
        [bosun_ansible::CENSORED],
        "the failed assert's message is Ansible's replacement text"
    );
    let visible = outcome
        .tasks
        .iter()
        .find(|t| t.name == "shown in a hidden block")
        .expect("task");
    assert_eq!(
        visible.result["msg"], "visible",
        "no_log: false inside the block"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_role_matches_ansible() {
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "probes",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({}),
        watch_vars: None,
        kinds: vec![],
    };
    let outcome = diff_case(case, 1, None).await;
    let facts = &outcome.tasks[2].result["ansible_facts"];
    assert_eq!(facts["have_routes"], false, "{facts}");
    assert_eq!(facts["nosuch_found"], false, "{facts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_role_matches_ansible() {
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "files",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({}),
        watch_vars: None,
        kinds: vec![],
    };
    let outcome = diff_case(case, 1, None).await;
    let facts = &outcome
        .tasks
        .iter()
        .find(|t| t.name == "the results")
        .expect("task")
        .result["ansible_facts"];
    // Not vacuous: the keys compared are there.
    assert_eq!(facts["data_stat"]["isreg"], true, "{facts}");
    assert_eq!(facts["link_stat"]["islnk"], true, "{facts}");
    assert_eq!(facts["made_r"]["mode"], "0750", "{facts}");
    assert_eq!(
        facts["data_stat"].as_object().map(|o| o.len()),
        Some(bosun_ansible::modules::files::STAT_KEYS.len() - 3),
        "every stat key but atime and the link's: {facts}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_status_role_matches_ansible() {
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "own_status",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({}),
        watch_vars: None,
        kinds: vec![],
    };
    let outcome = diff_case(case, 1, None).await;
    let facts = &outcome.tasks[3].result["ansible_facts"];
    assert_eq!(facts["seen"]["phase"], "Building", "{facts}");
    assert_eq!(facts["looked"]["step"], 1, "{facts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_loops_role_matches_ansible() {
    let case = Case {
        roles_dir: crate_dir().join("tests/roles"),
        role: "loops",
        group: "test.bosun.dev",
        kind: "Widget",
        spec: json!({"teams": [{"name": "g1", "members": ["a", "b"]}, {"name": "g2", "members": []}, {"name": "g3"}]}),
        watch_vars: None,
        kinds: vec![],
    };
    let outcome = diff_case(case, 1, None).await;
    let facts = &outcome
        .tasks
        .iter()
        .find(|t| t.name == "what nested registered")
        .expect("task")
        .result["ansible_facts"];
    assert_eq!(facts["pairs"].as_array().map(Vec::len), Some(6), "{facts}");
    let seq = outcome
        .tasks
        .iter()
        .find(|t| t.name == "sequence, short form and count")
        .expect("task");
    assert_eq!(seq.result["results"].as_array().map(Vec::len), Some(15));
}
