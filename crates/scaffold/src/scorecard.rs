//! `bosun scorecard`: operator-sdk's six built-in scorecard tests, run in-process on a bundle
//! directory instead of in pods. The tests that upstream read a live custom resource read the
//! `alm-examples` (the resources a user creates first); the rest read the bundle.
use serde_json::Value;

use crate::validate::{self, Bundle, Level, Options};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pass,
    Fail,
}

#[derive(Debug, Clone)]
pub struct TestResult {
    pub suite: &'static str,
    pub name: &'static str,
    pub state: State,
    pub errors: Vec<String>,
    pub suggestions: Vec<String>,
}

impl TestResult {
    /// The `test` label of operator-sdk's configuration.
    pub fn label(&self) -> String {
        format!("{}-test", self.name)
    }
}

/// The built-in tests, filtered by a `key=value` label selector (`suite=olm`,
/// `test=basic-check-spec-test`).
pub fn run(bundle: &Bundle, selector: Option<&str>) -> Result<Vec<TestResult>, String> {
    let sel = match selector {
        None => None,
        Some(s) => Some(s.split_once('=').ok_or_else(|| {
            format!("selector {s:?}: use suite=basic, suite=olm or test=<name>-test")
        })?),
    };
    let mut out = Vec::new();
    for (suite, name) in crate::bundle::SCORECARD_TESTS {
        let label = format!("{name}-test");
        let selected = match sel {
            None => true,
            Some(("suite", v)) => v == suite,
            Some(("test", v)) => v == label,
            Some((k, _)) => return Err(format!("unknown label {k:?}: use suite or test")),
        };
        if !selected {
            continue;
        }
        let mut r = TestResult {
            suite,
            name,
            state: State::Pass,
            errors: Vec::new(),
            suggestions: Vec::new(),
        };
        match name {
            "basic-check-spec" => basic_check_spec(bundle, &mut r),
            "olm-bundle-validation" => bundle_validation(bundle, &mut r),
            "olm-crds-have-validation" => crds_have_validation(bundle, &mut r),
            "olm-crds-have-resources" => crds_have_resources(bundle, &mut r),
            "olm-spec-descriptors" => spec_descriptors(bundle, &mut r),
            _ => status_descriptors(bundle, &mut r),
        }
        if !r.errors.is_empty() {
            r.state = State::Fail;
        }
        out.push(r);
    }
    Ok(out)
}

fn csv(b: &Bundle) -> Value {
    b.csv().map(|m| m.object.clone()).unwrap_or(Value::Null)
}

