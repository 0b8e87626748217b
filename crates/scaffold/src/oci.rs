//! `--helm-chart oci://HOST[:PORT]/PATH/CHART[:TAG|@DIGEST] [--helm-chart-version V]`: the
//! chart is pulled from an OCI registry as Helm pulls it, through the distribution API:
//!
//! 1. the tag: the version given (`+` written `_`, as Helm pushes it), or, for a constraint or
//!    no version, the highest match among the repository's tags (`GET /v2/<name>/tags/list`,
//!    followed across pages; with no version the highest stable one) — Helm's choice;
//! 2. the manifest (`GET /v2/<name>/manifests/<tag>`, OCI manifest media type), checked against
//!    the digest the registry names for it;
//! 3. its layer of media type `application/vnd.cncf.helm.chart.content.v1.tar+gzip` (or the
//!    legacy `application/tar+gzip`, which Helm still reads), fetched as a blob and checked
//!    against the manifest's digest and size; then it is read as any `.tgz`.
//!
//! Authentication is anonymous: a registry that answers 401 with a `Bearer` challenge is asked
//! for a pull token at its realm (Docker Hub, GHCR, Harbor and distribution's token auth all
//! give anonymous pull tokens for public repositories); one that wants credentials is refused
//! with the way around (`helm registry login` and `helm pull`, then the archive). The scheme
//! is HTTPS, except for a loopback host (`localhost`, 127.0.0.0/8, `[::1]`), which is plain
//! HTTP as Docker treats it: bosun has no `--plain-http` flag, so a plain-HTTP registry
//! elsewhere is reached through a port-forward to loopback.
use std::collections::BTreeMap;

use http::header::{HeaderName, ACCEPT, AUTHORIZATION, WWW_AUTHENTICATE};
use serde::Deserialize;
use sha2::{Digest, Sha256, Sha512};

use crate::net::{self, hex, query_escape, Response};
use crate::repo::Fetched;
use crate::Error;

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
pub const CHART_LAYER_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// Charts pushed by Helm before 3.7 (Helm still pulls them).
const LEGACY_CHART_LAYER_MEDIA_TYPE: &str = "application/tar+gzip";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// Pages of a tags list followed before giving up (a registry pages at 100 or 1000 tags).
const MAX_TAG_PAGES: usize = 100;

/// An `oci://` reference taken apart.
#[derive(Debug, PartialEq, Eq)]
struct Reference {
    /// `host[:port]`.
    host: String,
    /// The repository's path in the registry (`charts/greeter`).
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl Reference {
    fn parse(reference: &str) -> Result<Reference, Error> {
        let bad = |why: &str| {
            Error::Repo(format!(
                "{reference:?} is not an OCI chart reference ({why}): write oci://HOST[:PORT]/PATH/CHART, with the version in --helm-chart-version"
            ))
        };
        let rest = reference
            .strip_prefix("oci://")
            .ok_or_else(|| bad("no oci:// prefix"))?;
        let (rest, digest) = match rest.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (rest, None),
        };
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository path after the host"))?;
        let (path, tag) = match path.rsplit_once('/') {
            Some((dir, last)) => match last.split_once(':') {
                Some((name, tag)) => (format!("{dir}/{name}"), Some(tag.to_string())),
                None => (path.to_string(), None),
            },
            None => match path.split_once(':') {
                Some((name, tag)) => (name.to_string(), Some(tag.to_string())),
                None => (path.to_string(), None),
            },
        };
        let path = path.trim_end_matches('/').to_string();
        if host.is_empty() || path.is_empty() {
            return Err(bad("an empty host or path"));
        }
        // The distribution spec's repository name grammar: lowercase components.
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        };
        if !path.split('/').all(component_ok) {
            return Err(bad(
                "a repository path is lowercase letters, digits, '.', '_' and '-' between '/'",
            ));
        }
        if tag.as_deref() == Some("") || digest.as_deref() == Some("") {
            return Err(bad("an empty tag or digest"));
        }
        Ok(Reference {
            host: host.to_string(),
            repository: path,
            tag,
            digest,
        })
    }

    /// The chart's name: the repository's last component.
    fn name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }

    /// HTTPS, or plain HTTP for a loopback host.
    fn base(&self) -> String {
        let scheme = if is_loopback(&self.host) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.host)
    }
}

/// `localhost`, 127.0.0.0/8 or `[::1]`, with or without a port.
fn is_loopback(host: &str) -> bool {
    let name = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default, rename = "mediaType")]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize, Clone)]
