//! The vCenter connection: credentials `VC_USER`/`VC_PASS`/`VC_HOST` from a Secret (the seed's
//! `vc-creds`), the CA bundle from the Secret's `ca.crt` or the operator's CA file, TLS
//! verification off only when the operator's `insecure` option says so. One logged-in client
//! is kept and shared while the Secret is unchanged (the client logs in again by itself when
//! its session expires); a changed Secret gives a new client, and the old one logs out. No
//! secret value is logged or written anywhere: messages name the Secret and its keys only,
//! and a `VC_HOST` carrying a user name or password (`https://user:pass@vc/sdk`) is refused
//! without being repeated.
//!
//! Each Secret has its own slot: a connect that hangs (an unreachable vCenter, up to the
//! request timeout) holds up only the groups that use that Secret, and they wait for its one
//! login rather than each sending their own. A login vCenter refuses is remembered for that
//! Secret's contents: until [`Settings::login_retry`] has passed (doubling per refusal, up to
//! [`MAX_LOGIN_RETRY`]) every group gets the remembered refusal and no `Login` is sent, so N
//! groups cannot lock the account (vCenter SSO locks it after 5 failures in 3 minutes by
//! default); a changed Secret is tried at once.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bosun_vsphere::{CallCounts, Client, Config, FaultKind, Tls};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::{Error, Problem};
use crate::operator::Settings;
use crate::reason::Reason;

/// The clients, shared by every namespace's controller: one per Secret (`namespace/name`),
/// with the fingerprint of what it was made from. Every client counts its calls on one
/// counter, so the totals (the `bosun_vcenter_calls_total` metric) only grow, even when a
/// changed Secret replaces a client.
#[derive(Clone, Default)]
pub struct Connections {
    slots: Arc<std::sync::Mutex<BTreeMap<String, Arc<Mutex<Slot>>>>>,
    counts: Arc<CallCounts>,
}

/// The longest wait between two logins with credentials vCenter refused.
pub const MAX_LOGIN_RETRY: Duration = Duration::from_secs(15 * 60);

/// One Secret's connection: the client made from its contents (by fingerprint), or the
/// login vCenter refused with them.
#[derive(Default)]
struct Slot {
    client: Option<(String, Client)>,
    refused: Option<Refused>,
}

struct Refused {
    key: String,
    problem: Problem,
    refusals: u32,
    retry_at: Instant,
}

/// The wait after the `refusals`-th refusal in a row: `first`, doubled each time, at most
/// [`MAX_LOGIN_RETRY`].
pub fn login_wait(first: Duration, refusals: u32) -> Duration {
    let doublings = refusals.saturating_sub(1).min(16);
    first
        .saturating_mul(1u32 << doublings)
        .min(MAX_LOGIN_RETRY.max(first))
}

/// What the Secret gives.
pub struct Credentials {
    pub user: String,
    pub password: String,
    pub host: String,
    pub ca: Option<Vec<u8>>,
}

/// `VC_HOST` as the seed gives it (a host name or address, perhaps with a port) or a full URL;
/// refused (without repeating it) when it carries a user name or password.
pub fn url_of(host: &str) -> Result<String, String> {
    let host = host.trim().trim_end_matches('/');
    let authority = host.split_once("://").map_or(host, |(_, rest)| rest);
    let authority = authority.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err(
            "VC_HOST holds a user name or password (user:password@host); put them in VC_USER and VC_PASS and give VC_HOST as host[:port] or https://host/sdk"
                .into(),
        );
    }
    Ok(if host.contains("://") {
        if host.ends_with("/sdk") {
            host.to_string()
        } else {
            format!("{host}/sdk")
        }
    } else {
        format!("https://{host}/sdk")
    })
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
        let url = url_of(&creds.host).map_err(|m| {
            Error::VCenter(Problem::new(
                Reason::CredentialsMissing,
                format!("the credentials Secret {where_}: {m}"),
            ))
        })?;
        let key = fingerprint(&creds, &tls);
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(where_.clone()).or_default().clone()
        };
        // Held across the connect: this Secret's other groups wait for its one login.
        let mut slot = slot.lock().await;
        if let Some((k, c)) = &slot.client {
            if *k == key {
                return Ok(c.clone());
            }
        }
        let refusals = match &slot.refused {
            Some(r) if r.key == key => {
                let now = Instant::now();
                if now < r.retry_at {
                    let mut p = r.problem.clone();
                    p.message.push_str(&format!(
                        " (not tried again for {} s, so that retries cannot lock the account; a changed Secret is tried at once)",
                        (r.retry_at - now).as_secs().max(1)
                    ));
                    return Err(Error::VCenter(p));
                }
                r.refusals
            }
            _ => 0,
        };
        let mut config = Config::new(&url, &creds.user, &creds.password, tls);
        config.request_timeout = settings.request_timeout;
        config.counts = self.counts.clone();
        let doing = format!("connecting to vCenter at {url} as the user of Secret {where_}");
        let client = match Client::connect(config).await {
            Ok(c) => c,
            Err(e) => {
                let err = Error::vsphere(&doing, &e);
                if e.fault_kind() == Some(&FaultKind::InvalidLogin) {
                    let refusals = refusals + 1;
                    slot.refused = Some(Refused {
                        key,
                        problem: err
                            .problem()
                            .cloned()
                            .unwrap_or_else(|| Problem::new(Reason::LoginFailed, doing.clone())),
                        refusals,
                        retry_at: Instant::now() + login_wait(settings.login_retry, refusals),
                    });
                }
                return Err(err);
            }
        };
        slot.refused = None;
        if let Some((_, old)) = slot.client.replace((key, client.clone())) {
            // The replaced session would otherwise stay open on vCenter until it times out.
            tokio::spawn(async move {
                let _ = old.logout().await;
            });
        }
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
        let url = |h: &str| url_of(h).expect("valid");
        assert_eq!(url("10.170.100.72"), "https://10.170.100.72/sdk");
        assert_eq!(url("vc.lab:8989"), "https://vc.lab:8989/sdk");
        assert_eq!(
            url("https://127.0.0.1:1234/sdk"),
            "https://127.0.0.1:1234/sdk"
        );
        assert_eq!(url("https://vc/"), "https://vc/sdk");
    }

    #[test]
    fn credentials_in_vc_host_are_refused_without_being_repeated() {
        for h in [
            "https://admin:Secr3t@vc/sdk",
            "admin:Secr3t@vc.lab:443",
            "https://admin@vc",
        ] {
            let m = url_of(h).expect_err(h);
            assert!(!m.contains("Secr3t") && !m.contains("admin"), "{m}");
            assert!(m.contains("VC_USER and VC_PASS"), "{m}");
        }
        // An @ after the host (in a path) is no credential.
        assert!(url_of("https://vc/sdk@x").is_ok());
    }

    #[test]
    fn refused_logins_wait_longer_each_time_up_to_a_bound() {
        let first = Duration::from_secs(60);
        let waits: Vec<u64> = (1..=6).map(|n| login_wait(first, n).as_secs()).collect();
        assert_eq!(waits, [60, 120, 240, 480, 900, 900]);
        assert_eq!(login_wait(first, 1000), MAX_LOGIN_RETRY);
        // vCenter SSO's default lockout: 5 failures within 180 s. The waits grow, so the
        // busiest 180 s start at the first refusal: 3 logins at most (at 0, 60 and 180 s).
        let mut at = vec![0u64];
        for n in 1..10 {
            let next = at[at.len() - 1] + login_wait(first, n).as_secs();
            at.push(next);
        }
        assert_eq!(at.iter().filter(|t| **t <= 180).count(), 3, "{at:?}");
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
