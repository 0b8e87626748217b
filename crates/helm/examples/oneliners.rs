//! Renders one-file charts given as JSON cases on stdin with a Helm-like top-level
//! object; for quick comparisons with scripts/helm-oracle.py during development.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::io::Read;
use std::rc::Rc;
use std::sync::Arc;

use bosun_helm::chart::capabilities::{Capabilities, KubeVersion, DEFAULT_API_VERSIONS};
use bosun_helm::template::exec::{execute, Limits, Runtime};
use bosun_helm::template::set::{Layer, TemplateSet};
use bosun_helm::value::{Data, Map, MapKind, Value};

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).expect("stdin");
    let cases = Data::from_json_float(&input).expect("json");
    let Data::List(cases) = cases else {
        panic!("list")
    };
    let mut results = Vec::new();
    for c in cases {
        let text = c
            .lookup("templates")
            .and_then(Data::as_map)
            .and_then(|t| t.get("t.yaml"))
            .and_then(Data::as_str)
            .unwrap_or("")
            .to_string();
        let values = match c.lookup("values_yaml").and_then(Data::as_str) {
            Some(y) if !y.is_empty() => bosun_helm::funcs::helm::yaml_data(y).unwrap_or_default(),
            _ => Data::Map(Default::default()),
        };
        let name = "chart/templates/t.yaml";
        let mut set = TemplateSet::new();
        let r = match set.add(name, &text) {
            Err(e) => Err(e.0),
            Ok(()) => {
                let set = Arc::new(set);
                let rt = Runtime::new(Limits::default(), false);
                let top = Map::new(MapKind::Values);
                let vals = values.to_value();
                let vals = match vals {
                    Value::Map(m) => Value::Map(m.shallow_copy(MapKind::Values)),
                    v => v,
                };
                top.insert("Values".into(), vals);
                let rel = Map::new(MapKind::Iface);
                rel.insert("Name".into(), Value::str("release-name"));
                rel.insert("Namespace".into(), Value::str("default"));
                rel.insert("IsInstall".into(), Value::Bool(true));
                rel.insert("IsUpgrade".into(), Value::Bool(false));
                rel.insert("Revision".into(), Value::Int(1));
                rel.insert("Service".into(), Value::str("Helm"));
                top.insert("Release".into(), Value::Map(rel));
                top.insert(
                    "Capabilities".into(),
                    Value::Obj(Rc::new(Capabilities {
                        kube: KubeVersion::parse("v1.31.0").unwrap(),
                        api_versions: DEFAULT_API_VERSIONS.iter().map(|s| s.to_string()).collect(),
                    })),
                );
                let t = Map::new(MapKind::Values);
                t.insert("Name".into(), Value::str(name));
                t.insert("BasePath".into(), Value::str("chart/templates"));
                top.insert("Template".into(), Value::Map(t));
                top.insert("Files".into(), Value::Map(Map::new(MapKind::Files)));
                let layer = Layer::base(set.clone());
                let tree = set.get(name).unwrap().clone();
                execute(&rt, layer, &tree, Value::Map(top))
                    .map(|s| s.replace("<no value>", ""))
                    .map_err(|e| e.msg)
            }
        };
        results.push(match r {
            Ok(s) => format!(
                "{{\"ok\": {}}}",
                bosun_helm::value::json::marshal(&Value::string(s)).unwrap()
            ),
            Err(e) => format!(
                "{{\"err\": {}}}",
                bosun_helm::value::json::marshal(&Value::string(e)).unwrap()
            ),
        });
    }
    println!("[{}]", results.join(","));
}