struct Descriptor {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    size: u64,
}

#[derive(Deserialize)]
struct Tags {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// The distribution API's error body: `{"errors": [{"code", "message"}]}`.
#[derive(Deserialize)]
struct Errors {
    errors: Vec<ApiError>,
}

#[derive(Deserialize)]
struct ApiError {
    code: String,
    #[serde(default)]
    message: String,
}

/// A registry's repository, with the pull token once one was given.
struct Registry<'a> {
    reference: &'a str,
    r: &'a Reference,
    base: String,
    token: Option<String>,
}

/// Pulls the chart `reference` names (at `version`, or its tag, or the latest stable one).
pub fn fetch(reference: &str, version: Option<&str>) -> Result<Fetched, Error> {
    let r = Reference::parse(reference)?;
    let mut reg = Registry {
        reference,
        base: r.base(),
        r: &r,
        token: None,
    };
    let (tag, manifest_ref) = match (&r.digest, &r.tag, version) {
        (Some(d), tag, _) => (tag.clone(), d.clone()),
        (None, Some(t), Some(v)) if t != v && t.replace('_', "+") != v => {
            return Err(Error::Repo(format!(
                "{reference} names tag {t} and --helm-chart-version says {v}: give the version once"
            )))
        }
        (None, Some(t), _) => (Some(t.clone()), t.clone()),
        (None, None, v) => {
            let tag = reg.resolve_tag(v)?;
            (Some(tag.clone()), tag)
        }
    };
    let (manifest, digest) = reg.manifest(&manifest_ref, tag.is_some())?;
    let sep = if manifest_ref.contains(':') { '@' } else { ':' };
    let at = format!("oci://{}/{}{sep}{manifest_ref}", r.host, r.repository);
    let layer = chart_layer(&manifest).ok_or_else(|| {
        let layers: Vec<&str> = manifest.layers.iter().map(|l| l.media_type.as_str()).collect();
        Error::Repo(format!(
            "{at} is not a Helm chart: its manifest ({digest}) has no layer of media type {CHART_LAYER_MEDIA_TYPE} (config {}, layers: {}). Check the reference: it may name a container image",
            manifest.config.as_ref().map(|c| c.media_type.as_str()).unwrap_or("none"),
            if layers.is_empty() { "none".to_string() } else { layers.join(", ") }
        ))
    })?;
    let data = reg.blob(&layer)?;
    let version = tag
        .map(|t| t.replace('_', "+"))
        .unwrap_or_else(|| short(&layer.digest).to_string());
    let url = format!("{}/v2/{}/blobs/{}", reg.base, r.repository, layer.digest);
    Fetched::keep(r.name(), &version, &data, url)
}

/// The chart's layer: the current media type, else the legacy one.
fn chart_layer(m: &Manifest) -> Option<Descriptor> {
    [CHART_LAYER_MEDIA_TYPE, LEGACY_CHART_LAYER_MEDIA_TYPE]
        .iter()
        .find_map(|t| m.layers.iter().find(|l| l.media_type == *t))
        .cloned()
}

