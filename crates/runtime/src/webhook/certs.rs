//! The serving certificate, swapped in place so a renewed one is served without a restart.
//!
//! Two sources:
//! * [`CertSource::Files`] — PEM files, typically the Secret of a cert-manager `Certificate`
//!   mounted in the pod (`tls.crt`, `tls.key`). The kubelet updates a mounted Secret in place,
//!   so the files are read again periodically and a renewed certificate is served from the
//!   next handshake. The CA goes into the webhook configurations by cert-manager's CA
//!   injector (`cert-manager.io/inject-ca-from`, see [`super::config`]).
//! * [`CertSource::Generated`] — a CA and a serving certificate made at start (rcgen). The CA
//!   lives in memory only: it is new at every start, so the caller injects
//!   [`Certificates::ca_pem`] into its webhook configurations each time. The serving
//!   certificate is re-issued by the same CA when two thirds of its validity have passed, so
//!   the injected bundle stays valid.
//! * [`CertSource::SharedCa`] — the same, with the CA kept in a Secret that every replica
//!   reads ([`super::shared`]): several replicas behind one Service, one `caBundle`.
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::ring::sign::any_supported_type;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} is not usable PEM: {message}")]
    Pem { what: String, message: String },
    #[error("generating a certificate: {0}")]
    Generate(String),
    #[error(transparent)]
    Refused(#[from] super::settings::SettingsError),
}

#[derive(Clone, Debug)]
pub enum CertSource {
    /// PEM certificate chain and private key, read again every `reload_every`.
    Files {
        cert: PathBuf,
        key: PathBuf,
        reload_every: Duration,
    },
    /// A CA and a serving certificate for `hosts` (DNS names or IP addresses: an IP gets an
    /// IP SAN, which a `url: https://127.0.0.1:…` client config needs), valid `validity`.
    Generated {
        hosts: Vec<String>,
        validity: Duration,
    },
    /// Like `Generated`, but the CA is shared by every replica through the Secret
    /// `namespace/secret` ([`super::shared`]), so the `caBundle` each one writes is the same;
    /// loaded by [`super::plan::start`] (it needs the API), see [`Certificates::from_shared`].
    SharedCa {
        namespace: String,
        secret: String,
        hosts: Vec<String>,
        validity: Duration,
    },
    /// The environment asked for webhooks with a setting that does not parse: nothing is
    /// served, and starting says which setting ([`super::settings`]).
    Refused(super::settings::SettingsError),
}

impl CertSource {
    /// A generated certificate for loopback (tests, `bosun dev`): IP SAN 127.0.0.1 and
    /// `localhost`, valid 30 days.
    pub fn loopback() -> CertSource {
        CertSource::Generated {
            hosts: vec!["127.0.0.1".into(), "localhost".into()],
            validity: Duration::from_secs(30 * 24 * 3600),
        }
    }

    /// A cert-manager style directory holding `tls.crt` and `tls.key`, read again every minute.
    pub fn dir(dir: impl Into<PathBuf>) -> CertSource {
        let dir = dir.into();
        CertSource::Files {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            reload_every: Duration::from_secs(60),
        }
    }
}

/// The certificate handshakes use, replaceable at any time.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

pub(crate) struct Issuer {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
    hosts: Vec<String>,
    validity: Duration,
}

/// The serving certificate and, when generated, its CA.
pub struct Certificates {
    current: Arc<Current>,
    source: CertSource,
    issuer: Option<Issuer>,
    ca_pem: Option<String>,
    /// The PEM last loaded from files, to skip a reload that changes nothing.
    loaded: std::sync::Mutex<Vec<u8>>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

fn gen_err(e: rcgen::Error) -> CertError {
    CertError::Generate(e.to_string())
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    what: &str,
) -> Result<CertifiedKey, CertError> {
    let signing = any_supported_type(&key).map_err(|e| CertError::Pem {
        what: what.into(),
        message: e.to_string(),
    })?;
    Ok(CertifiedKey::new(chain, signing))
}

fn parse_pem(cert: &[u8], key: &[u8], what: &str) -> Result<CertifiedKey, CertError> {
    let pem_err = |message: String| CertError::Pem {
        what: what.into(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err("no certificate in it".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| pem_err(e.to_string()))?;
    certified(chain, key, what)
}

fn read(path: &PathBuf) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Read {
        path: path.clone(),
        source,
    })
}

/// The CA's certificate for `key`. Fixed but for its dates: re-made from a stored key, it
/// has the subject and key identifier of the stored certificate, so what it signs verifies
/// against that one (the `caBundle`).
fn ca_cert(key: &rcgen::KeyPair) -> Result<rcgen::Certificate, CertError> {
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "bosun webhook CA");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    // Never replaced by bosun (a new one locks out every replica still serving the old);
    // ten years so that it never limits an install.
    params.not_after = now + time::Duration::days(3650);
    params.self_signed(key).map_err(gen_err)
}

impl Issuer {
    fn new(hosts: Vec<String>, validity: Duration) -> Result<Issuer, CertError> {
        let key = rcgen::KeyPair::generate().map_err(gen_err)?;
        let cert = ca_cert(&key)?;
        Ok(Issuer {
            cert,
            key,
            hosts,
            validity,
        })
    }

