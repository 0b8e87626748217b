//! Error messages byte for byte against Helm 4's engine: `fail`, `required`, errors inside
//! `include`, `tpl` and subcharts, and Helm 4's layout of other execution errors. (The
//! corpus compares error positions; this file compares whole texts.)
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::path::{Path, PathBuf};

use common::{bosun, oracle, repo_root, Job};

fn one_off(root: &Path, i: usize, template: &str, values: &str) -> PathBuf {
    let dir = root.join(format!("m{i:02}"));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: msg\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.join("values.yaml"), values).unwrap();
    std::fs::write(
        dir.join("templates/_helpers.tpl"),
        "{{- define \"msg.need\" -}}\n{{ required \"need .Values.name\" .Values.name }}\n{{- end }}\n{{- define \"msg.fail\" -}}\n{{ fail (printf \"bad mode %q\" .) }}\n{{- end }}\n",
    )
    .unwrap();
    std::fs::write(dir.join("templates/t.yaml"), template).unwrap();
    dir
}

#[test]
fn error_messages_match_helm_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        ("a: {{ fail \"stop here\" }}", ""),
        ("a: {{ fail \"\" }}", ""),
        (
            "\n\n  x: {{ required \"name is required!\" .Values.name }}",
            "",
        ),
        (
            "x: {{ required \"empty string\" .Values.name }}",
            "name: \"\"\n",
        ),
        ("x: {{ required \"nil list ok?\" .Values.l }}", "l: []\n"),
        ("x: {{ .Values.name | required \"piped\" }}", ""),
        ("x: {{ include \"msg.need\" . }}", ""),
        ("x: {{ include \"msg.fail\" \"fast\" }}", ""),
        ("x: {{ tpl \"{{ fail \\\"in tpl\\\" }}\" . }}", ""),
        (
            "x: {{ tpl .Values.t . }}",
            "t: \"{{ required \\\"in values tpl\\\" .Values.zz }}\"\n",
        ),
        ("x: {{ tpl \"{{ include \\\"msg.need\\\" . }}\" . }}", ""),
        (
            "{{ if not .Values.ok }}{{ fail (printf \"multi\\nline: %v\" 3) }}{{ end }}",
            "",
        ),
        ("x: {{ .Values.a.b.c }}", "a: {b: null}\n"),
        ("x: {{ add 1 .Values.s }}", "s: [1]\n"),
        ("x: {{ index .Values.l 5 }}", "l: [1]\n"),
        ("x: {{ include \"nope\" . }}", ""),
        ("x: {{ template \"nope\" . }}", ""),
        ("x: {{ toYaml }}", ""),
    ];
    let jobs: Vec<Job> = cases
        .iter()
        .enumerate()
        .map(|(i, (t, v))| Job::new(one_off(tmp.path(), i, t, v)))
        .chain(
            [
                "err-fail",
                "err-required",
                "err-tpl",
                "err-type",
                "err-nilptr",
                "err-schema",
            ]
            .iter()
            .map(|c| Job::new(repo_root().join("crates/helm/tests/charts").join(c))),
        )
        .collect();
    let helm = oracle(&jobs);
    let mut report = Vec::new();
    for (job, h) in jobs.iter().zip(helm) {
        let b = bosun(job, &h.values).map_err(|e| e.message);
        if h.result != b {
            report.push(format!(
                "{}\n  helm:  {:?}\n  bosun: {:?}",
                job.chart.display(),
                h.result,
                b
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// The chart's `kubeVersion` checked as Helm's install checks it (its template engine does
/// not): Helm's own install (`--dry-run=client`, its default version) against bosun's
/// check with the same default, message for message.
#[test]
fn kube_version_constraints_match_helms_install() {
    let tmp = tempfile::tempdir().unwrap();
    let constraints = [
        ">=99.0.0",
        "<1.20.0",
        ">=1.25.0-0",
        "~1.36.0",
        ">= 1.30, < 1.40",
        "^1.2",
        "1.35.x || >=1.36.0-0",
    ];
    let charts: Vec<PathBuf> = constraints
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let dir = tmp.path().join(format!("k{i}"));
            std::fs::create_dir_all(dir.join("templates")).unwrap();
            std::fs::write(
                dir.join("Chart.yaml"),
                format!("apiVersion: v2\nname: kv\nversion: 0.1.0\nkubeVersion: {c:?}\n"),
            )
            .unwrap();
            std::fs::write(dir.join("templates/cm.yaml"), "a: 1\n").unwrap();
            dir
        })
        .collect();
    let helm = common::oracle_manifests(&charts);
    for ((chart, h), c) in charts.iter().zip(helm).zip(constraints) {
        let b = bosun_helm::render::Chart::load(chart)
            .unwrap()
            .check_kube_version(None)
            .map_err(|e| e.message);
        match (h, b) {
            (Ok(_), Ok(())) => {}
            (Err(h), Err(b)) => assert_eq!(h, b, "{c}"),
            (h, b) => panic!("{c}: helm {h:?}, bosun {b:?}"),
        }
    }
}
