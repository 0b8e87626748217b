//! Rendering against a cluster, through the engine's own interfaces: the served API
//! versions replacing Helm's default list, `lookup` through a [`Lookup`] (a fake here;
//! the operator implements it against the API server), and the report of functions whose
//! output changes on every render. Offline behaviour is in the differential corpus.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bosun_helm::chart::capabilities::version_set;
use bosun_helm::render::lookup::Lookup;
use bosun_helm::render::{Chart, RenderErrorKind, RenderOptions};
use bosun_helm::value::Data;
use common::repo_root;

fn cluster_chart() -> Chart {
    Chart::load(&repo_root().join("crates/helm/tests/charts/cluster")).unwrap()
}

fn one_file(template: &str) -> (tempfile::TempDir, Chart) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("templates")).unwrap();
    std::fs::write(
        dir.path().join("Chart.yaml"),
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("templates/t.yaml"), template).unwrap();
    let chart = Chart::load(dir.path()).unwrap();
    (dir, chart)
}

fn field<'a>(text: &'a str, key: &str) -> &'a str {
    let prefix = format!("  {key}: ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {key} in\n{text}"))
}

#[test]
fn served_api_versions_replace_helms_defaults() {
    let served = version_set([
        ("v1", vec!["Pod", "Secret", "ConfigMap"]),
        ("apps/v1", vec!["Deployment", "StatefulSet"]),
        ("monitoring.coreos.com/v1", vec!["ServiceMonitor"]),
        ("apps/v1", vec!["Deployment"]),
    ]);
    assert_eq!(
        served,
        [
            "v1",
            "apps/v1",
            "monitoring.coreos.com/v1",
            "v1/Pod",
            "v1/Secret",
            "v1/ConfigMap",
            "apps/v1/Deployment",
            "apps/v1/StatefulSet",
            "monitoring.coreos.com/v1/ServiceMonitor",
        ]
    );
    let mut o = RenderOptions::new("r", "ns");
    o.kube_version = Some("v1.29.2".into());
    o.cluster_api_versions = Some(served);
    o.api_versions = vec!["example.io/v1/Widget".into()];
    let r = cluster_chart().render(&o).unwrap();
    let caps = &r.files["cluster/templates/capabilities.yaml"];
    for (key, want) in [
        ("version", "\"v1.29.2\""),
        ("core", "\"true\""),
        ("coreKind", "\"true\""),
        ("appsKind", "\"true\""),
        ("monitoring", "\"true\""),
        ("monitoringKind", "\"true\""),
        ("otherKind", "\"false\""),
        // Served by Helm's default list, not by this cluster.
        ("removed", "\"false\""),
        ("ingressApi", "extensions/v1beta1"),
    ] {
        assert_eq!(field(caps, key), want, "{key}");
    }
    assert!(r.files["cluster/templates/servicemonitor.yaml"].contains("kind: ServiceMonitor"));
    let (_d, c) = one_file(r#"{{ .Capabilities.APIVersions.Has "example.io/v1/Widget" }}"#);
    let mut o2 = RenderOptions::new("r", "ns");
    o2.cluster_api_versions = Some(vec!["v1".into()]);
    o2.api_versions = vec!["example.io/v1/Widget".into()];
    assert_eq!(c.render(&o2).unwrap().files["c/templates/t.yaml"], "true");

    // A cluster without the CRD: the gated object is not rendered.
    let mut o3 = RenderOptions::new("r", "ns");
    o3.cluster_api_versions = Some(version_set([("v1", vec!["Secret"])]));
    let r = cluster_chart().render(&o3).unwrap();
    assert_eq!(r.files["cluster/templates/servicemonitor.yaml"].trim(), "");
}

/// A fake cluster: objects by (apiVersion, kind, namespace, name), every call recorded.
#[derive(Default)]
struct FakeCluster {
    objects: BTreeMap<(String, String, String, String), Data>,
    fail: Option<String>,
    calls: Mutex<Vec<String>>,
}

impl Lookup for FakeCluster {
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Data>, String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("{api_version} {kind} {namespace:?} {name:?}"));
        if let Some(e) = &self.fail {
            return Err(e.clone());
        }
        if !name.is_empty() {
            let key = (
                api_version.into(),
                kind.into(),
                namespace.into(),
                name.into(),
            );
            return Ok(self.objects.get(&key).cloned());
        }
        // A list as the API server sends it: items without apiVersion and kind.
        let items: Vec<Data> = self
            .objects
            .iter()
            .filter(|((a, k, ns, _), _)| {
                a == api_version && k == kind && (namespace.is_empty() || ns == namespace)
            })
            .map(|(_, o)| {
                let mut o = o.as_map().unwrap().clone();
                o.remove("apiVersion");
                o.remove("kind");
                Data::Map(o)
            })
            .collect();
        let list = serde_json::json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": "42"},
        });
        let mut list = Data::from(&list);
        if let Data::Map(m) = &mut list {
            m.insert("items".into(), Data::List(items));
        }
        Ok(Some(list))
    }
}

fn secret(ns: &str, name: &str, password_b64: &str) -> Data {
    Data::from(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "generation": 3},
        "data": {"password": password_b64},
    }))
}