    /// A new CA, to be stored.
    pub(crate) fn new_ca() -> Result<Issuer, CertError> {
        Self::new(vec![], Duration::ZERO)
    }

    /// The CA whose key is `key_pem`, issuing for `hosts`.
    fn from_key(
        key_pem: &str,
        hosts: Vec<String>,
        validity: Duration,
    ) -> Result<Issuer, CertError> {
        let key = rcgen::KeyPair::from_pem(key_pem).map_err(|e| CertError::Pem {
            what: "the stored CA key".into(),
            message: e.to_string(),
        })?;
        let cert = ca_cert(&key)?;
        Ok(Issuer {
            cert,
            key,
            hosts,
            validity,
        })
    }

    pub(crate) fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    pub(crate) fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    fn issue(&self) -> Result<CertifiedKey, CertError> {
        let key = rcgen::KeyPair::generate().map_err(gen_err)?;
        let mut params = rcgen::CertificateParams::new(self.hosts.clone()).map_err(gen_err)?;
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            self.hosts.first().cloned().unwrap_or_default(),
        );
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after =
            now + time::Duration::try_from(self.validity).unwrap_or(time::Duration::days(30));
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(gen_err)?;
        let key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| CertError::Pem {
            what: "the generated key".into(),
            message: e.to_string(),
        })?;
        certified(vec![cert.der().clone()], key, "the generated certificate")
    }
}

impl Certificates {
    /// Loads or generates the first certificate.
    pub fn new(source: CertSource) -> Result<Certificates, CertError> {
        let (first, issuer, ca_pem, loaded) = match &source {
            CertSource::Files { cert, key, .. } => {
                let (c, k) = (read(cert)?, read(key)?);
                let first = parse_pem(&c, &k, &cert.display().to_string())?;
                (first, None, None, [c, k].concat())
            }
            CertSource::Generated { hosts, validity } => {
                let issuer = Issuer::new(hosts.clone(), *validity)?;
                let ca = issuer.cert.pem();
                (issuer.issue()?, Some(issuer), Some(ca), vec![])
            }
            CertSource::SharedCa { .. } => {
                return Err(CertError::Generate(
                    "a shared CA is read from its Secret: use Certificates::from_shared".into(),
                ))
            }
            CertSource::Refused(e) => return Err(e.clone().into()),
        };
        Ok(Certificates {
            current: Arc::new(Current(RwLock::new(Arc::new(first)))),
            source,
            issuer,
            ca_pem,
            loaded: std::sync::Mutex::new(loaded),
        })
    }

    /// A serving certificate issued by the shared CA `ca` (read from its Secret), for a
    /// [`CertSource::SharedCa`]. The bundle is the stored CA certificate, byte for byte the
    /// same on every replica.
    pub fn from_shared(
        source: CertSource,
        ca: &super::shared::StoredCa,
    ) -> Result<Certificates, CertError> {
        let CertSource::SharedCa {
            hosts, validity, ..
        } = &source
        else {
            return Certificates::new(source);
        };
        let issuer = Issuer::from_key(&ca.key_pem, hosts.clone(), *validity)?;
        let first = issuer.issue()?;
        Ok(Certificates {
            current: Arc::new(Current(RwLock::new(Arc::new(first)))),
            ca_pem: Some(ca.cert_pem.clone()),
            issuer: Some(issuer),
            source,
            loaded: std::sync::Mutex::new(vec![]),
        })
    }

    /// The CA that signed the serving certificate, PEM: what goes in a webhook
    /// configuration's `caBundle`. None for files (their CA is cert-manager's to inject).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Re-issues (generated) or re-reads (files) the serving certificate. Returns whether it
    /// changed. A file that cannot be read or parsed leaves the current certificate served.
    pub fn rotate(&self) -> Result<bool, CertError> {
        let next = match (&self.source, &self.issuer) {
            (_, Some(issuer)) => issuer.issue()?,
            (CertSource::Files { cert, key, .. }, None) => {
                let (c, k) = (read(cert)?, read(key)?);
                let both = [c.clone(), k.clone()].concat();
                let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
                if *loaded == both {
                    return Ok(false);
                }
                let next = parse_pem(&c, &k, &cert.display().to_string())?;
                *loaded = both;
                next
            }
            (
                CertSource::Generated { .. } | CertSource::SharedCa { .. } | CertSource::Refused(_),
                None,
            ) => return Ok(false),
        };
        *self.current.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        Ok(true)
    }

    /// How long until the next [`Certificates::rotate`]: two thirds of a generated
    /// certificate's validity, or the files' reload period.
    pub fn rotate_every(&self) -> Duration {
        match &self.source {
            CertSource::Files { reload_every, .. } => *reload_every,
            CertSource::Generated { validity, .. } | CertSource::SharedCa { validity, .. } => {
                *validity * 2 / 3
            }
            // Never served; a day, so a loop over it never spins.
            CertSource::Refused(_) => Duration::from_secs(24 * 3600),
        }
    }

    /// The DER of the certificate served now.
    pub fn serving_der(&self) -> Vec<u8> {
        let cur = self.current.0.read().unwrap_or_else(|e| e.into_inner());
        cur.cert.first().map(|c| c.to_vec()).unwrap_or_default()
    }

    pub(crate) fn server_config(&self) -> Result<rustls::ServerConfig, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CertError::Generate(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.current.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}
