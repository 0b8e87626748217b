//! `values.schema.json` against Helm 4's validator, message for message: one-off charts,
//! each with a schema and values that break it, rendered by bosun and by Helm's engine.
//! Where one chart breaks several sibling properties Helm lists them in Go's random map
//! order, so those messages are compared line by line as sets; all others byte for byte.
//! `$ref`s to `file://` schemas are resolved as Helm 4 resolves them, and, for operators
//! built with Helm 3, relative to the working directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::path::{Path, PathBuf};

use common::{bosun, oracle, repo_root, Job};

struct Case {
    schema: String,
    values: &'static str,
    /// Several siblings fail: Helm's order is random.
    unordered: bool,
}

fn case(schema: &str, values: &'static str) -> Case {
    Case {
        schema: schema.to_string(),
        values,
        unordered: false,
    }
}

fn write_chart(root: &Path, i: usize, c: &Case) -> PathBuf {
    let dir = root.join(format!("c{i:02}"));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: schema\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("values.yaml"), c.values).unwrap();
    std::fs::write(dir.join("values.schema.json"), &c.schema).unwrap();
    std::fs::write(dir.join("templates/cm.yaml"), "a: {{ .Values | toJson }}\n").unwrap();
    dir
}

fn prop(name: &str, s: &str) -> String {
    format!(r#"{{"type":"object","properties":{{"{name}":{s}}}}}"#)
}

#[test]
fn schema_messages_match_helm() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs.json");
    std::fs::write(
        &defs,
        r#"{"definitions":{"port":{"type":"integer","minimum":1024},"name":{"type":"string","maxLength":3}}}"#,
    )
    .unwrap();
    let defs_url = format!("file://{}", defs.display());
    let mut cases = vec![
        case(&prop("r", r#"{"type":"integer"}"#), "r: \"3\"\n"),
        case(&prop("r", r#"{"type":"string"}"#), "r: 1.5\n"),
        case(&prop("r", r#"{"type":"string"}"#), "r: 3\n"),
        case(&prop("r", r#"{"type":["string","null"]}"#), "r: true\n"),
        case(&prop("r", r#"{"type":"array"}"#), "r: {a: 1}\n"),
        case(r#"{"required":["image"]}"#, "r: 1\n"),
        case(r#"{"required":["image","tag"]}"#, "r: 1\n"),
        case(
            &prop("m", r#"{"enum":["slow","medium",1,true,null]}"#),
            "m: fast\n",
        ),
        case(&prop("m", r#"{"enum":["slow"]}"#), "m: fast\n"),
        case(&prop("m", r#"{"enum":[{"a":1},"x"]}"#), "m: fast\n"),
        case(&prop("m", r#"{"const":"it's \"x\""}"#), "m: fast\n"),
        case(&prop("m", r#"{"const":[1]}"#), "m: fast\n"),
        case(&prop("p", r#"{"maximum":65535}"#), "p: 70000\n"),
        case(&prop("p", r#"{"minimum":1}"#), "p: -1234567\n"),
        case(&prop("p", r#"{"exclusiveMaximum":1}"#), "p: 1.5\n"),
        case(&prop("p", r#"{"exclusiveMinimum":2}"#), "p: 2\n"),
        case(&prop("p", r#"{"multipleOf":0.25}"#), "p: 1.3\n"),
        case(&prop("s", r#"{"minLength":2}"#), "s: x\n"),
        case(&prop("s", r#"{"maxLength":3}"#), "s: héllo\n"),
        case(
            &prop("s", r#"{"pattern":"^[a-z]+$"}"#),
            "s: \"Bad_'Name'\"\n",
        ),
        case(&prop("l", r#"{"minItems":1}"#), "l: []\n"),
        case(&prop("l", r#"{"maxItems":1}"#), "l: [1, 2]\n"),
        case(&prop("l", r#"{"uniqueItems":true}"#), "l: [a, b, a]\n"),
        case(&prop("o", r#"{"minProperties":1}"#), "o: {}\n"),
        case(&prop("o", r#"{"maxProperties":1}"#), "o: {a: 1, b: 2}\n"),
        case(
            r#"{"additionalProperties":false,"properties":{"a":{}}}"#,
            "a: 1\nb: 2\n",
        ),
        case(
            &prop("o", r#"{"additionalProperties":false}"#),
            "o: {x: 1, y: 2}\n",
        ),
        case(&prop("n", "false"), "n: 1\n"),
        case(
            &prop("n", r#"{"type":"string","minLength":5,"pattern":"^x"}"#),
            "n: abc\n",
        ),
        case(
            &prop(
                "sub",
                r#"{"type":"object","required":["b"],"properties":{"a":{"const":2}}}"#,
            ),
            "sub: {a: 1}\n",
        ),
        case(
            &prop(
                "l",
                r#"{"uniqueItems":true,"items":{"type":"string","minLength":2}}"#,
            ),
            "l: [a, a]\n",
        ),
        // `$ref` to another file, by absolute file:// URL.
        case(
            &prop(
                "p",
                &format!(r#"{{"$ref":"{defs_url}#/definitions/port"}}"#),
            ),
            "p: 80\n",
        ),
        case(
            &prop(
                "p",
                &format!(r#"{{"$ref":"{defs_url}#/definitions/name"}}"#),
            ),
            "p: long\n",
        ),
        // A file Helm cannot read: the compile error, as Helm words it.
        case(
            &prop("p", r#"{"$ref":"file:///nonexistent/bosun-defs.json"}"#),
            "p: 1\n",
        ),
        case(
            &prop("p", r#"{"$ref":"bosun-relative-defs.json#/x"}"#),
            "p: 1\n",
        ),
        // Valid values pass.
        case(
            &prop(
                "p",
                &format!(r#"{{"$ref":"{defs_url}#/definitions/port"}}"#),
            ),
            "p: 8080\n",
        ),
    ];
    let mut multi = case(
        r#"{"type":"object","additionalProperties":false,"required":["image"],"properties":{"replicas":{"type":"integer"},"port":{"maximum":65535},"name":{"type":"string","pattern":"^[a-z-]+$","maxLength":5},"tags":{"uniqueItems":true,"items":{"minLength":2}}}}"#,
        "replicas: \"3\"\nport: 70000\nname: Bad_Name\ntags: [a, a]\nextra: 1\n",
    );
    multi.unordered = true;
    cases.push(multi);
    let charts: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| write_chart(tmp.path(), i, c))
        .collect();
    let jobs: Vec<Job> = charts.iter().cloned().map(Job::new).collect();
    let helm = oracle(&jobs);
    let mut report = Vec::new();
    for ((job, h), c) in jobs.iter().zip(helm).zip(&cases) {
        let b = bosun(job, &h.values).map_err(|e| e.message);
        let same = match (&h.result, &b) {
            (Ok(x), Ok(y)) => x == y,
            (Err(x), Err(y)) if c.unordered => {
                let mut xs: Vec<&str> = x.lines().collect();
                let mut ys: Vec<&str> = y.lines().collect();
                xs.sort_unstable();
                ys.sort_unstable();
                xs == ys
            }
            (Err(x), Err(y)) => names_sorted(x) == names_sorted(y),
            _ => false,
        };
        if !same {
            report.push(format!(
                "{}\n  schema: {}\n  values: {:?}\n  helm:  {:?}\n  bosun: {:?}",
                job.chart.display(),
                c.schema,
                c.values,
                h.result.as_ref().map(|_| "ok"),
                b.as_ref().map(|_| "ok"),
            ));
            if let (Err(x), Err(y)) = (&h.result, &b) {
                report.push(format!("    helm:  {x:?}\n    bosun: {y:?}"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "{} of {} differ:\n{}",
        report.len() / 2,
        cases.len(),
        report.join("\n")
    );
}

/// Helm lists the names of several additional properties in Go's random map order: they
/// are compared sorted.
fn names_sorted(msg: &str) -> String {
    msg.lines()
        .map(
            |l| match (l.find("additional properties "), l.rfind(" not allowed")) {
                (Some(a), Some(b)) => {
                    let start = a + "additional properties ".len();
                    let mut names: Vec<&str> = l[start..b].split(", ").collect();
                    names.sort_unstable();
                    format!("{}{}{}", &l[..start], names.join(", "), &l[b..])
                }
                _ => l.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

/// A Helm-based operator's chart whose schema refers to a shared file as
/// `file://./helm-charts/…`, from the operator's working directory (cargo runs tests in
/// the crate's directory). Helm 4 reads `/helm-charts/…` instead and fails; Helm 3.17 and
/// the operators built with it read the working directory's file, and so does bosun. The
/// violations found must be Helm's for the same schema referred to by absolute path.
#[test]
fn file_refs_relative_to_the_working_directory_resolve() {
    let chart = repo_root().join("crates/helm/tests/operator-charts/schema-ref");
    let tmp = tempfile::tempdir().unwrap();
    let abs = tmp.path().join("schema-ref");
    copy_dir(&chart, &abs);
    let shared = std::fs::canonicalize("tests/operator-charts/schema-ref/shared").unwrap();
    let schema = std::fs::read_to_string(abs.join("values.schema.json")).unwrap();
    assert!(schema.contains("file://./tests/operator-charts/schema-ref/shared/"));
    std::fs::write(
        abs.join("values.schema.json"),
        schema.replace(
            "file://./tests/operator-charts/schema-ref/shared/",
            &format!("file://{}/", shared.display()),
        ),
    )
    .unwrap();
    for values in [None, Some("ci/bad.yaml")] {
        let mut rel = Job::new(chart.clone());
        let mut absj = Job::new(abs.clone());
        if let Some(v) = values {
            rel.values_files.push(chart.join(v));
            absj.values_files.push(chart.join(v));
        }
        let helm = oracle(&[absj]).pop().unwrap();
        let b = bosun(&rel, &helm.values).map_err(|e| e.message);
        match (&helm.result, &b) {
            (Ok(x), Ok(y)) => assert_eq!(x, y),
            (Err(x), Err(y)) => assert_eq!(x, y),
            _ => panic!("helm: {:?}\nbosun: {:?}", helm.result, b),
        }
        assert_eq!(values.is_some(), b.is_err(), "{b:?}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}
