//! The helm plugin's `create api`: the kind is backed by a chart (`--helm-chart DIR|.tgz`,
//! or a new small chart for `--kind`), copied into `helm-charts/<name>/`; the sample's spec is
//! the chart's values. operator-sdk's defaults: group `charts`, version `v1alpha1`, kind the
//! chart's name in UpperCamelCase. With `--helm-chart-repo` ([`crate::repo`]) or an `oci://`
//! reference ([`crate::oci`]) the chart is fetched first.
use std::path::{Path, PathBuf};

use crate::chart::ChartSource;
use crate::commands::{Api, ApiOptions};
use crate::files::Tree;
use crate::{names, watches, Error};

pub const DEFAULT_GROUP: &str = "charts";
pub const DEFAULT_VERSION: &str = "v1alpha1";

pub fn api(opts: &ApiOptions) -> Result<Api, Error> {
    let chart = match (&opts.helm_chart, &opts.kind) {
        (Some(path), _) => load(path, opts)?,
        (None, Some(kind)) => {
            names::check_kind(kind)?;
            ChartSource::new_for(kind)
        }
        (None, None) => return Err(Error::NothingToCreate),
    };
    let group = opts.group.clone().unwrap_or_else(|| DEFAULT_GROUP.into());
    let version = opts
        .version
        .clone()
        .unwrap_or_else(|| DEFAULT_VERSION.into());
    let kind = opts
        .kind
        .clone()
        .unwrap_or_else(|| names::upper_camel(&chart.name));
    let chart_dir = format!("helm-charts/{}", chart.name);
    let mut files = Tree::default();
    for (rel, data) in &chart.files {
        files.put(format!("{chart_dir}/{rel}"), data.clone());
    }
    let (v, k, d) = (version.clone(), kind.clone(), chart_dir.clone());
    Ok(Api {
        group,
        version,
        kind,
        files,
        entry: Box::new(move |g| watches::chart_entry(g, &v, &k, &d)),
        sample_spec: chart.values,
        sample_note: "Default values copied from <project_dir>/helm-charts/<chart>/values.yaml",
        created: vec![format!("Created {chart_dir}")],
    })
}

/// A local chart, or one fetched from `--helm-chart-repo` or an `oci://` registry (its errors
/// then name the URL).
fn load(chart: &Path, opts: &ApiOptions) -> Result<ChartSource, Error> {
    let text = chart.to_string_lossy();
    let fetched = if text.starts_with("oci://") {
        if let Some(repo) = &opts.helm_chart_repo {
            return Err(Error::Repo(format!(
                "--helm-chart {text} names its registry already: leave out --helm-chart-repo {repo}"
            )));
        }
        crate::oci::fetch(&text, opts.helm_chart_version.as_deref())?
    } else if let Some(repo) = &opts.helm_chart_repo {
        crate::repo::fetch(&text, repo, opts.helm_chart_version.as_deref())?
    } else {
        if opts.helm_chart_version.is_some() {
            return Err(Error::Repo(
                "--helm-chart-version selects a version in a repository: pass --helm-chart-repo URL too".into(),
            ));
        }
        if !chart.exists() && text.matches('/').count() == 1 && !text.starts_with('.') {
            return Err(Error::Repo(format!(
                "{text} is neither a local chart nor fetchable: bosun reads no Helm repositories.yaml, so pass the repository's URL with --helm-chart-repo"
            )));
        }
        return ChartSource::load(chart);
    };
    ChartSource::load(&fetched.path).map_err(|e| match e {
        Error::Chart { message, .. } => Error::Chart {
            path: PathBuf::from(&fetched.url),
            message,
        },
        other => other,
    })
}