fn short(digest: &str) -> &str {
    let hex = digest.split_once(':').map(|(_, h)| h).unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

impl Registry<'_> {
    /// Helm's choice of tag: an exact semantic version is the tag itself (`+` as `_`); a
    /// constraint, or none, picks among the repository's tags.
    fn resolve_tag(&mut self, version: Option<&str>) -> Result<String, Error> {
        if let Some(v) = version {
            if bosun_helm::funcs::semver::Version::parse(v).is_ok() {
                return Ok(v.replace('+', "_"));
            }
        }
        let tags = self.tags()?;
        if tags.is_empty() {
            return Err(Error::Repo(format!(
                "{}: the repository has no tags: nothing was pushed there, or the path is wrong",
                self.reference
            )));
        }
        let versions: Vec<String> = tags.iter().map(|t| t.replace('_', "+")).collect();
        let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
        let i = crate::repo::pick(&refs, version).map_err(|wanted| {
            Error::Repo(format!(
                "{}: no version {wanted} among its tags ({}). Pass one of them with --helm-chart-version",
                self.reference,
                list(&tags)
            ))
        })?;
        Ok(tags[i].clone())
    }

    fn tags(&mut self) -> Result<Vec<String>, Error> {
        let mut url = format!("{}/v2/{}/tags/list", self.base, self.r.repository);
        let mut all = Vec::new();
        for _ in 0..MAX_TAG_PAGES {
            let resp = self.get(&url, None)?;
            if !resp.status.is_success() {
                return Err(self.failed("listing its tags", &url, &resp));
            }
            let page: Tags = serde_json::from_slice(&resp.body)
                .map_err(|e| Error::Repo(format!("{url}: not a distribution tags list: {e}")))?;
            all.extend(page.tags.unwrap_or_default());
            match resp.header(http::header::LINK).and_then(next_link) {
                Some(next) => url = net::resolve(&format!("{}/", self.base), &next),
                None => return Ok(all),
            }
        }
        Ok(all)
    }

    /// The manifest at `reference` (a tag or a digest), checked against its digest; Ok also
    /// gives that digest.
    fn manifest(&mut self, reference: &str, is_tag: bool) -> Result<(Manifest, String), Error> {
        let url = format!(
            "{}/v2/{}/manifests/{reference}",
            self.base, self.r.repository
        );
        let resp = self.get(&url, Some(MANIFEST_MEDIA_TYPE))?;
        if resp.status == http::StatusCode::NOT_FOUND && is_tag {
            let known = self
                .tags()
                .map(|t| list(&t))
                .unwrap_or_else(|_| "unknown".to_string());
            return Err(Error::Repo(format!(
                "{}: no tag {reference} in the registry ({}; tags: {known}). Pass one of them with --helm-chart-version",
                self.reference,
                api_errors(&resp).unwrap_or_else(|| "HTTP 404".to_string()),
            )));
        }
        if !resp.status.is_success() {
            return Err(self.failed("fetching the manifest", &url, &resp));
        }
        // The digest the manifest is asked by, else the one the registry names for it.
        let want = if is_tag {
            resp.header(HeaderName::from_static("docker-content-digest"))
                .map(str::to_string)
        } else {
            Some(reference.to_string())
        };
        let digest = match want {
            Some(want) => {
                verify(&resp.body, &want)
                    .map_err(|got| self.mismatch(&url, "the manifest", &want, &got))?;
                want
            }
            None => format!("sha256:{}", hex(&Sha256::digest(&resp.body))),
        };
        let manifest: Manifest = serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Repo(format!("{url}: not an OCI image manifest: {e}")))?;
        if manifest.media_type.as_deref() == Some(INDEX_MEDIA_TYPE) {
            return Err(Error::Repo(format!(
                "{}: {reference} is an image index (several platforms' images), not a Helm chart",
                self.reference
            )));
        }
        Ok((manifest, digest))
    }

    fn blob(&mut self, layer: &Descriptor) -> Result<Vec<u8>, Error> {
        let url = format!(
            "{}/v2/{}/blobs/{}",
            self.base, self.r.repository, layer.digest
        );
        let resp = self.get(&url, None)?;
        if !resp.status.is_success() {
            return Err(self.failed("fetching the chart layer", &url, &resp));
        }
        if resp.body.len() as u64 != layer.size {
            return Err(Error::Repo(format!(
                "{url}: size mismatch: the manifest says {} bytes, the download is {}. The registry serves other bytes than its manifest names: do not use it",
                layer.size,
                resp.body.len()
            )));
        }
        verify(&resp.body, &layer.digest)
            .map_err(|got| self.mismatch(&url, "the chart layer", &layer.digest, &got))?;
        Ok(resp.body)
    }

    /// A GET with the token once there is one; a 401 with a Bearer challenge is answered
    /// once with an anonymous token from the challenge's realm.
    fn get(&mut self, url: &str, accept: Option<&str>) -> Result<Response, Error> {
        let resp = self.send(url, accept)?;
        if resp.status != http::StatusCode::UNAUTHORIZED || self.token.is_some() {
            return self.authorized(resp);
        }
        let challenge = resp.header(WWW_AUTHENTICATE).unwrap_or("").to_string();
        match parse_challenge(&challenge) {
            Some((scheme, params)) if scheme.eq_ignore_ascii_case("bearer") => {
                self.token = Some(self.token(&params)?);
                let resp = self.send(url, accept)?;
                self.authorized(resp)
            }
            _ => Err(self.credentials(&challenge)),
        }
    }

    fn send(&self, url: &str, accept: Option<&str>) -> Result<Response, Error> {
        let mut headers = Vec::new();
        if let Some(a) = accept {
            headers.push((ACCEPT, a.to_string()));
        }
        if let Some(t) = &self.token {
            headers.push((AUTHORIZATION, format!("Bearer {t}")));
        }
        net::get(url, &headers).map_err(|e| self.unreachable(url, &e))
    }

    fn authorized(&self, resp: Response) -> Result<Response, Error> {
        if resp.status == http::StatusCode::UNAUTHORIZED {
            return Err(self.credentials(resp.header(WWW_AUTHENTICATE).unwrap_or("")));
        }
        Ok(resp)
    }

    /// An anonymous token from the challenge's realm, for the scope it names (else pull on
    /// this repository).
    fn token(&self, params: &BTreeMap<String, String>) -> Result<String, Error> {
        let Some(realm) = params.get("realm") else {
            return Err(self.credentials("Bearer without a realm"));
        };
        let scope = params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{}:pull", self.r.repository));
        let mut url = realm.clone();
        url.push(if realm.contains('?') { '&' } else { '?' });
        if let Some(service) = params.get("service") {
            url.push_str(&format!("service={}&", query_escape(service)));
        }
        url.push_str(&format!("scope={}", query_escape(&scope)));
        let resp = net::get(&url, &[]).map_err(|e| self.unreachable(&url, &e))?;
        if !resp.status.is_success() {
            return Err(Error::Repo(format!(
                "{}: the registry's token service refused an anonymous pull token ({realm}: HTTP {}). The repository is private or the path is wrong: run `helm registry login {}` and `helm pull {}`, then pass --helm-chart ./CHART-VERSION.tgz",
                self.reference, resp.status, self.r.host, self.reference
            )));
        }
        #[derive(Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let t: Token = serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Repo(format!("{realm}: not a registry token answer: {e}")))?;
        t.token
            .or(t.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::Repo(format!("{realm}: the token answer holds no token")))
    }

    fn unreachable(&self, url: &str, e: &str) -> Error {
        Error::Repo(format!(
            "the OCI registry {} is unreachable ({url}: {e}). Check the reference and the network ({} is reached over {}), or pull the chart yourself (`helm pull {}`) and pass --helm-chart ./CHART-VERSION.tgz",
            self.r.host,
            self.r.host,
            if self.base.starts_with("https") { "HTTPS; only a loopback registry is reached over plain HTTP" } else { "plain HTTP, as a loopback registry" },
            self.reference
        ))
    }

    fn credentials(&self, challenge: &str) -> Error {
        Error::Repo(format!(
            "{}: the registry asks for credentials (HTTP 401, {challenge:?}) and bosun pulls anonymously: run `helm registry login {}` and `helm pull {}`, then pass --helm-chart ./CHART-VERSION.tgz",
            self.reference, self.r.host, self.reference
        ))
    }

    fn failed(&self, what: &str, url: &str, resp: &Response) -> Error {
        let detail = api_errors(resp).unwrap_or_else(|| format!("HTTP {}", resp.status));
        // A registry without the repository says NAME_UNKNOWN (some say only 404 to a tags list).
        let no_repository = detail.contains("NAME_UNKNOWN")
            || (resp.status == http::StatusCode::NOT_FOUND && url.ends_with("/tags/list"));
        let hint = if no_repository {
            ": the registry has no such repository; check the path in the reference"
        } else {
            ""
        };
        Error::Repo(format!(
            "{}: {what} failed ({url}: {detail}){hint}",
            self.reference
        ))
    }

    fn mismatch(&self, url: &str, what: &str, want: &str, got: &str) -> Error {
        Error::Repo(format!(
            "{url}: digest mismatch: {what} should be {want}, the download is {got}. The registry serves other bytes than it names: do not use it ({})",
            self.reference
        ))
    }
}