fn with_secrets(secrets: &[(&str, &str, &str)]) -> FakeCluster {
    let mut c = FakeCluster::default();
    for (ns, name, pw) in secrets {
        c.objects.insert(
            (
                "v1".into(),
                "Secret".into(),
                ns.to_string(),
                name.to_string(),
            ),
            secret(ns, name, pw),
        );
    }
    c
}

#[test]
fn lookup_reads_through_the_callers_cluster() {
    let cluster = Arc::new(with_secrets(&[
        ("ns", "r-auth", "c2VjcmV0"),
        ("ns", "other", "eA=="),
        ("elsewhere", "third", "eQ=="),
    ]));
    let mut o = RenderOptions::new("r", "ns");
    o.lookup = Some(cluster.clone());
    let r = cluster_chart().render(&o).unwrap();
    let text = &r.files["cluster/templates/lookup.yaml"];
    // The bitnami pattern: the existing Secret's password is reused.
    assert_eq!(field(text, "password"), "c2VjcmV0");
    // Not found: an empty map of Go's type.
    assert_eq!(field(text, "type"), "\"map[string]interface {}\"");
    assert_eq!(field(text, "notFound"), "\"true\"");
    assert_eq!(field(text, "dig"), "\"none\"");
    // A list across namespaces, and one in the release namespace with item kinds filled.
    assert_eq!(field(text, "len"), "\"4\"");
    assert_eq!(field(text, "item0"), "other");
    assert_eq!(field(text, "item1"), "r-auth");
    assert!(!text.contains("item2"), "{text}");
    let calls = cluster.calls.lock().unwrap().clone();
    assert!(
        calls.contains(&"v1 Secret \"ns\" \"missing\"".to_string()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"v1 Secret \"\" \"\"".to_string()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&"rbac.authorization.k8s.io/v1 ClusterRole \"\" \"admin\"".to_string()),
        "{calls:?}"
    );

    // Items get the list's apiVersion and kind; numbers keep the API server's int64.
    let (_d, c) = one_file(
        r#"{{ range (lookup "v1" "Secret" "elsewhere" "").items }}{{ .apiVersion }} {{ .kind }} {{ printf "%T" .metadata.generation }}{{ end }}|{{ (lookup "v1" "Secret" "" "").kind }}"#,
    );
    let mut o = RenderOptions::new("r", "ns");
    o.lookup = Some(cluster.clone());
    assert_eq!(
        c.render(&o).unwrap().files["c/templates/t.yaml"],
        "v1 Secret int64|SecretList"
    );
}

#[test]
fn lookup_without_a_cluster_finds_nothing() {
    let r = cluster_chart()
        .render(&RenderOptions::new("r", "ns"))
        .unwrap();
    let text = &r.files["cluster/templates/lookup.yaml"];
    assert_eq!(field(text, "password"), "Z2VuZXJhdGVk");
    assert_eq!(field(text, "len"), "\"0\"");
}

#[test]
fn a_lookup_error_fails_the_render_as_helm_reports_it() {
    let cluster = FakeCluster {
        fail: Some("secrets is forbidden: User \"system:serviceaccount:x:y\" cannot list".into()),
        ..Default::default()
    };
    let (_d, c) = one_file("a: {{ lookup \"v1\" \"Secret\" \"ns\" \"x\" }}\n");
    let mut o = RenderOptions::new("r", "ns");
    o.lookup = Some(Arc::new(cluster));
    let e = c.render(&o).unwrap_err();
    assert_eq!(e.kind, RenderErrorKind::Exec);
    assert_eq!(
        e.message,
        "template: c/templates/t.yaml:1:6: executing \"c/templates/t.yaml\" at <lookup \"v1\" \"Secret\" \"ns\" \"x\">: error calling lookup: secrets is forbidden: User \"system:serviceaccount:x:y\" cannot list"
    );
}

#[test]
fn a_render_names_the_functions_that_change_its_output() {
    let (_d, c) = one_file(
        "a: {{ randAlphaNum 8 }}\nb: {{ now | date \"2006\" }}\nc: {{ sha256sum \"p\" | trunc 8 }}\nd: {{ randAlphaNum 4 }}\n",
    );
    let r = c.render(&RenderOptions::new("r", "ns")).unwrap();
    assert_eq!(r.nondeterministic, ["now", "randAlphaNum"]);
    let (_d, c) =
        one_file("a: {{ sha256sum \"p\" | trunc 8 }}\n{{ if false }}{{ uuidv4 }}{{ end }}\n");
    let r = c.render(&RenderOptions::new("r", "ns")).unwrap();
    assert!(r.nondeterministic.is_empty(), "{:?}", r.nondeterministic);
    // Through include and tpl too.
    let (_d, c) = one_file(
        "{{ define \"x\" }}{{ genPrivateKey \"ecdsa\" | kindOf }}{{ end }}{{ include \"x\" . }}{{ tpl \"{{ uuidv4 | len }}\" . }}",
    );
    let r = c.render(&RenderOptions::new("r", "ns")).unwrap();
    assert_eq!(r.nondeterministic, ["genPrivateKey", "uuidv4"]);
}
