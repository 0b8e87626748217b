//! Differential test of the go-yaml v2 side against Helm's own engine (libhelm v4 through
//! helm-python-sdk): `toYaml` output, `fromYaml | toJson` output, and values.yaml loading,
//! byte for byte, over the facts-table rows and a generated corpus, in one oracle process.
//!
//! Run: `cargo test -p bosun-yaml --test goyaml_oracle` (needs `scripts/setup-helm.sh`).

mod support;

use bosun_yaml::goyaml::{json_to_yaml, key_less, marshal, split_documents, to_json, yaml_to_json};
use bosun_yaml::{Node, Yaml};
use serde_json::{json, Value};
use support::gen::{self, Rng};
use support::{fixtures, run_oracle, Diff};

/// Go's `json.Unmarshal` into `interface{}`: every number a float64.
fn helm_value(v: &Value) -> Yaml {
    convert(v)
}

fn convert(v: &Value) -> Yaml {
    match v {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Bool(*b),
        Value::Number(n) => Yaml::Float(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Yaml::Str(s.clone()),
        Value::Array(items) => Yaml::Seq(items.iter().map(|i| Node::new(convert(i))).collect()),
        Value::Object(map) => Yaml::Map(
            map.iter()
                .map(|(k, v)| (Node::new(Yaml::Str(k.clone())), Node::new(convert(v))))
                .collect(),
        ),
    }
}

/// `json.Unmarshal` then `json.Marshal`: what Helm does to `yaml_to_json`'s output before a
/// template sees it.
fn go_json_roundtrip(v: &Value) -> String {
    to_json(&helm_value(v)).unwrap_or_else(|e| format!("unexpected: {e}"))
}

/// What `sigs.k8s.io/yaml.Unmarshal(src, &map[string]interface{})` yields, as Go JSON, or its
/// error text.
fn unmarshal_map(src: &str) -> Result<String, String> {
    let text = yaml_to_json(src).map_err(|e| format!("error converting YAML to JSON: {e}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("bad JSON {text}: {e}"))?;
    let kind = match &v {
        Value::Object(_) => return Ok(go_json_roundtrip(&v)),
        Value::Null => return Ok("{}".into()),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(format!(
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    ))
}

/// Whether some mapping has two keys that sigs.k8s.io/yaml turns into the same string
/// (`true` and `"true"`): Go's random map order then decides which value survives.
fn ambiguous_in_go(src: &str) -> bool {
    fn key_text(k: &Yaml) -> Option<String> {
        match k {
            Yaml::Str(s) => Some(s.clone()),
            Yaml::Int(i) => Some(i.to_string()),
            Yaml::Bool(b) => Some(b.to_string()),
            Yaml::Float(f) if f.fract() == 0.0 && f.abs() < 1e6 => Some((*f as i64).to_string()),
            Yaml::Float(f) => Some(f.to_string()),
            _ => None,
        }
    }
    // Also ambiguous: two keys sigs.k8s.io/yaml refuses (null, uint64), as Go's random
    // iteration order picks the one reported.
    fn walk(n: &Node, refused: &mut usize) -> bool {
        match &n.value {
            Yaml::Seq(items) => items.iter().any(|i| walk(i, refused)),
            Yaml::Map(pairs) => {
                let keys: Vec<String> = pairs
                    .iter()
                    .filter_map(|(k, _)| key_text(&k.value))
                    .collect();
                *refused += pairs
                    .iter()
                    .filter(|(k, _)| matches!(k.value, Yaml::Null | Yaml::BigInt(_)))
                    .count();
                let mut unique = keys.clone();
                unique.sort();
                unique.dedup();
                unique.len() != keys.len() || pairs.iter().any(|(_, v)| walk(v, refused))
            }
            _ => false,
        }
    }
    let mut refused = 0;
    bosun_yaml::load_all(src, bosun_yaml::Schema::GoYamlV2)
        .map(|docs| docs.first().is_some_and(|d| walk(d, &mut refused)) || refused > 1)
        .unwrap_or(false)
}

/// Whether go-yaml's key order is not transitive on some mapping's keys (`"1_" < "01" <
/// "0X1f" < "1_"`): Go sorts keys that arrive in random map order, so Helm's output varies.
fn unsortable_in_go(v: &Yaml) -> bool {
    match v {
        Yaml::Seq(items) => items.iter().any(|i| unsortable_in_go(&i.value)),
        Yaml::Map(pairs) => {
            let keys: Vec<&Yaml> = pairs.iter().map(|(k, _)| &k.value).collect();
            let cyclic = keys.iter().any(|a| {
                keys.iter().any(|b| {
                    keys.iter()
                        .any(|c| key_less(a, b) && key_less(b, c) && key_less(c, a))
                })
            });
            cyclic || pairs.iter().any(|(_, v)| unsortable_in_go(&v.value))
        }
        _ => false,
    }
}

/// Helm's `fromYaml | toJson`: the map, or `{"Error": message}`.
fn helm_from_yaml(src: &str) -> String {
    match unmarshal_map(src) {
        Ok(json) => json,
        Err(e) => {
            let m = Yaml::Map(vec![(
                Node::new(Yaml::Str("Error".into())),
                Node::new(Yaml::Str(e)),
            )]);
            to_json(&m).unwrap_or_default()
        }
    }
}

/// Helm's `toYaml` of a value that reached the template as float64-bearing JSON.
fn helm_to_yaml(v: &Yaml) -> String {
    let json = to_json(v).expect("generated values are JSON");
    // Helm's toYaml swallows errors into an empty string.
    let yaml = json_to_yaml(&json).unwrap_or_default();
    yaml.strip_suffix('\n').unwrap_or(&yaml).to_string()
}

/// The facts-table rows of helm-operator-facts.md §2.6 as values files.
const FACTS_VALUES: &[&str] = &[
    "x: yes\n",
    "x: on\n",
    "x: Yes\n",
    "x: True\n",
    "x: n\n",
    "x: 0777\n",
    "x: 010\n",
    "x: 0o17\n",
    "x: 0x1F\n",
    "x: 1_000\n",
    "x: 1e3\n",
    "x: 3.0e+2\n",
    "x: 1.0\n",
    "x: 1000000\n",
    "x: 2024-01-01\n",
    "x: ~\n",
    "x: 12345678901234567890\n",
    "x: .inf\n",
];

/// The facts-table strings whose `toYaml` quoting §2.6 records.
const FACTS_STRINGS: &[&str] = &[
    "y",
    "Y",
    "n",
    "NO",
    "off",
    "null",
    "~",
    "",
    "1e3",
    "0x1F",
    "012",
    "1_000",
    ".5",
    "+1",
    "2024-01-01",
    "1:20",
    "true",
    "1.0",
    "0.",
    "-1",
    ".inf",
    "12:30:45",
    "on",
    "yes",
    " lead",
    "trail ",
    "-",
    ":",
    "#x",
    "a #b",
    "- x",
    "@x",
    "`x",
    "%x",
    "!x",
    "&x",
    "*x",
    "|",
    ">",
    "{x",
    "[x",
    "a: b",
    "é",
    "=",
    "<<",
    "inf",
    "NaN",
    "with 'single'",
    "with \"double\"",
    "a\\b",
    "tab\tx",
    "line\nnext",
    "\nlead-nl",
    "trailing-nl\n",
];

#[test]
fn goyaml_matches_helm() {
    // A fixed seed keeps the corpus reproducible; BOSUN_YAML_SEED explores others.
    let seed = std::env::var("BOSUN_YAML_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut rng = Rng::new(seed.unwrap_or(20_240_601));

    let mut to_yaml_cases: Vec<Yaml> = Vec::new();
    for s in FACTS_STRINGS.iter().chain(gen::SPECIAL_WORDS) {
        to_yaml_cases.push(Yaml::Str(s.to_string()));
        to_yaml_cases.push(Yaml::Map(vec![(
            Node::new(Yaml::Str(s.to_string())),
            Node::new(Yaml::Seq(vec![Node::new(Yaml::Str(s.to_string()))])),
        )]));
    }
    to_yaml_cases.push(Yaml::Str(format!("{} end", "word ".repeat(30))));
    to_yaml_cases.push(Yaml::Str("x".repeat(100)));
    for f in [
        1e21,
        0.1,
        1234567.0,
        1e-7,
        100000.0,
        -0.0,
        12345678901234567890.0,
    ] {
        to_yaml_cases.push(Yaml::Float(f));
    }
    to_yaml_cases.push(Yaml::Null);
    to_yaml_cases.push(Yaml::Bool(true));
    to_yaml_cases.push(Yaml::Map(vec![]));
    to_yaml_cases.push(Yaml::Seq(vec![]));
    for doc in fixtures::DOCUMENTS {
        if let Ok(json) = yaml_to_json(doc) {
            to_yaml_cases.push(helm_value(&serde_json::from_str(&json).expect("JSON")));
        }
    }
    for _ in 0..3000 {
        to_yaml_cases.push(gen::json_value(&mut rng, 4));
    }

    let mut from_yaml_cases: Vec<String> = FACTS_VALUES.iter().map(|s| s.to_string()).collect();
    let fixed = FACTS_VALUES.len();
    from_yaml_cases.extend(fixtures::DOCUMENTS.iter().map(|d| d.to_string()));
    for w in gen::SPECIAL_WORDS {
        from_yaml_cases.push(format!("v: {w}\n"));
        from_yaml_cases.push(format!("{w}: v\n"));
        from_yaml_cases.push(format!("v: [{w}]\n"));
    }
    for _ in 0..2500 {
        from_yaml_cases.push(gen::yaml_text(&mut rng));
    }
    for i in 0..800 {
        let base = from_yaml_cases
            [fixed + fixtures::DOCUMENTS.len() + 3 * gen::SPECIAL_WORDS.len() + i]
            .clone();
        from_yaml_cases.push(gen::mutate(&mut rng, &base));
    }
    for v in to_yaml_cases.iter().skip(to_yaml_cases.len() - 600) {
        let doc = Yaml::Map(vec![(
            Node::new(Yaml::Str("v".into())),
            Node::new(v.clone()),
        )]);
        from_yaml_cases.push(marshal(&doc));
    }

    let values_files: Vec<String> = FACTS_VALUES
        .iter()
        .chain(fixtures::DOCUMENTS.iter().take(3))
        .map(|s| s.to_string())
        .chain(from_yaml_cases.iter().skip(200).step_by(9).cloned())
        .filter(|s| !s.contains("\n--") && !s.starts_with("--"))
        .collect();

    let to_yaml_json: Vec<Value> = to_yaml_cases
        .iter()
        .map(|v| serde_json::from_str(&to_json(v).expect("JSON")).expect("parse"))
        .collect();
    let answer = run_oracle(
        "helm_oracle.py",
        &json!({
            "to_yaml": to_yaml_json,
            "from_yaml": from_yaml_cases,
            "values_files": values_files,
        }),
    );

    let mut diff = Diff::default();
    let oracle_to_yaml = answer["to_yaml"].as_array().expect("to_yaml answers");
    assert_eq!(oracle_to_yaml.len(), to_yaml_cases.len());
    for (v, expected) in to_yaml_cases.iter().zip(oracle_to_yaml) {
        if unsortable_in_go(v) {
            continue;
        }
        let input = to_json(v).unwrap_or_default();
        diff.check(
            "toYaml",
            &input,
            expected.as_str().unwrap_or_default(),
            &helm_to_yaml(v),
        );
    }
    let oracle_from_yaml = answer["from_yaml"].as_array().expect("from_yaml answers");
    assert_eq!(oracle_from_yaml.len(), from_yaml_cases.len());
    for (src, expected) in from_yaml_cases.iter().zip(oracle_from_yaml) {
        if ambiguous_in_go(src) {
            continue;
        }
        diff.check(
            "fromYaml",
            src,
            expected.as_str().unwrap_or_default(),
            &helm_from_yaml(src),
        );
    }
    let oracle_values = answer["values_files"].as_array().expect("values answers");
    assert_eq!(oracle_values.len(), values_files.len());
    for (src, expected) in values_files.iter().zip(oracle_values) {
        if ambiguous_in_go(src) {
            continue;
        }
        let expected = match (&expected["json"], &expected["error"]) {
            (Value::String(j), _) => j.clone(),
            (_, Value::String(e)) => e.clone(),
            _ => "no answer".into(),
        };
        // Helm v4 reads values files through the Kubernetes YAMLReader (one document here).
        let doc = split_documents(src).expect("single document").concat();
        let actual = match unmarshal_map(&doc) {
            Ok(j) => j,
            Err(e) => format!("cannot load values.yaml: cannot unmarshal yaml document: {e}"),
        };
        diff.check("values.yaml", src, &expected, &actual);
    }
    diff.finish("go-yaml v2 vs Helm");
}
