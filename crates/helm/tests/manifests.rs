//! Document splitting and ordering against Helm: every chart of the corpus, rendered
//! with its defaults, split and sorted by bosun must give the release manifest Helm's
//! `install --dry-run=client` records, byte for byte (`tests/charts/separators` holds
//! every separator form); a chart Helm refuses, bosun refuses too.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use bosun_helm::render::manifest::sort_manifests;
use bosun_helm::render::{Chart, RenderOptions};
use common::{oracle_manifests, repo_root};

/// What Helm stores as `Release.Manifest`: the non-hook documents in install order.
fn bosun_manifest(chart: &std::path::Path) -> Result<String, String> {
    let chart = Chart::load(chart).map_err(|e| e.message)?;
    let r = chart
        .render(&RenderOptions::new("release-name", "default"))
        .map_err(|e| e.message)?;
    let (manifests, _hooks) = sort_manifests(&r).map_err(|e| e.message)?;
    Ok(manifests
        .iter()
        .map(|m| format!("---\n# Source: {}\n{}\n", m.path, m.content))
        .collect())
}

#[test]
fn release_manifests_match_helm() {
    let dir = repo_root().join("crates/helm/tests/charts");
    let mut charts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("Chart.yaml").exists())
        .collect();
    charts.sort();
    assert!(charts.iter().any(|c| c.ends_with("separators")));
    let helm = oracle_manifests(&charts);
    let mut report = Vec::new();
    for (chart, h) in charts.iter().zip(helm) {
        let tag = chart.file_name().unwrap().to_string_lossy();
        match (h, bosun_manifest(chart)) {
            (Ok(h), Ok(b)) if h == b => {}
            (Ok(h), Ok(b)) => {
                let (hl, bl): (Vec<&str>, Vec<&str>) =
                    (h.split('\n').collect(), b.split('\n').collect());
                let i = hl
                    .iter()
                    .zip(&bl)
                    .position(|(p, q)| p != q)
                    .unwrap_or(hl.len().min(bl.len()));
                report.push(format!(
                    "{tag} line {}:\n  helm:  {:?}\n  bosun: {:?}",
                    i + 1,
                    hl.get(i).unwrap_or(&"<end>"),
                    bl.get(i).unwrap_or(&"<end>")
                ));
            }
            // `features` prints values for the engine's sake, not YAML documents.
            (Err(h), Err(_)) if !tag.starts_with("err-") && tag != "features" => {
                report.push(format!("{tag}: both failed, Helm with: {h}"))
            }
            (Err(_), Err(_)) => {}
            (Ok(_), Err(b)) => report.push(format!("{tag}: only bosun failed: {b}")),
            (Err(h), Ok(_)) => report.push(format!("{tag}: only helm failed: {h}")),
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
