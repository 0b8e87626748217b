//! Every chart of the in-repo corpus, rendered by bosun and by Helm's engine, must be
//! byte-identical file by file (errors: the same position). Each chart directory under
//! `tests/charts/` is rendered with its defaults and with each `ci/*.yaml` values file.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::{compare, repo_root, Job};

fn corpus_jobs() -> Vec<Job> {
    let mut jobs = vec![Job::new(
        repo_root().join("examples/helm-bookstore/helm-charts/book-store"),
    )];
    let dir = repo_root().join("crates/helm/tests/charts");
    let mut charts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    charts.sort();
    for c in charts {
        if !c.join("Chart.yaml").exists() {
            continue;
        }
        jobs.push(Job::new(c.clone()));
        if let Ok(rd) = std::fs::read_dir(c.join("ci")) {
            let mut files: Vec<_> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let mut j = Job::new(c.clone());
                j.values_files.push(f);
                jobs.push(j);
            }
        }
    }
    // Release options and capabilities other than the defaults.
    let mut j = Job::new(dir.join("features"));
    j.name = "custom-release".into();
    j.namespace = "team-a".into();
    j.kube_version = "v1.25.3".into();
    j.api_versions = vec![
        "custom.example.io/v1".into(),
        "monitoring.coreos.com/v1".into(),
    ];
    jobs.push(j);
    // Capabilities gates: an older cluster, an extra group/version and group/version/Kind
    // entries (`--api-versions`), appended to Helm's defaults.
    let mut j = Job::new(dir.join("cluster"));
    j.kube_version = "v1.28.4".into();
    j.api_versions = vec![
        "monitoring.coreos.com/v1".into(),
        "monitoring.coreos.com/v1/ServiceMonitor".into(),
        "networking.k8s.io/v1/Ingress".into(),
    ];
    jobs.push(j);
    // Versions as clusters report them: Helm keeps the text, compares the numbers.
    for v in [
        "1.21",
        "v1.29.10-gke.1245000",
        "1.30.2+k3s1",
        "v1.31.1-eks-a737599",
    ] {
        let mut j = Job::new(dir.join("cluster"));
        j.kube_version = v.into();
        jobs.push(j);
    }
    jobs
}

#[test]
fn corpus_matches_helm() {
    let jobs = corpus_jobs();
    let report = compare(&jobs);
    assert!(
        report.is_empty(),
        "{} of {} renders differ:\n{}",
        report.len(),
        jobs.len(),
        report.join("\n")
    );
}
