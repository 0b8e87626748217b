//! Differential test of the PyYAML side against PyYAML 6 with libyaml (what Ansible runs):
//! `yaml.load_all(Loader=CSafeLoader)` values, types and error texts, node positions, and
//! `yaml.dump(Dumper=CSafeDumper)` output byte for byte with Ansible's `to_yaml` and
//! `to_nice_yaml` option sets and others, all in one oracle process.
//!
//! Run: `cargo test -p bosun-yaml --test pyyaml_oracle` (needs `scripts/setup-helm.sh`).

mod support;

use bosun_yaml::pyyaml::{dump, DumpOptions};
use bosun_yaml::{load_all, Node, Schema, Timestamp, Yaml};
use serde_json::{json, Value};
use support::gen::{self, Rng};
use support::{fixtures, run_oracle, Diff};

/// The oracle's typed JSON for a value (see pyyaml_oracle.py).
fn typed(v: &Yaml) -> Value {
    match v {
        Yaml::Null => json!({"t": "null"}),
        Yaml::Bool(b) => json!({"t": "bool", "v": b}),
        Yaml::Int(i) => json!({"t": "int", "v": i.to_string()}),
        Yaml::BigInt(s) => json!({"t": "int", "v": s}),
        Yaml::Float(f) => json!({"t": "float", "v": format!("{f:?}")}),
        Yaml::Str(s) => json!({"t": "str", "v": s}),
        Yaml::Binary(b) => json!({"t": "bytes", "v": b64(b)}),
        Yaml::Timestamp(Timestamp {
            year,
            month,
            day,
            time: None,
        }) => {
            json!({"t": "date", "v": format!("{year:04}-{month:02}-{day:02}")})
        }
        Yaml::Timestamp(Timestamp {
            year,
            month,
            day,
            time: Some(t),
        }) => json!({
            "t": "datetime",
            "v": [year, month, day, t.hour, t.minute, t.second, t.microsecond, t.offset_minutes]
        }),
        Yaml::Seq(items) => {
            json!({"t": "list", "v": items.iter().map(|i| typed(&i.value)).collect::<Vec<_>>()})
        }
        Yaml::Map(pairs) => json!({
            "t": "dict",
            "v": pairs.iter().map(|(k, v)| json!([typed(&k.value), typed(&v.value)])).collect::<Vec<_>>()
        }),
    }
}

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                A[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// Floats compare by value (NaN equal to NaN); everything else by its typed JSON.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(o) if o.get("t") == Some(&json!("float")) => {
            let f: f64 = o["v"]
                .as_str()
                .unwrap_or_default()
                .parse()
                .unwrap_or(f64::NAN);
            json!({"t": "float", "v": if f.is_nan() { "nan".to_string() } else { format!("{f:?}") }})
        }
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn opts_json(o: &DumpOptions) -> Value {
    json!({
        "indent": o.indent,
        "width": o.width,
        "default_flow_style": o.default_flow_style,
        "sort_keys": o.sort_keys,
        "allow_unicode": o.allow_unicode,
        "explicit_start": o.explicit_start,
        "explicit_end": o.explicit_end,
    })
}

/// Preorder positions of nodes (node, then key and value of each pair, or items).
fn marks(n: &Node, out: &mut Vec<Value>) {
    out.push(json!([n.mark.line, n.mark.col]));
    match &n.value {
        Yaml::Seq(items) => items.iter().for_each(|i| marks(i, out)),
        Yaml::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            marks(k, out);
            marks(v, out);
        }),
        _ => {}
    }
}

