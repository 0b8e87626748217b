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

/// The owned entry and the CRD's schema for an example.
fn owned_of(b: &Bundle, ex: &Value) -> Option<(Value, Value)> {
    let (group, version) = ex["apiVersion"].as_str()?.split_once('/')?;
    let o = owned(b).into_iter().find(|o| {
        o["kind"] == ex["kind"]
            && o["version"] == version
            && o["name"]
                .as_str()
                .and_then(|n| n.split_once('.'))
                .map(|x| x.1)
                == Some(group)
    })?;
    let crd = b
        .crds()
        .find(|m| m.object["metadata"]["name"] == o["name"])?;
    let schema = crd.object["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)?["schema"]["openAPIV3Schema"]
        .clone();
    Some((o, schema))
}

fn name_of(ex: &Value) -> String {
    format!(
        "{} {}",
        ex["kind"].as_str().unwrap_or("?"),
        ex["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn spec_keys(ex: &Value) -> Vec<String> {
    ex["spec"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn no_examples(b: &Bundle, r: &mut TestResult) -> bool {
    if examples(b).is_empty() {
        r.errors
            .push("no custom resource in the CSV's alm-examples to check".into());
        r.suggestions
            .push("add samples (config/samples) and run `bosun bundle` again".into());
        return true;
    }
    false
}

fn basic_check_spec(b: &Bundle, r: &mut TestResult) {
    if no_examples(b, r) {
        return;
    }
    for ex in examples(b) {
        if ex["spec"].as_object().is_none_or(|m| m.is_empty()) {
            r.errors
                .push(format!("{}: the custom resource has no spec", name_of(&ex)));
        }
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

fn crds_have_validation(b: &Bundle, r: &mut TestResult) {
    if no_examples(b, r) {
        return;
    }
    for ex in examples(b) {
        let Some((_, schema)) = owned_of(b, &ex) else {
            r.errors
                .push(format!("{}: not a kind the CSV owns", name_of(&ex)));
            continue;
        };
        let props = &schema["properties"]["spec"]["properties"];
        for k in spec_keys(&ex) {
            if props.get(&k).is_none() {
                r.errors.push(format!(
                    "{}: spec.{k} has no validation in the CRD's schema",
                    name_of(&ex)
                ));
            }
        }
    }
    if !r.errors.is_empty() {
        r.suggestions
            .push("describe every spec field in the CRD's openAPIV3Schema".into());
    }
}

fn crds_have_resources(b: &Bundle, r: &mut TestResult) {
    if no_examples(b, r) {
        return;
    }
    for ex in examples(b) {
        let Some((o, _)) = owned_of(b, &ex) else {
            r.errors
                .push(format!("{}: not a kind the CSV owns", name_of(&ex)));
            continue;
        };
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

fn spec_descriptors(b: &Bundle, r: &mut TestResult) {
    if no_examples(b, r) {
        return;
    }
    for ex in examples(b) {
        let Some((o, _)) = owned_of(b, &ex) else {
            r.errors
                .push(format!("{}: not a kind the CSV owns", name_of(&ex)));
            continue;
        };
        let paths = descriptor_paths(&o, "specDescriptors");
        for k in spec_keys(&ex) {
            if !paths
                .iter()
                .any(|p| p == &k || p.starts_with(&format!("{k}.")))
            {
                r.errors
                    .push(format!("{}: spec.{k} has no spec descriptor", name_of(&ex)));
            }
        }
    }
}

fn status_descriptors(b: &Bundle, r: &mut TestResult) {
    if no_examples(b, r) {
        return;
    }
    for ex in examples(b) {
        let Some((o, schema)) = owned_of(b, &ex) else {
            r.errors
                .push(format!("{}: not a kind the CSV owns", name_of(&ex)));
            continue;
        };
        let paths = descriptor_paths(&o, "statusDescriptors");
        let status = schema["properties"]["status"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if status.is_empty() && paths.is_empty() {
            r.errors.push(format!(
                "{}: neither the CRD's schema nor the CSV describes a status",
                o["name"].as_str().unwrap_or("?")
            ));
        }
        for k in status.keys() {
            if !paths
                .iter()
                .any(|p| p == k || p.starts_with(&format!("{k}.")))
            {
                r.errors.push(format!(
                    "{}: status.{k} has no status descriptor",
                    o["name"].as_str().unwrap_or("?")
                ));
            }
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

    #[test]
    fn each_test_fails_on_what_it_checks() {
        let mut b = good();
        let ex = serde_json::json!([{
            "apiVersion": "plants.example.test/v1alpha1", "kind": "Garden",
            "metadata": {"name": "g"}, "spec": {"weeds": 3}
        }]);
        let csv = csv_mut(&mut b);
        csv["metadata"]["annotations"]["alm-examples"] = ex.to_string().into();
        let owned = &mut csv["spec"]["customresourcedefinitions"]["owned"][0];
        owned["resources"] = serde_json::json!([]);
        owned["statusDescriptors"] = serde_json::json!([]);
        let names: Vec<&str> = failed(&b).iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "olm-crds-have-validation",
                "olm-crds-have-resources",
                "olm-spec-descriptors",
                "olm-status-descriptors"
            ]
        );
        let f = failed(&b);
        assert!(f[0].1[0].contains("spec.weeds"), "{f:?}");
        assert!(f[3].1[0].contains("status.conditions"), "{f:?}");

        let mut b = good();
        let ex = serde_json::json!([{"apiVersion": "plants.example.test/v1alpha1", "kind": "Garden", "metadata": {"name": "g"}}]);
        csv_mut(&mut b)["metadata"]["annotations"]["alm-examples"] = ex.to_string().into();
        assert_eq!(failed(&b)[0].0, "basic-check-spec");

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
