//! HTTPS POSTs of SOAP envelopes on hyper + rustls (the stack kube already brings in).
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use crate::error::{Error, Result};
use crate::tls::{holds_rustls_error, tls_config, Tls};

pub struct Transport {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    pub url: http::Uri,
    timeout: Duration,
}

/// What the server answered: status, a new session cookie if it set one, the body.
pub struct Reply {
    pub status: http::StatusCode,
    pub session_cookie: Option<String>,
    pub body: String,
}

pub const SESSION_COOKIE: &str = "vmware_soap_session";

/// The largest answer read: a property page of a few thousand VMs is a few MB; anything
/// beyond this is refused rather than held in memory.
const MAX_ANSWER: usize = 64 << 20;

impl Transport {
    /// A URL holding a user name or password is refused, and never repeated in an error:
    /// every error of this client names its URL, and errors end in logs and statuses.
    pub fn new(url: &str, tls: &Tls, timeout: Duration) -> Result<Self> {
        let shown = redact(url);
        let url: http::Uri = url
            .parse()
            .map_err(|e| Error::Config(format!("invalid URL {shown:?}: {e}")))?;
        if url.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(Error::Config(format!(
                "the URL {shown} holds a user name or password: give them as the user and password instead"
            )));
        }
        if url.scheme_str() != Some("https") {
            return Err(Error::Config(format!("URL {shown} is not https")));
        }
        let config = tls_config(tls)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            client,
            url,
            timeout,
        })
    }

    /// POSTs one SOAP envelope with the session cookie, if any.
    pub async fn post(&self, action: &str, cookie: Option<&str>, body: String) -> Result<Reply> {
        let mut req = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", action);
        if let Some(c) = cookie {
            req = req.header(http::header::COOKIE, format!("{SESSION_COOKIE}={c}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Config(e.to_string()))?;
        let url = self.url.to_string();
        let send = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| classify(&url, &e))?;
            let status = resp.status();
            let session_cookie = resp
                .headers()
                .get_all(http::header::SET_COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(session_from_set_cookie);
            let bytes = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        Error::TooLarge {
                            url: url.clone(),
                            limit: MAX_ANSWER,
                        }
                    } else {
                        classify(&url, e.as_ref())
                    }
                })?
                .to_bytes();
            let body = String::from_utf8_lossy(&bytes).into_owned();
            Ok(Reply {
                status,
                session_cookie,
                body,
            })
        };
        tokio::time::timeout(self.timeout, send)
            .await
            .map_err(|_| Error::Unreachable {
                url: url.clone(),
                message: format!("no answer within {} s", self.timeout.as_secs()),
            })?
    }
}

fn session_from_set_cookie(v: &str) -> Option<String> {
    let first = v.split(';').next()?.trim();
    let (name, value) = first.split_once('=')?;
    (name.trim() == SESSION_COOKIE).then(|| value.trim().trim_matches('"').to_string())
}

/// A TLS failure anywhere in the error's chain is `Tls`; anything else is `Unreachable`.
/// `url` with anything before an `@` in its authority replaced, for messages.
fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let authority = match authority.rfind('@') {
        Some(at) => format!("***@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    if scheme.is_empty() {
        format!("{authority}{path}")
    } else {
        format!("{scheme}://{authority}{path}")
    }
}

fn classify(url: &str, e: &(dyn std::error::Error + 'static)) -> Error {
    let mut messages = Vec::new();
    let mut tls = false;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        messages.push(err.to_string());
        tls |= holds_rustls_error(err);
        cur = err.source();
    }
    messages.dedup();
    let message = messages.join(": ");
    if tls {
        Error::Tls {
            url: url.to_string(),
            message,
        }
    } else {
        Error::Unreachable {
            url: url.to_string(),
            message,
        }
    }
}
#[cfg(test)]
mod tests {
    #[test]
    fn a_url_with_credentials_is_refused_without_showing_them() {
        let tls = crate::tls::Tls::Insecure;
        let t = std::time::Duration::from_secs(1);
        for url in [
            "https://admin:Secr3t@vc/sdk",
            "http://admin:Secr3t@vc/sdk",
            "https://admin:Secr3t@vc:x:y/sdk",
        ] {
            let e = super::Transport::new(url, &tls, t).err().expect("refused");
            let m = e.to_string();
            assert!(!m.contains("Secr3t") && !m.contains("admin"), "{m}");
        }
        assert!(super::Transport::new("https://vc/sdk", &tls, t).is_ok());
    }

    use super::*;

    #[test]
    fn the_session_cookie_is_read_from_set_cookie() {
        assert_eq!(
            session_from_set_cookie("vmware_soap_session=\"abc\"; Path=/; HttpOnly"),
            Some("abc".into())
        );
        assert_eq!(session_from_set_cookie("other=1"), None);
    }
}
