//! A table of hundreds of one-line templates covering Go's template language, every
//! printing rule and Helm's function map, each rendered by bosun and by Helm's engine
//! (batched into one oracle call) and compared byte for byte; errors must name the same
//! position. The table is `tests/oneliners/templates.txt` (one template per line, `\n`
//! written as `\\n`), rendered with `tests/oneliners/values.yaml`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::{compare, repo_root, Job};

#[test]
fn oneliners_match_helm() {
    let dir = repo_root().join("crates/helm/tests/oneliners");
    let table = std::fs::read_to_string(dir.join("templates.txt")).unwrap();
    let values = std::fs::read_to_string(dir.join("values.yaml")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (i, line) in table.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with("##") {
            continue;
        }
        let chart = tmp.path().join(format!("l{:04}", i + 1));
        std::fs::create_dir_all(chart.join("templates")).unwrap();
        std::fs::write(
            chart.join("Chart.yaml"),
            "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
        )
        .unwrap();
        std::fs::write(chart.join("values.yaml"), &values).unwrap();
        std::fs::write(chart.join("templates/t.yaml"), line.replace("\\n", "\n")).unwrap();
        jobs.push(Job::new(chart));
    }
    let report = compare(&jobs);
    let annotated: Vec<String> = report
        .iter()
        .map(|r| {
            let n: usize = r
                .split("/l")
                .nth(1)
                .and_then(|s| s.get(..4))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            format!(
                "templates.txt:{n}: {}\n    {}",
                table.lines().nth(n.saturating_sub(1)).unwrap_or(""),
                r
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "{} of {} one-liners differ:\n{}",
        report.len(),
        jobs.len(),
        annotated.join("\n")
    );
}
