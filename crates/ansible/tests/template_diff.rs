//! Differential test of templating: every template of `tests/corpus/templates.yaml` is
//! rendered by bosun and by real Ansible (ansible-core 2.18, `set_fact` in one playbook run),
//! with the same extra vars as ansible-operator would pass; results must be equal in value
//! and type, and a template that fails in Ansible must fail in bosun.
mod common;

use std::sync::Arc;

use bosun_ansible::extra_vars::{for_cr, ExtraVarsOptions};
use bosun_ansible::template::{value, Scope, Templar, VarLayer};
use serde_json::{json, Value as Json};

#[test]
fn templates_match_ansible() {
    let corpus: serde_yaml::Value =
        serde_yaml::from_str(include_str!("corpus/templates.yaml")).expect("test value");
    let spec: Json = serde_json::to_value(&corpus["spec"]).expect("test value");
    let cases: Vec<String> = corpus["cases"]
        .as_sequence()
        .expect("test value")
        .iter()
        .map(|c| c.as_str().expect("test value").to_string())
        .collect();
    let cr = json!({"apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
                    "metadata": {"name": "sample", "namespace": "ns1"}, "spec": spec});
    let vars = Json::Object(for_cr(
        &cr,
        &ExtraVarsOptions {
            snake_case: true,
            group: "charts.example.com",
            kind: "BookStore",
            ..Default::default()
        },
    ));

    let tasks: Vec<Json> = cases.iter().enumerate()
        .map(|(i, c)| json!({"name": format!("case {i}"), "set_fact": {"r": c}, "ignore_errors": true}))
        .collect();
    let playbook = json!([{"hosts": "localhost", "gather_facts": false, "tasks": tasks}]);
    let dir = tempfile::tempdir().expect("test value");
    let env = [("BOSUN_TEST_ENV", "from-env")];
    let report = common::run_playbook(dir.path(), &playbook, &vars, &env);
    let results = common::task_results(&report);
    assert_eq!(results.len(), cases.len(), "one result per case");

    // SAFETY of the process environment: this test binary sets it before any thread reads it.
    unsafe { std::env::set_var("BOSUN_TEST_ENV", "from-env") };
    let templar = Templar::new();
    let layer: VarLayer = vars
        .as_object()
        .expect("test value")
        .iter()
        .map(|(k, v)| (k.clone(), value::from_json(v)))
        .collect();
    let scope = Scope::new(templar.clone(), vec![Arc::new(layer)], None);

    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let want = &results[i].1;
        let got = templar
            .template_str(case, &scope)
            .and_then(|v| value::to_json(&v));
        let got = got.map(set_fact_coercion);
        let ok = match (
            want.get("failed").and_then(Json::as_bool).unwrap_or(false),
            &got,
        ) {
            (true, Err(_)) => true,
            (false, Ok(g)) => same(&want["ansible_facts"]["r"], g),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "case {i} {case:?}\n   ansible: {}\n   bosun:   {:?}",
                if want.get("failed") == Some(&json!(true)) {
                    format!("FAILED {}", want["msg"])
                } else {
                    want["ansible_facts"]["r"].to_string()
                },
                got.map(|g| g.to_string())
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} templates differ from Ansible:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// set_fact turns the strings true/false/yes/no into booleans (jinja2_native off).
fn set_fact_coercion(v: Json) -> Json {
    match &v {
        Json::String(s) if ["true", "false", "yes", "no"].contains(&s.to_lowercase().as_str()) => {
            Json::Bool(matches!(s.to_lowercase().as_str(), "true" | "yes"))
        }
        _ => v,
    }
}

/// Equal values, integers and floats told apart.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.is_f64() == y.is_f64() && x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
