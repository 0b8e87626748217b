//! `--helm-chart NAME --helm-chart-repo URL [--helm-chart-version V]`: the chart is fetched from
//! a classic Helm repository — its `index.yaml`, then the archive it names — and then read as
//! any `.tgz`. The version is chosen as Helm does: an exact version, else the highest version
//! matching a constraint (`^1.2`, `~0.3`), else (none given) the highest stable one. A digest
//! in the index is checked against the download. `oci://` registries are not supported yet.
use std::path::{Path, PathBuf};
use std::time::Duration;

use bosun_helm::funcs::semver::{Constraints, Version};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::Error;

/// Neither an index nor a chart is this large; a bigger body is refused rather than held.
const MAX_BODY: usize = 64 << 20;
const TIMEOUT: Duration = Duration::from_secs(60);
const MAX_REDIRECTS: usize = 5;

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

#[derive(Deserialize, Clone, Debug)]
struct Entry {
    version: String,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    digest: Option<String>,
}

/// The message for `oci://` charts, naming the workaround.
pub fn oci_unsupported(reference: &str) -> Error {
    Error::Repo(format!(
        "{reference}: OCI registries are not supported yet. Pull the chart yourself (`helm pull {reference} [--version V]`) and pass the archive: --helm-chart ./CHART-VERSION.tgz"
    ))
}

/// Fetches `chart` (`name` or `repo/name`: the part after the last `/` is the name in the
/// index) from the repository at `repo`.
pub fn fetch(chart: &str, repo: &str, version: Option<&str>) -> Result<Fetched, Error> {
    if repo.starts_with("oci://") {
        return Err(oci_unsupported(repo));
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
    let entry = pick(entries, version).map_err(|wanted| {
        let mut all: Vec<&str> = entries.iter().map(|e| e.version.as_str()).collect();
        all.truncate(20);
        Error::Repo(format!(
            "chart {name:?} has no version {wanted} in {index_url} (versions: {}). Pass one of them with --helm-chart-version",
            all.join(", ")
        ))
    })?;
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
    let dir = tempfile::tempdir().map_err(Error::io(Path::new("temporary directory")))?;
    let path = dir.path().join(format!("{name}-{}.tgz", entry.version));
    std::fs::write(&path, &data).map_err(Error::io(&path))?;
    Ok(Fetched {
        _dir: dir,
        path,
        url,
    })
}

/// Helm's choice: an exact version first, then the highest match of a constraint; with no
/// version, the highest stable one (`*` excludes pre-releases). Err holds what was asked.
fn pick(entries: &[Entry], version: Option<&str>) -> Result<Entry, String> {
    if let Some(v) = version {
        if let Some(e) = entries.iter().find(|e| e.version == v) {
            return Ok(e.clone());
        }
    }
    let wanted = version.unwrap_or("*");
    let constraint = Constraints::parse(wanted).map_err(|_| wanted.to_string())?;
    entries
        .iter()
        .filter_map(|e| Version::parse(&e.version).ok().map(|v| (v, e)))
        .filter(|(v, _)| constraint.check(v))
        .max_by(|(a, _), (b, _)| a.compare(b))
        .map(|(_, e)| e.clone())
        .ok_or_else(|| match version {
            Some(v) => v.to_string(),
            None => "(no stable version)".to_string(),
        })
}

/// An index's URL is absolute, host-absolute (`/charts/x.tgz`) or relative to the repository.
fn resolve(base: &str, url: &str) -> String {
    if url.contains("://") {
        return url.to_string();
    }
    if let Some(path) = url.strip_prefix('/') {
        let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
        let host_end = base[after_scheme..]
            .find('/')
            .map(|i| i + after_scheme)
            .unwrap_or(base.len());
        return format!("{}/{path}", &base[..host_end]);
    }
    format!("{base}{url}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One GET, following redirects, on its own thread and runtime: the CLI may already be
/// inside a Tokio runtime, where blocking on another would panic.
fn get(url: &str) -> Result<Vec<u8>, String> {
    let url = url.to_string();
    std::thread::spawn(move || -> Result<Vec<u8>, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            tokio::time::timeout(TIMEOUT, get_async(&url))
                .await
                .map_err(|_| format!("no answer within {}s", TIMEOUT.as_secs()))?
                .map_err(|e| describe(&*e))
        })
    })
    .join()
    .map_err(|_| "the download thread failed".to_string())?
}

/// The error and its causes on one line (hyper's top error alone says little).
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

async fn get_async(url: &str) -> Result<Vec<u8>, BoxError> {
    use http_body_util::{BodyExt, Empty, Limited};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config()?)
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Empty<bytes::Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let mut url = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        let req = http::Request::get(url.as_str())
            .header(http::header::USER_AGENT, "bosun")
            .body(Empty::new())?;
        let resp = client.request(req).await?;
        let status = resp.status();
        if status.is_redirection() {
            let location = resp
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| format!("{status} without a Location"))?;
            url = resolve_redirect(&url, location);
            continue;
        }
        if !status.is_success() {
            return Err(format!("HTTP {status}").into());
        }
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?;
        return Ok(body.to_bytes().to_vec());
    }
    Err(format!("more than {MAX_REDIRECTS} redirects").into())
}

fn resolve_redirect(from: &str, location: &str) -> String {
    let dir = match from.rfind('/') {
        Some(i) if i > from.find("://").map(|j| j + 2).unwrap_or(0) => &from[..=i],
        _ => from,
    };
    resolve(dir, location)
}

fn tls_config() -> Result<rustls::ClientConfig, BoxError> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entries(vs: &[&str]) -> Vec<Entry> {
        vs.iter()
            .map(|v| Entry {
                version: v.to_string(),
                urls: vec![],
                digest: None,
            })
            .collect()
    }

    #[test]
    fn picks_as_helm_does() {
        let e = entries(&["0.9.0", "0.10.0", "1.0.0-rc.1", "0.2.0"]);
        // semver order, not string order; pre-releases only when asked for.
        assert_eq!(pick(&e, None).unwrap().version, "0.10.0");
        assert_eq!(pick(&e, Some("0.9.0")).unwrap().version, "0.9.0");
        assert_eq!(pick(&e, Some("1.0.0-rc.1")).unwrap().version, "1.0.0-rc.1");
        assert_eq!(pick(&e, Some("~0.9")).unwrap().version, "0.9.0");
        assert_eq!(pick(&e, Some("3.0.0")).unwrap_err(), "3.0.0");
        assert!(pick(&entries(&["1.0.0-rc.1"]), None).is_err());
    }

    #[test]
    fn resolves_urls_as_an_index_means_them() {
        let base = "http://h:1/charts/";
        assert_eq!(resolve(base, "a-1.tgz"), "http://h:1/charts/a-1.tgz");
        assert_eq!(resolve(base, "/x/a-1.tgz"), "http://h:1/x/a-1.tgz");
        assert_eq!(resolve(base, "https://o/a.tgz"), "https://o/a.tgz");
        assert_eq!(
            resolve_redirect("http://h:1/charts/index.yaml", "/y/index.yaml"),
            "http://h:1/y/index.yaml"
        );
    }
}