/// Checks `data` against an OCI digest (`sha256:…` or `sha512:…`); Err is the digest of the
/// data (or why it cannot be checked).
fn verify(data: &[u8], digest: &str) -> Result<(), String> {
    let (alg, want) = digest.split_once(':').unwrap_or(("", digest));
    let got = match alg {
        "sha256" => hex(&Sha256::digest(data)),
        "sha512" => hex(&Sha512::digest(data)),
        other => return Err(format!("unverifiable (digest algorithm {other:?})")),
    };
    if got.eq_ignore_ascii_case(want) {
        Ok(())
    } else {
        Err(format!("{alg}:{got}"))
    }
}

/// The distribution API's error codes and messages of a body, on one line.
fn api_errors(resp: &Response) -> Option<String> {
    let e: Errors = serde_json::from_slice(&resp.body).ok()?;
    let parts: Vec<String> = e
        .errors
        .iter()
        .map(|e| format!("{} {}", e.code, e.message).trim().to_string())
        .collect();
    (!parts.is_empty()).then(|| format!("HTTP {}: {}", resp.status, parts.join("; ")))
}

fn list(tags: &[String]) -> String {
    if tags.is_empty() {
        return "none".to_string();
    }
    let mut t: Vec<&str> = tags.iter().map(String::as_str).take(20).collect();
    if tags.len() > 20 {
        t.push("…");
    }
    t.join(", ")
}

