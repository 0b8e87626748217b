//! `--helm-chart NAME --helm-chart-repo URL [--helm-chart-version V]`: the chart is fetched from
//! a classic Helm repository — its `index.yaml`, then the archive it names — and then read as
//! any `.tgz`. The version is chosen as Helm does: an exact version, else the highest version
//! matching a constraint (`^1.2`, `~0.3`), else (none given) the highest stable one. A digest
//! in the index is checked against the download. `oci://` charts are fetched by [`crate::oci`].
use std::path::{Path, PathBuf};

use bosun_helm::funcs::semver::{Constraints, Version};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::net::{get_ok as get, hex, resolve};
use crate::Error;

/// A chart archive fetched from a repository, kept in a temporary directory until dropped.
pub struct Fetched {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    /// Where it came from, for messages.
    pub url: String,
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    entries: std::collections::BTreeMap<String, Vec<Entry>>,
}

#[derive(Deserialize, Debug)]
struct Entry {
    version: String,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    digest: Option<String>,
}

/// Fetches `chart` (`name` or `repo/name`: the part after the last `/` is the name in the
/// index) from the repository at `repo`.
pub fn fetch(chart: &str, repo: &str, version: Option<&str>) -> Result<Fetched, Error> {
    if let Some(registry) = repo.strip_prefix("oci://") {
        // `--helm-chart-repo oci://HOST/PATH --helm-chart NAME` is `oci://HOST/PATH/NAME`.
        let name = chart.rsplit('/').next().unwrap_or(chart);
        let reference = format!("oci://{}/{name}", registry.trim_end_matches('/'));
        return crate::oci::fetch(&reference, version);
    }
    if !(repo.starts_with("http://") || repo.starts_with("https://")) {
        return Err(Error::Repo(format!(
            "--helm-chart-repo {repo:?} is not an http:// or https:// URL"
        )));
    }
    let name = chart.rsplit('/').next().unwrap_or(chart);
    let base = format!("{}/", repo.trim_end_matches('/'));
    let index_url = format!("{base}index.yaml");
    let index = get(&index_url).map_err(|e| {
        Error::Repo(format!(
            "the chart repository {repo} is unreachable ({index_url}: {e}). Check --helm-chart-repo and the network, or download the chart yourself and pass --helm-chart CHART.tgz"
        ))
    })?;
    let index: Index = serde_yaml::from_slice(&index)
        .map_err(|e| Error::Repo(format!("{index_url} is not a Helm repository index: {e}")))?;
    let Some(entries) = index.entries.get(name) else {
        let known: Vec<&str> = index.entries.keys().map(String::as_str).collect();
        return Err(Error::Repo(format!(
            "chart {name:?} is not in {index_url} (it holds: {}). Check the name in --helm-chart",
            if known.is_empty() {
                "no chart".to_string()
            } else {
                known.join(", ")
            }
        )));
    };
    let versions: Vec<&str> = entries.iter().map(|e| e.version.as_str()).collect();
    let picked = pick(&versions, version).map_err(|wanted| {
        let mut all = versions.clone();
        all.truncate(20);
        Error::Repo(format!(
            "chart {name:?} has no version {wanted} in {index_url} (versions: {}). Pass one of them with --helm-chart-version",
            all.join(", ")
        ))
    })?;
    let entry = &entries[picked];
    let Some(rel) = entry.urls.first() else {
        return Err(Error::Repo(format!(
            "{index_url}: {name} {} lists no download URL",
            entry.version
        )));
    };
    let url = resolve(&base, rel);
    let data = get(&url).map_err(|e| {
        Error::Repo(format!(
            "downloading {name} {} from {url}: {e}",
            entry.version
        ))
    })?;
    if let Some(want) = entry.digest.as_deref().filter(|d| !d.is_empty()) {
        let got = hex(&Sha256::digest(&data));
        let want = want.strip_prefix("sha256:").unwrap_or(want);
        if !got.eq_ignore_ascii_case(want) {
            return Err(Error::Repo(format!(
                "{url}: digest mismatch: {index_url} says sha256 {want}, the download is {got}. The repository serves another archive than its index names: do not use it (or re-index the repository)"
            )));
        }
    }
    Fetched::keep(name, &entry.version, &data, url)
}

impl Fetched {
    /// Writes a downloaded archive to a temporary file, as `helm pull` names it.
    pub(crate) fn keep(
        name: &str,
        version: &str,
        data: &[u8],
        url: String,
    ) -> Result<Fetched, Error> {
        let dir = tempfile::tempdir().map_err(Error::io(Path::new("temporary directory")))?;
        let path = dir.path().join(format!("{name}-{version}.tgz"));
        std::fs::write(&path, data).map_err(Error::io(&path))?;
        Ok(Fetched {
            _dir: dir,
            path,
            url,
        })
    }
}

/// Helm's choice among `versions`: an exact version first, then the highest match of a
/// constraint; with no version, the highest stable one (`*` excludes pre-releases). Err holds
/// what was asked; Ok the position of the one chosen. Shared with OCI registries, whose tags
/// are the versions.
pub(crate) fn pick(versions: &[&str], version: Option<&str>) -> Result<usize, String> {
    if let Some(v) = version {
        if let Some(i) = versions.iter().position(|e| *e == v) {
            return Ok(i);
        }
    }
    let wanted = version.unwrap_or("*");
    let constraint = Constraints::parse(wanted).map_err(|_| wanted.to_string())?;
    versions
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Version::parse(e).ok().map(|v| (v, i)))
        .filter(|(v, _)| constraint.check(v))
        .max_by(|(a, _), (b, _)| a.compare(b))
        .map(|(_, i)| i)
        .ok_or_else(|| match version {
            Some(v) => v.to_string(),
            None => "(no stable version)".to_string(),
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn picks_as_helm_does() {
        let e = ["0.9.0", "0.10.0", "1.0.0-rc.1", "0.2.0"];
        let p = |v| e[pick(&e, v).unwrap()];
        // semver order, not string order; pre-releases only when asked for.
        assert_eq!(p(None), "0.10.0");
        assert_eq!(p(Some("0.9.0")), "0.9.0");
        assert_eq!(p(Some("1.0.0-rc.1")), "1.0.0-rc.1");
        assert_eq!(p(Some("~0.9")), "0.9.0");
        assert_eq!(pick(&e, Some("3.0.0")).unwrap_err(), "3.0.0");
        assert!(pick(&["1.0.0-rc.1"], None).is_err());
    }
}
