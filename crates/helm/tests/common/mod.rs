//! Helm's own engine (libhelm through helm-python-sdk) as the oracle of the
//! differential tests. Missing oracle = failed test, never a skipped one.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bosun_helm::render::{Chart, RenderOptions};
use bosun_helm::value::{json, Data, Value};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn venv_python() -> PathBuf {
    let venv = std::env::var("BOSUN_HELM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/bosun/helm-venv")
        });
    let py = venv.join("bin/python");
    assert!(
        py.exists(),
        "Helm's engine (the oracle) is missing at {}: run scripts/setup-helm.sh",
        venv.display()
    );
    py
}

/// One render request for both engines.
#[derive(Clone)]
pub struct Job {
    pub chart: PathBuf,
    pub values_files: Vec<PathBuf>,
    pub set: Vec<String>,
    pub name: String,
    pub namespace: String,
    pub kube_version: String,
    pub api_versions: Vec<String>,
}

impl Job {
    pub fn new(chart: PathBuf) -> Job {
        Job {
            chart,
            values_files: Vec::new(),
            set: Vec::new(),
            name: "release-name".into(),
            namespace: "default".into(),
            kube_version: "v1.31.0".into(),
            api_versions: Vec::new(),
        }
    }
}

pub struct OracleResult {
    /// The values Helm parsed (float64 numbers), as given to both engines.
    pub values: Data,
    pub result: Result<BTreeMap<String, String>, String>,
}

fn js(s: &str) -> String {
    json::marshal(&Value::str(s)).unwrap()
}

/// Renders every job with Helm's engine in one process.
pub fn oracle(jobs: &[Job]) -> Vec<OracleResult> {
    let mut input = String::from("[");
    for (i, j) in jobs.iter().enumerate() {
        if i > 0 {
            input.push(',');
        }
        let files: Vec<String> = j
            .values_files
            .iter()
            .map(|f| js(&f.to_string_lossy()))
            .collect();
        let sets: Vec<String> = j.set.iter().map(|s| js(s)).collect();
        let apis: Vec<String> = j.api_versions.iter().map(|s| js(s)).collect();
        input.push_str(&format!(
            r#"{{"chart": {}, "values_files": [{}], "set": [{}], "opts": {{"name": {}, "namespace": {}, "kube_version": {}, "api_versions": [{}], "is_install": true}}}}"#,
            js(&j.chart.to_string_lossy()),
            files.join(","),
            sets.join(","),
            js(&j.name),
            js(&j.namespace),
            js(&j.kube_version),
            apis.join(",")
        ));
    }
    input.push(']');
    let mut child = Command::new(venv_python())
        .arg(repo_root().join("scripts/helm-oracle.py"))
        .arg("batch")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle failed");
    let Data::List(items) = Data::from_json_float(&String::from_utf8_lossy(&out.stdout)).unwrap()
    else {
        panic!("oracle output is not a list")
    };
    items
        .into_iter()
        .map(|it| {
            let values = it.lookup("values").cloned().unwrap_or_default();
            let r = it
                .as_map()
                .and_then(|m| m.get("result"))
                .cloned()
                .unwrap_or_default();
            let result = match r.as_map().and_then(|m| m.get("ok")) {
                Some(Data::Map(files)) => Ok(files
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()),
                _ => Err(r
                    .as_map()
                    .and_then(|m| m.get("err"))
                    .and_then(Data::as_str)
                    .unwrap_or("")
                    .to_string()),
            };
            OracleResult { values, result }
        })
        .collect()
}

/// Renders with bosun the way the oracle did (same values, same options).
pub fn bosun(
    job: &Job,
    values: &Data,
) -> Result<BTreeMap<String, String>, bosun_helm::render::RenderError> {
    let chart = Chart::load(&job.chart)?;
    let mut o = RenderOptions::new(&job.name, &job.namespace);
    o.values = values.clone();
    o.kube_version = Some(job.kube_version.clone());
    o.api_versions = job.api_versions.clone();
    chart.render(&o).map(|r| r.files)
}