fn examples(b: &Bundle) -> Vec<Value> {
    csv(b)["metadata"]["annotations"]["alm-examples"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

fn owned(b: &Bundle) -> Vec<Value> {
    csv(b)["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The owned entry of an example's kind (operator-sdk matches the kind alone).
fn owned_kind(b: &Bundle, ex: &Value) -> Option<Value> {
    owned(b).into_iter().find(|o| o["kind"] == ex["kind"])
}

/// The schemas of every bundled CRD version serving an example's kind and version.
fn schemas_of(b: &Bundle, ex: &Value) -> Vec<Value> {
    let version = ex["apiVersion"]
        .as_str()
        .map(|a| a.rsplit('/').next().unwrap_or(a))
        .unwrap_or_default();
    let kind = ex["kind"].as_str().unwrap_or_default();
    b.crds()
        .filter(|m| {
            m.object["spec"]["names"]["kind"]
                .as_str()
                .is_some_and(|k| k.eq_ignore_ascii_case(kind))
        })
        .flat_map(|m| {
            m.object["spec"]["versions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(version))
        })
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .collect()
}

fn name_of(ex: &Value) -> String {
    format!(
        "{} {}",
        ex["kind"].as_str().unwrap_or("?"),
        ex["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Fails on an example without a `spec` (an empty one is a spec). No example: nothing to check.
fn basic_check_spec(b: &Bundle, r: &mut TestResult) {
    if let Some(ex) = examples(b).iter().find(|ex| ex.get("spec").is_none()) {
        r.errors
            .push(format!("{}: the custom resource has no spec", name_of(ex)));
    }
}

fn bundle_validation(b: &Bundle, r: &mut TestResult) {
    for f in validate::validate(b, &Options::default()) {
        match f.level {
            Level::Error => r.errors.push(f.to_string()),
            Level::Warning => r.suggestions.push(f.to_string()),
        }
    }
}

/// Every spec and status key of an example is in the schema of its CRD version; a version
/// without a schema is a suggestion, an example of no bundled CRD is not checked.
fn crds_have_validation(b: &Bundle, r: &mut TestResult) {
    for ex in examples(b) {
        for schema in schemas_of(b, &ex) {
            if schema.is_null() {
                r.suggestions.push(format!(
                    "{}: add an openAPIV3Schema to its CRD",
                    name_of(&ex)
                ));
                continue;
            }
            for part in ["spec", "status"] {
                for k in keys(&ex[part]) {
                    if schema["properties"][part]["properties"].get(&k).is_none() {
                        r.errors.push(format!(
                            "{}: {part}.{k} has no validation in the CRD's schema",
                            name_of(&ex)
                        ));
                    }
                }
            }
        }
    }
    if !r.errors.is_empty() {
        r.suggestions
            .push("describe every spec and status field in the CRD's openAPIV3Schema".into());
    }
}

/// Every owned CRD lists the kinds its operator creates, whatever the examples.
fn crds_have_resources(b: &Bundle, r: &mut TestResult) {
    for o in owned(b) {
        if o["resources"].as_array().is_none_or(Vec::is_empty) {
            r.errors.push(format!(
                "{}: the owned CRD lists no resources",
                o["name"].as_str().unwrap_or("?")
            ));
            r.suggestions.push(
                "list the kinds it creates in spec.customresourcedefinitions.owned[].resources"
                    .into(),
            );
        }
    }
}

fn descriptor_paths(o: &Value, key: &str) -> Vec<String> {
    o[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["path"].as_str())
        .map(str::to_string)
        .collect()
}

fn not_owned(ex: &Value) -> String {
    format!("{}: no owned CRD of kind {}", name_of(ex), ex["kind"])
}

/// Each top-level spec key of an example has a spec descriptor of exactly that path.
fn spec_descriptors(b: &Bundle, r: &mut TestResult) {
    for ex in examples(b) {
        if ex.get("spec").is_none() {
            r.errors
                .push(format!("{}: the custom resource has no spec", name_of(&ex)));
            continue;
        }
        let Some(o) = owned_kind(b, &ex) else {
            r.errors.push(not_owned(&ex));
            continue;
        };
        let paths = descriptor_paths(&o, "specDescriptors");
        for k in keys(&ex["spec"]) {
            if !paths.contains(&k) {
                r.errors
                    .push(format!("{}: spec.{k} has no spec descriptor", name_of(&ex)));
            }
        }
    }
}

/// An example showing a status needs its owned CRD to have status descriptors; without a
/// status it is a suggestion.
fn status_descriptors(b: &Bundle, r: &mut TestResult) {
    for ex in examples(b) {
        let Some(o) = owned_kind(b, &ex) else {
            r.errors.push(not_owned(&ex));
            continue;
        };
        let name = o["name"].as_str().unwrap_or("?");
        if keys(&ex["status"]).is_empty() {
            r.suggestions.push(format!(
                "{}: no status in the example to check {name}'s status descriptors against",
                name_of(&ex)
            ));
        } else if descriptor_paths(&o, "statusDescriptors").is_empty() {
            r.errors
                .push(format!("{name}: the owned CRD has no status descriptor"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Bundle {
        let mut i = crate::bundle::tests::input();
        i.operator_rules.insert(
            "gardens.plants.example.test".into(),
            vec![serde_json::json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]})],
        );
        let tree = crate::bundle::generate(&i).expect("bundle");
        let dir = tempfile::tempdir().expect("dir");
        for (rel, data) in &tree.files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, data).expect("write");
        }
        validate::load(&dir.path().join("bundle")).0
    }

    fn csv_mut(b: &mut Bundle) -> &mut Value {
        &mut b
            .manifests
            .iter_mut()
            .find(|m| m.object["kind"] == "ClusterServiceVersion")
            .expect("csv")
            .object
    }

    fn failed(b: &Bundle) -> Vec<(&'static str, Vec<String>)> {
        run(b, None)
            .expect("run")
            .into_iter()
            .filter(|r| r.state == State::Fail)
            .map(|r| (r.name, r.errors))
            .collect()
    }

    #[test]
    fn the_generated_bundle_passes_all_six() {
        let results = run(&good(), None).expect("run");
        assert_eq!(results.len(), 6);
        assert!(failed(&good()).is_empty(), "{:?}", failed(&good()));
    }

    /// operator-sdk's verdicts (internal/scorecard/tests/{basic,olm}.go) for bundles that differ
    /// from the generated one in one respect each: the tests that fail, in order.
    #[test]
    fn verdicts_are_operator_sdks() {
        use serde_json::json;
        let garden = |extra: Value| {
            let mut ex = json!({"apiVersion": "plants.example.test/v1alpha1", "kind": "Garden",
                "metadata": {"name": "g"}});
            for (k, v) in extra.as_object().into_iter().flatten() {
                ex[k] = v.clone();
            }
            json!([ex])
        };
        type Edit = Box<dyn Fn(&mut Value)>;
        let examples = |ex: Value| -> Edit {
            Box::new(move |csv: &mut Value| {
                csv["metadata"]["annotations"]["alm-examples"] = ex.to_string().into();
            })
        };
        let owned = |field: &'static str, v: Value| -> Edit {
            Box::new(move |csv: &mut Value| {
                csv["spec"]["customresourcedefinitions"]["owned"][0][field] = v.clone();
            })
        };
        let cases: Vec<(&str, Vec<Edit>, Vec<&str>)> = vec![
            // No examples: nothing to read, nothing fails.
            ("no examples", vec![examples(json!([]))], vec![]),
            // An empty spec is a spec (a chart with an empty values.yaml).
            (
                "spec: {}",
                vec![examples(garden(json!({"spec": {}})))],
                vec![],
            ),
            (
                "no spec at all",
                vec![examples(garden(json!({})))],
                vec!["basic-check-spec", "olm-spec-descriptors"],
            ),
            (
                "a spec field neither in the schema nor described",
                vec![examples(garden(json!({"spec": {"weeds": 3}})))],
                vec!["olm-crds-have-validation", "olm-spec-descriptors"],
            ),
            // Status descriptors are wanted only when an example shows a status.
            (
                "no status descriptors, no status in the examples",
                vec![owned("statusDescriptors", json!([]))],
                vec![],
            ),
            (
                "no status descriptors, a status in an example",
                vec![
                    owned("statusDescriptors", json!([])),
                    examples(garden(
                        json!({"spec": {"replicaCount": 1}, "status": {"conditions": []}}),
                    )),
                ],
                vec!["olm-status-descriptors"],
            ),
            // Every owned CRD lists resources, with or without an example.
            (
                "an owned CRD without resources and no examples",
                vec![owned("resources", json!([])), examples(json!([]))],
                vec!["olm-crds-have-resources"],
            ),
            // A descriptor's path matches a spec key exactly.
            (
                "only a nested descriptor for a spec key",
                vec![owned(
                    "specDescriptors",
                    json!([{"path": "replicaCount.min", "displayName": "Min"}]),
                )],
                vec!["olm-spec-descriptors"],
            ),
        ];
        for (case, edits, want) in cases {
            let mut b = good();
            for e in &edits {
                e(csv_mut(&mut b));
            }
            let got: Vec<&str> = failed(&b).iter().map(|(n, _)| *n).collect();
            assert_eq!(got, want, "{case}: {:?}", failed(&b));
        }
        let mut b = good();
        csv_mut(&mut b)["spec"]["version"] = "latest".into();
        assert_eq!(failed(&b)[0].0, "olm-bundle-validation");
    }

    #[test]
    fn selectors_pick_by_label() {
        let r = run(&good(), Some("suite=basic")).expect("run");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].label(), "basic-check-spec-test");
        let r = run(&good(), Some("test=olm-spec-descriptors-test")).expect("run");
        assert_eq!(r[0].name, "olm-spec-descriptors");
        assert!(run(&good(), Some("color=blue")).is_err());
    }
}
