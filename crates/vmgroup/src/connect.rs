//! The vCenter connection: credentials `VC_USER`/`VC_PASS`/`VC_HOST` from a Secret (the seed's
//! `vc-creds`), the CA bundle from the Secret's `ca.crt` or the operator's CA file, TLS
//! verification off only when the operator's `insecure` option says so. One logged-in client
//! is kept and shared while the Secret is unchanged (the client logs in again by itself when
//! its session expires); a changed Secret gives a new client. No secret value is logged or
//! written anywhere: messages name the Secret and its keys only.
use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_vsphere::{CallCounts, Client, Config, Tls};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::error::{Error, Problem};
use crate::operator::Settings;
use crate::reason::Reason;

/// The clients, shared by every namespace's controller: one per Secret (`namespace/name`),
/// with the fingerprint of what it was made from. Every client counts its calls on one
/// counter, so the totals (the `bosun_vcenter_calls_total` metric) only grow, even when a
/// changed Secret replaces a client.
#[derive(Clone, Default)]
pub struct Connections {
    clients: Arc<Mutex<BTreeMap<String, (String, Client)>>>,
    counts: Arc<CallCounts>,
}

/// What the Secret gives.
pub struct Credentials {
    pub user: String,
    pub password: String,
    pub host: String,
    pub ca: Option<Vec<u8>>,
}

/// `VC_HOST` as the seed gives it (a host name or address, perhaps with a port) or a full URL.
pub fn url_of(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    if host.contains("://") {
        if host.ends_with("/sdk") {
            host.to_string()
        } else {
            format!("{host}/sdk")
        }
    } else {
        format!("https://{host}/sdk")
    }
}

/// The credentials in a Secret's data; the problem names the missing keys.
pub fn credentials(secret: &Secret, where_: &str) -> Result<Credentials, Problem> {
    let data = secret.data.clone().unwrap_or_default();
    let get = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let missing: Vec<&str> = ["VC_USER", "VC_PASS", "VC_HOST"]
        .into_iter()
        .filter(|k| get(k).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(Problem::new(
            Reason::CredentialsMissing,
            format!(
                "the credentials Secret {where_} has no {}",
                missing.join(", ")
            ),
        ));
    }
    Ok(Credentials {
        user: get("VC_USER").unwrap_or_default(),
        password: get("VC_PASS").unwrap_or_default(),
        host: get("VC_HOST").unwrap_or_default(),
        ca: data.get("ca.crt").map(|v| v.0.clone()),
    })
}

impl Connections {
    /// vCenter calls per vim25 method, over every client made so far.
    pub async fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.snapshot()
    }

    /// The counter every client counts on.
    pub fn counter(&self) -> Arc<CallCounts> {
        self.counts.clone()
    }

    /// A logged-in client for the credentials in the Secret `settings` name.
    pub async fn client(
        &self,
        kube: &kube::Client,
        settings: &Settings,
        vg_namespace: &str,
    ) -> Result<Client, Error> {
        let ns = settings
            .secret_namespace
            .clone()
            .unwrap_or_else(|| vg_namespace.to_string());
        let where_ = format!("{ns}/{}", settings.secret_name);
        let secrets: Api<Secret> = Api::namespaced(kube.clone(), &ns);
        let secret = match secrets.get_opt(&settings.secret_name).await? {
            Some(s) => s,
            None => {
                return Err(Error::VCenter(Problem::new(
                    Reason::CredentialsMissing,
                    format!(
                        "the credentials Secret {where_} does not exist; create it with VC_USER, VC_PASS and VC_HOST"
                    ),
                )))
            }
        };
        let creds = credentials(&secret, &where_).map_err(Error::VCenter)?;
        let tls = if settings.insecure {
            Tls::Insecure
        } else if let Some(ca) = &creds.ca {
            Tls::CaBundle(ca.clone())
        } else if let Some(path) = &settings.ca_file {
            let pem = std::fs::read(path).map_err(|e| {
                Error::VCenter(Problem::new(
                    Reason::TlsFailed,
                    format!("cannot read the CA file {}: {e}", path.display()),
                ))
            })?;
            Tls::CaBundle(pem)
        } else {
            Tls::SystemRoots
        };
        let key = fingerprint(&creds, &tls);
        let mut clients = self.clients.lock().await;
        if let Some((k, c)) = clients.get(&where_) {
            if *k == key {
                return Ok(c.clone());
            }
        }
        let url = url_of(&creds.host);
        let mut config = Config::new(&url, &creds.user, &creds.password, tls);
        config.request_timeout = settings.request_timeout;
        config.counts = self.counts.clone();
        let client = Client::connect(config).await.map_err(|e| {
            Error::vsphere(
                &format!("connecting to vCenter at {url} as the user of Secret {where_}"),
                &e,
            )
        })?;
        clients.insert(where_, (key, client.clone()));
        Ok(client)
    }
}

fn fingerprint(c: &Credentials, tls: &Tls) -> String {
    let mut h = Sha256::new();
    for part in [c.user.as_bytes(), c.password.as_bytes(), c.host.as_bytes()] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    match tls {
        Tls::Insecure => h.update(b"insecure"),
        Tls::CaBundle(pem) => h.update(pem),
        Tls::SystemRoots => h.update(b"system"),
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn vc_host_becomes_an_sdk_url() {
        assert_eq!(url_of("10.170.100.72"), "https://10.170.100.72/sdk");
        assert_eq!(url_of("vc.lab:8989"), "https://vc.lab:8989/sdk");
        assert_eq!(
            url_of("https://127.0.0.1:1234/sdk"),
            "https://127.0.0.1:1234/sdk"
        );
        assert_eq!(url_of("https://vc/"), "https://vc/sdk");
    }

    #[test]
    fn missing_keys_are_named_and_values_never_shown() {
        let s = Secret {
            data: Some(
                [("VC_PASS".to_string(), ByteString(b"hunter2".to_vec()))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        };
        let p = credentials(&s, "ns/vc-creds").err().expect("incomplete");
        assert_eq!(p.reason, Reason::CredentialsMissing);
        assert!(p.message.contains("VC_USER, VC_HOST"), "{}", p.message);
        assert!(!p.message.contains("hunter2"));
    }
}