/// Texts that exercise PyYAML's constructors beyond the generator's reach.
const PYYAML_CASES: &[&str] = &[
    "a: &x {k: 1, j: 2}\nb:\n  <<: *x\n  k: 3\n",
    "base: &b {a: 1}\nother: &o {a: 2, c: 3}\nm:\n  <<: [*b, *o]\n  d: 4\n",
    "a: {k: 1}\nb: {<<: *a}\n",
    "a: &x 1\nb: {<<: *x}\n",
    "x: =\n",
    "=: x\n",
    "x: <<\n",
    "d: 2001-12-14\nt: 2001-12-14t21:59:43.10-05:00\nu: 2001-12-14 21:59:43.10 -5\nz: 2002-12-14T21:59:43.1234567Z\n",
    "bad: 2023-02-30\n",
    "bad: 2023-02-28 25:00:00\n",
    "bin: !!binary |\n  R0lGODlhDAAMAIQAAP//9/X\n  17unp5WZmZgAAAOfn515eXvPz7Y6OjuDg4J+fn5\n",
    "bin: !!binary 'Zm9vYg'\n",
    "set: !!set {a}\n",
    "omap: !!omap [a: 1, b: 2]\n",
    "i: !!int '0x_1F'\nj: !!int '0o17'\nk: !!int 'abc'\n",
    "f: !!float '1e3'\ng: !!float 'x'\n",
    "b: !!bool 'y'\n",
    "s: !!str 1.5\nn: !!null x\n",
    "t: !foo bar\n",
    "a: &a 1\nb: &a 2\n",
    "a: *nope\n",
    "{[1]: a}\n",
    "{1: a, 1.0: b, true: c}\n",
    "a: 1\na: 2\n",
    "? - a\n: b\n",
    "- ! 12\n- ! '12'\n- !!str 12\n",
    "%YAML 1.2\n---\na: 1\n",
    "%YAML 1.1\n---\na: 1\n...\n---\nb: 2\n",
    "[a?b, ?c, c: d]\n",
    "{a: b:c, e:f}\n",
    "- [x, 'y', \"z\\/\"]\n",
    "k: 123456789012345678901234567890\nh: 0xFFFFFFFFFFFFFFFFFFFFFF\ns: 190:20:30\nf: 190:20:30.15\nn: -1:20\n",
    "k: .inf\nl: -.Inf\nm: .NAN\nn: 1_000.5_0\no: 6.8523015e+5\np: 685.230_15e+03\n",
];

fn options_for(i: usize, rng: &mut Rng) -> DumpOptions {
    match i % 5 {
        0 => DumpOptions::to_yaml(),
        1 => DumpOptions::to_nice_yaml(),
        2 => DumpOptions::default(),
        3 => DumpOptions {
            indent: *rng.pick(&[1, 2, 3, 5, 10]),
            width: *rng.pick(&[0, 10, 40, 120, 1000]),
            default_flow_style: *rng.pick(&[None, Some(true), Some(false)]),
            sort_keys: rng.chance(50),
            allow_unicode: rng.chance(50),
            explicit_start: rng.chance(50),
            explicit_end: rng.chance(30),
        },
        _ => DumpOptions {
            width: 40,
            ..DumpOptions::to_yaml()
        },
    }
}