/// The position an error names: `file:line[:col]`.
pub fn helm_position(msg: &str) -> Option<String> {
    for prefix in ["execution error at (", "parse error at ("] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            return rest.split_once("):").map(|(p, _)| p.to_string());
        }
    }
    let body = msg.strip_prefix("template: ").unwrap_or(msg);
    let first = body.split(['\n', ' ']).next().unwrap_or("");
    Some(first.trim_end_matches(':').to_string())
}

/// Compares both engines on every job; returns a report of differences.
pub fn compare(jobs: &[Job]) -> Vec<String> {
    let results = oracle(jobs);
    let mut report = Vec::new();
    for (job, o) in jobs.iter().zip(results) {
        let b = bosun(job, &o.values);
        let tag = job.chart.display().to_string();
        match (o.result, b) {
            (Ok(h), Ok(b)) => {
                for path in h
                    .keys()
                    .chain(b.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                {
                    match (h.get(path), b.get(path)) {
                        (Some(x), Some(y)) if x == y => {}
                        (Some(x), Some(y)) => {
                            let (hl, bl): (Vec<&str>, Vec<&str>) =
                                (x.split('\n').collect(), y.split('\n').collect());
                            let i = hl
                                .iter()
                                .zip(&bl)
                                .position(|(p, q)| p != q)
                                .unwrap_or(hl.len().min(bl.len()));
                            report.push(format!(
                                "{tag} {path} line {}:\n  helm:  {:?}\n  bosun: {:?}",
                                i + 1,
                                hl.get(i).unwrap_or(&"<end>"),
                                bl.get(i).unwrap_or(&"<end>")
                            ));
                        }
                        (Some(_), None) => report.push(format!("{tag}: bosun lacks {path}")),
                        (None, Some(_)) => report.push(format!("{tag}: bosun adds {path}")),
                        (None, None) => {}
                    }
                }
            }
            (Err(h), Err(b)) => {
                let (hp, bp) = (helm_position(&h), helm_position(&b.message));
                if hp != bp {
                    report.push(format!(
                        "{tag}: error positions differ\n  helm:  {h}\n  bosun: {}",
                        b.message
                    ));
                }
            }
            (Ok(_), Err(b)) => report.push(format!("{tag}: only bosun failed: {}", b.message)),
            (Err(h), Ok(_)) => report.push(format!("{tag}: only helm failed: {h}")),
        }
    }
    report
}

/// Helm's release manifest for each chart (`install --dry-run=client` with the chart's
/// defaults): the documents as `SplitManifests` and `SortManifests` leave them.
pub fn oracle_manifests(charts: &[PathBuf]) -> Vec<Result<String, String>> {
    let items: Vec<String> = charts
        .iter()
        .map(|c| format!(r#"{{"chart": {}}}"#, js(&c.to_string_lossy())))
        .collect();
    let input = format!("[{}]", items.join(","));
    let mut child = Command::new(venv_python())
        .arg(repo_root().join("scripts/helm-oracle.py"))
        .arg("manifests")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle failed");
    let Data::List(items) = Data::from_json_float(&String::from_utf8_lossy(&out.stdout)).unwrap()
    else {
        panic!("oracle output is not a list")
    };
    items
        .into_iter()
        .map(|it| match (it.lookup("ok"), it.lookup("err")) {
            (Some(m), _) => Ok(m.as_str().unwrap_or("").to_string()),
            (None, e) => Err(e.and_then(Data::as_str).unwrap_or("").to_string()),
        })
        .collect()
}

/// Helm's `strvals.ParseString` (`--set-string`) on each expression: the values, or the error.
pub fn oracle_set_string(exprs: &[String]) -> Vec<Result<Data, String>> {
    let input = format!(
        "[{}]",
        exprs.iter().map(|e| js(e)).collect::<Vec<_>>().join(",")
    );
    let mut child = Command::new(venv_python())
        .arg(repo_root().join("scripts/helm-oracle.py"))
        .arg("setstring")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "oracle failed");
    let Data::List(items) = Data::from_json_float(&String::from_utf8_lossy(&out.stdout)).unwrap()
    else {
        panic!("oracle output is not a list")
    };
    items
        .into_iter()
        .map(|it| match (it.lookup("ok"), it.lookup("err")) {
            (Some(v), _) => Ok(v.clone()),
            (_, Some(e)) => Err(e.as_str().unwrap_or("").to_string()),
            _ => Err("no result".into()),
        })
        .collect()
}