/// `Bearer realm="https://auth/token",service="registry",scope="repository:x:pull"` → the
/// scheme and its parameters (quoted values may hold commas).
fn parse_challenge(header: &str) -> Option<(String, BTreeMap<String, String>)> {
    let header = header.trim();
    let (scheme, mut rest) = header
        .split_once(char::is_whitespace)
        .unwrap_or((header, ""));
    if scheme.is_empty() {
        return None;
    }
    let mut params = BTreeMap::new();
    loop {
        rest = rest.trim_start_matches([' ', ',', '\t']);
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().to_ascii_lowercase();
        rest = &rest[eq + 1..];
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &quoted[end.min(quoted.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        params.insert(key, value);
    }
    Some((scheme.to_string(), params))
}

/// The `rel="next"` target of a Link header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| {
                let p = p.trim().replace(' ', "");
                p == "rel=\"next\"" || p == "rel=next"
            })
            .then(|| {
                target
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn references_are_taken_apart_as_helm_does() {
        let r = Reference::parse("oci://127.0.0.1:5000/charts/greeter").unwrap();
        assert_eq!(r.host, "127.0.0.1:5000");
        assert_eq!(r.repository, "charts/greeter");
        assert_eq!((r.tag, r.digest), (None, None));
        let r = Reference::parse("oci://ghcr.io/org/charts/x:1.2.3_build.1").unwrap();
        assert_eq!(r.repository, "org/charts/x");
        assert_eq!(r.tag.as_deref(), Some("1.2.3_build.1"));
        assert_eq!(r.base(), "https://ghcr.io");
        let r = Reference::parse("oci://localhost:5000/x@sha256:abc").unwrap();
        assert_eq!(r.digest.as_deref(), Some("sha256:abc"));
        assert_eq!(r.base(), "http://localhost:5000");
        for bad in [
            "oci://host",
            "oci://host/",
            "oci://host/Charts/X",
            "http://h/x",
            "oci://h/x:",
        ] {
            let e = Reference::parse(bad).unwrap_err().to_string();
            assert!(e.contains("not an OCI chart reference"), "{bad}: {e}");
        }
    }

    #[test]
    fn only_loopback_hosts_are_plain_http() {
        for h in [
            "localhost",
            "localhost:5000",
            "127.0.0.1:1",
            "127.3.2.1",
            "[::1]:5000",
            "[::1]",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "registry.example",
            "10.0.0.1:5000",
            "localhost.example:80",
            "[::2]:1",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn bearer_challenges_are_read() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:charts/x:pull,push""#,
        )
        .unwrap();
        assert_eq!(s, "Bearer");
        assert_eq!(p["realm"], "https://auth.example/token");
        assert_eq!(p["service"], "registry.example");
        assert_eq!(p["scope"], "repository:charts/x:pull,push");
        let (s, p) = parse_challenge(r#"Basic realm="basic-realm""#).unwrap();
        assert_eq!((s.as_str(), p["realm"].as_str()), ("Basic", "basic-realm"));
        let (_, p) = parse_challenge("Bearer realm=http://h/t, service=s").unwrap();
        assert_eq!(
            (p["realm"].as_str(), p["service"].as_str()),
            ("http://h/t", "s")
        );
        assert!(parse_challenge("").is_none());
    }

    #[test]
    fn the_next_page_of_tags_is_found() {
        assert_eq!(
            next_link(r#"</v2/charts/x/tags/list?last=b&n=2>; rel="next""#).as_deref(),
            Some("/v2/charts/x/tags/list?last=b&n=2")
        );
        assert_eq!(next_link(r#"<https://h/a>; rel="prev""#), None);
    }

    #[test]
    fn digests_are_verified() {
        let d = format!("sha256:{}", hex(&Sha256::digest(b"chart")));
        assert!(verify(b"chart", &d).is_ok());
        assert_eq!(
            verify(b"other", &d).unwrap_err(),
            format!("sha256:{}", hex(&Sha256::digest(b"other")))
        );
        let d = format!("sha512:{}", hex(&Sha512::digest(b"chart")));
        assert!(verify(b"chart", &d).is_ok());
        assert!(verify(b"chart", "md5:00")
            .unwrap_err()
            .contains("unverifiable"));
    }
}
