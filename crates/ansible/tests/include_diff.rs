//! Differential tests of dynamic file names, with no API server: a role whose
//! `include_vars` names its file with templates (an exporter type from the custom resource
//! picks `exporters/<type>/vars.yml`, `file:` from a loop item, a file beside the tasks, a
//! missing file ignored) runs in ansible-playbook (ansible-core 2.18) and in bosun; the task
//! sequence, each task's result (facts set, messages) and the stats must match.
//!
//! Needs `scripts/setup-ansible.sh`.
mod common;

use std::sync::Arc;

use bosun_ansible::{Discovery, LoadOptions, Role, RunContext};
use common::diff::{bosun_stats, bosun_tasks, crate_dir, differences, Side};
use serde_json::{json, Value as Json};

fn ansible_side(role: &str, extra: &Json) -> Side {
    let dir = tempfile::tempdir().expect("test value");
    let playbook = json!([{"hosts": "localhost", "gather_facts": false, "roles": [role]}]);
    let roles = crate_dir().join("tests/roles").display().to_string();
    let report = common::run_playbook(
        dir.path(),
        &playbook,
        extra,
        &[("ANSIBLE_ROLES_PATH", roles.as_str())],
    );
    Side {
        ns: "none".into(),
        tasks: common::task_results(&report)
            .into_iter()
            .filter(|(_, r)| !r.is_null())
            .collect(),
        stats: report["stats"]["localhost"].clone(),
        objects: Vec::new(),
        cr_status: Json::Null,
    }
}

async fn bosun_side(role: &str, extra: &Json) -> Side {
    let roles = crate_dir().join("tests/roles");
    let opts = LoadOptions {
        roles_path: vec![roles.clone()],
        collections_paths: vec![],
        cwd: roles,
    };
    let role = Role::load(role, &opts).unwrap_or_else(|e| panic!("load {role}: {e}"));
    let ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    let vars = extra.as_object().cloned().unwrap_or_default();
    let outcome = role.run(&ctx, &vars).await;
    Side {
        ns: "none".into(),
        tasks: bosun_tasks(&outcome),
        stats: bosun_stats(&outcome),
        objects: Vec::new(),
        cr_status: Json::Null,
    }
}

async fn same_as_ansible(role: &str, extra: Json) {
    let a = tokio::task::block_in_place(|| ansible_side(role, &extra));
    let b = bosun_side(role, &extra).await;
    assert!(!a.tasks.is_empty(), "Ansible ran the role's tasks");
    let d = differences(&a, &b);
    assert!(
        d.is_empty(),
        "role {role} with {extra}: bosun differs from Ansible:\n{}",
        d.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templated_include_vars_matches_ansible() {
    same_as_ansible("exporters", json!({})).await;
    // The custom resource picks another exporter and a list of files.
    same_as_ansible(
        "exporters",
        json!({"exporter_type": "redis", "extra_files": ["common", "exporters/node/vars"]}),
    )
    .await;
}