#[test]
fn pyyaml_matches_python() {
    let seed = std::env::var("BOSUN_YAML_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut rng = Rng::new(seed.unwrap_or(20_240_602));

    let mut dump_cases: Vec<(Yaml, DumpOptions)> = Vec::new();
    for (i, w) in gen::SPECIAL_WORDS.iter().enumerate() {
        let v = Yaml::Map(vec![(
            Node::new(Yaml::Str(w.to_string())),
            Node::new(Yaml::Str(w.to_string())),
        )]);
        dump_cases.push((Yaml::Str(w.to_string()), options_for(i, &mut rng)));
        dump_cases.push((v, options_for(i + 1, &mut rng)));
    }
    for (i, doc) in fixtures::DOCUMENTS.iter().enumerate() {
        for value in load_all(doc, Schema::PyYaml).expect("fixtures load") {
            for opts in [
                DumpOptions::to_yaml(),
                DumpOptions::to_nice_yaml(),
                options_for(i, &mut rng),
            ] {
                dump_cases.push((value.value.clone(), opts));
            }
        }
    }
    for i in 0..3000 {
        let v = gen::python_value(&mut rng, 4);
        let o = options_for(i, &mut rng);
        dump_cases.push((v, o));
    }

    let mut load_cases: Vec<String> = PYYAML_CASES.iter().map(|s| s.to_string()).collect();
    load_cases.extend(fixtures::DOCUMENTS.iter().map(|d| d.to_string()));
    for w in gen::SPECIAL_WORDS {
        load_cases.push(format!("v: {w}\n"));
        load_cases.push(format!("{w}: v\n"));
        load_cases.push(format!("[{w}]\n"));
    }
    let generated = load_cases.len();
    for _ in 0..2500 {
        load_cases.push(gen::yaml_text(&mut rng));
    }
    for i in 0..800 {
        let base = load_cases[generated + i].clone();
        load_cases.push(gen::mutate(&mut rng, &base));
    }
    for (v, o) in dump_cases.iter().take(600) {
        load_cases.push(dump(v, o));
    }

    let request = json!({
        "load": load_cases,
        "dump": dump_cases.iter().map(|(v, o)| json!({"value": typed(v), "opts": opts_json(o)})).collect::<Vec<_>>(),
    });
    let answer = run_oracle("pyyaml_oracle.py", &request);
    // Ansible 11 (ansible-core 2.18) installs PyYAML 6.0.x and uses its libyaml bindings.
    eprintln!("oracle: {}", answer["versions"]);
    assert!(
        answer["versions"]["pyyaml"]
            .as_str()
            .is_some_and(|v| v.starts_with("6.0.")),
        "the oracle must be PyYAML 6.0.x (scripts/setup-helm.sh pins it)"
    );
    assert_eq!(
        answer["versions"]["libyaml"],
        json!(true),
        "the oracle must have libyaml"
    );

    let mut diff = Diff::default();
    let loads = answer["load"].as_array().expect("load answers");
    assert_eq!(loads.len(), load_cases.len());
    for (src, expected) in load_cases.iter().zip(loads) {
        let ours = load_all(src, Schema::PyYaml);
        // Python builds recursive structures (or runs out of recursion in a recursive merge);
        // a tree cannot hold them, so bosun refuses them with its own message.
        if matches!(&ours, Err(e) if e.message().contains("recursive structures are not supported"))
        {
            continue;
        }
        match (&expected["docs"], ours) {
            (Value::Array(docs), Ok(nodes)) => {
                let theirs = canonical(&Value::Array(docs.clone()));
                let mine = canonical(&Value::Array(
                    nodes.iter().map(|n| typed(&n.value)).collect(),
                ));
                diff.check("load", src, &theirs.to_string(), &mine.to_string());
                // Positions, where the value tree mirrors the node graph (no merge keys, no
                // repeated keys folded, no !!set/!!omap reshaping).
                if let Value::Array(their_marks) = &expected["marks"] {
                    for (node, theirs) in nodes.iter().zip(their_marks) {
                        let mut mine = Vec::new();
                        marks(node, &mut mine);
                        let comparable = !src.contains("<<")
                            && !src.contains("!!set")
                            && !src.contains("!!omap")
                            && theirs.as_array().is_some_and(|t| t.len() == mine.len());
                        if comparable {
                            diff.check(
                                "marks",
                                src,
                                &theirs.to_string(),
                                &Value::Array(mine).to_string(),
                            );
                        }
                    }
                }
            }
            (Value::Array(docs), Err(e)) => diff.check(
                "load",
                src,
                &Value::Array(docs.clone()).to_string(),
                &format!("error: {e}"),
            ),
            (_, Ok(nodes)) => diff.check(
                "load error",
                src,
                &expected.to_string(),
                &format!(
                    "{:?}",
                    nodes.iter().map(|n| typed(&n.value)).collect::<Vec<_>>()
                ),
            ),
            (_, Err(e)) => diff.check(
                "load error",
                src,
                expected["error"].as_str().unwrap_or_default(),
                e.message(),
            ),
        }
    }
    let dumps = answer["dump"].as_array().expect("dump answers");
    assert_eq!(dumps.len(), dump_cases.len());
    for ((v, o), expected) in dump_cases.iter().zip(dumps) {
        let input = format!("{} {:?}", typed(v), o);
        match expected.as_str() {
            Some(text) => diff.check("dump", &input, text, &dump(v, o)),
            None => diff.check(
                "dump (oracle failed)",
                &input,
                &expected.to_string(),
                &dump(v, o),
            ),
        }
    }
    diff.finish("PyYAML vs Python");
}
