//! The one HTTP(S) GET that fetching charts needs (a chart repository's index and archives, an
//! OCI registry's tags, manifests, blobs and tokens), on hyper with rustls and the system's
//! trust store — the client bosun-vsphere already builds, so no new crate.
use std::time::Duration;

/// Neither an index, a manifest nor a chart is this large; a bigger body is refused.
const MAX_BODY: usize = 64 << 20;
const TIMEOUT: Duration = Duration::from_secs(60);
const MAX_REDIRECTS: usize = 5;

/// What a server answered, whatever the status.
pub(crate) struct Response {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: http::header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One GET with `headers`, following redirects, on its own thread and runtime: the CLI may
/// already be inside a Tokio runtime, where blocking on another would panic. A redirect to
/// another origin (a registry sending blobs to object storage) drops `Authorization`: the
/// token is the registry's, not the storage's. Err is a transport failure, on one line.
pub(crate) fn get(
    url: &str,
    headers: &[(http::header::HeaderName, String)],
) -> Result<Response, String> {
    let url = url.to_string();
    let headers = headers.to_vec();
    std::thread::spawn(move || -> Result<Response, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            tokio::time::timeout(TIMEOUT, get_async(&url, headers))
                .await
                .map_err(|_| format!("no answer within {}s", TIMEOUT.as_secs()))?
                .map_err(|e| describe(&*e))
        })
    })
    .join()
    .map_err(|_| "the download thread failed".to_string())?
}

/// A GET whose answer must be a success: Err names the status otherwise.
pub(crate) fn get_ok(url: &str) -> Result<Vec<u8>, String> {
    let resp = get(url, &[])?;
    if !resp.status.is_success() {
        return Err(format!("HTTP {}", resp.status));
    }
    Ok(resp.body)
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

async fn get_async(
    url: &str,
    mut headers: Vec<(http::header::HeaderName, String)>,
) -> Result<Response, BoxError> {
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
        let mut req = http::Request::get(url.as_str()).header(http::header::USER_AGENT, "bosun");
        for (name, value) in &headers {
            req = req.header(name, value);
        }
        let resp = client.request(req.body(Empty::new())?).await?;
        let status = resp.status();
        if status.is_redirection() && status != http::StatusCode::NOT_MODIFIED {
            let location = resp
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| format!("{status} without a Location"))?;
            let next = resolve_redirect(&url, location);
            if origin(&next) != origin(&url) {
                headers.retain(|(n, _)| n != http::header::AUTHORIZATION);
            }
            url = next;
            continue;
        }
        let headers = resp.headers().clone();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the body of {url}: {e}"))?;
        return Ok(Response {
            status,
            headers,
            body: body.to_bytes().to_vec(),
        });
    }
    Err(format!("more than {MAX_REDIRECTS} redirects").into())
}

/// `scheme://host:port` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
    let end = url[after_scheme..]
        .find('/')
        .map(|i| i + after_scheme)
        .unwrap_or(url.len());
    &url[..end]
}

/// A URL as a page at `base` means it: absolute, host-absolute (`/charts/x.tgz`) or relative.
pub(crate) fn resolve(base: &str, url: &str) -> String {
    if url.contains("://") {
        return url.to_string();
    }
    if let Some(path) = url.strip_prefix('/') {
        return format!("{}/{path}", origin(base));
    }
    format!("{base}{url}")
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

/// Percent-encodes a query value (RFC 3986's unreserved characters are kept).
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(origin("https://h:5000/v2/x"), "https://h:5000");
        assert_eq!(origin("https://h"), "https://h");
    }

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(
            query_escape("repository:charts/x:pull"),
            "repository%3Acharts%2Fx%3Apull"
        );
        assert_eq!(query_escape("a b~c"), "a%20b~c");
    }
}
