//! One generated CA for every replica of an operator, kept in a Secret beside its Service.
//!
//! Each replica used to make its own CA and write it into the webhook configurations: the
//! last one to start won the `caBundle`, and the API server then failed TLS with every other
//! replica the Service sent it to (about half the reviews with two). Now the first replica
//! to start creates the Secret and the others read it: `create` is the arbiter (the API
//! server accepts exactly one; the others get AlreadyExists and read the winner's), so no
//! lease is needed and a replica that starts while another holds the lease still serves
//! with the same CA. The configurations then get the same `caBundle` from every replica —
//! the second write changes nothing. The CA is never replaced by bosun: deleting the Secret
//! and restarting the pods is how it is changed.
//!
//! Each replica issues its own serving certificate from that CA, in memory, and renews it
//! itself ([`super::certs`]): the bundle is the CA, so no renewal needs another replica.
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;

use super::certs::{CertError, Issuer};

/// The CA certificate (PEM), what goes in `caBundle`.
pub const CA_CERT: &str = "ca.crt";
/// The CA's private key (PEM), to sign each replica's serving certificate.
pub const CA_KEY: &str = "ca.key";

#[derive(Debug, thiserror::Error)]
pub enum SharedCaError {
    #[error("reading or creating the webhook CA Secret {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error(
        "the webhook CA Secret {namespace}/{name} has no usable {CA_CERT} and {CA_KEY}: \
         delete it and restart the operator's pods to have a new CA made ({problem})"
    )]
    Unusable {
        namespace: String,
        name: String,
        problem: String,
    },
    #[error(transparent)]
    Cert(#[from] CertError),
}

/// The CA as stored: certificate and key, PEM.
#[derive(Clone)]
pub struct StoredCa {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for StoredCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key never reaches a log.
        f.debug_struct("StoredCa").finish_non_exhaustive()
    }
}

fn stored(secret: &Secret) -> Result<StoredCa, String> {
    let data = secret.data.as_ref().ok_or("no data")?;
    let text = |k: &str| -> Result<String, String> {
        let b = data.get(k).ok_or_else(|| format!("no {k}"))?;
        String::from_utf8(b.0.clone()).map_err(|_| format!("{k} is not PEM text"))
    };
    Ok(StoredCa {
        cert_pem: text(CA_CERT)?,
        key_pem: text(CA_KEY)?,
    })
}

/// The CA in `namespace/name`, created by this call if no replica made it yet.
pub async fn load_or_create(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<StoredCa, SharedCaError> {
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    let api_err = |source| SharedCaError::Api {
        namespace: namespace.into(),
        name: name.into(),
        source,
    };
    let unusable = |problem: String| SharedCaError::Unusable {
        namespace: namespace.into(),
        name: name.into(),
        problem,
    };
    if let Some(s) = api.get_opt(name).await.map_err(api_err)? {
        return stored(&s).map_err(unusable);
    }
    let ca = Issuer::new_ca()?;
    let mine = StoredCa {
        cert_pem: ca.cert_pem(),
        key_pem: ca.key_pem(),
    };
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "bosun".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(
            [
                (
                    CA_CERT.to_string(),
                    ByteString(mine.cert_pem.clone().into()),
                ),
                (CA_KEY.to_string(), ByteString(mine.key_pem.clone().into())),
            ]
            .into(),
        ),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(mine),
        // Another replica created it first: its CA is the one.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let s = api.get(name).await.map_err(api_err)?;
            stored(&s).map_err(unusable)
        }
        Err(e) => Err(api_err(e)),
    }
}
