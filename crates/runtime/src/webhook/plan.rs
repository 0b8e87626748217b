//! What an operator asks the manager to serve ([`crate::manager::Operator::webhooks`]): its
//! handlers, where to listen, the certificate source and, for a generated certificate, the
//! configurations to write with the new CA. The manager starts it before waiting for the
//! lease, so every replica — leader or standby — answers the API server.
//!
//! A generated CA behind a Service ([`CertSource::SharedCa`]) is made once and kept in a
//! Secret every replica reads ([`super::shared`]): all of them write the same bundle and
//! serve certificates it verifies, so two replicas neither flap the `caBundle` nor fail half
//! the reviews. Without a Service (a `url:` on loopback: development, tests) the CA is per
//! process ([`CertSource::Generated`]). A cert-manager certificate ([`CertSource::Files`])
//! needs nothing written at start: the manifests carry the configurations with cert-manager's
//! CA injection annotation.
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::config::{self, CaInjection};
use super::{serve, CertSource, Certificates, Serving, WebhookError, Webhooks};

/// The configurations pointing at an operator's webhooks.
#[derive(Clone, Debug, Default)]
pub struct Configurations {
    pub validating: Option<ValidatingWebhookConfiguration>,
    pub mutating: Option<MutatingWebhookConfiguration>,
    /// CRDs whose `spec.conversion` points at a conversion webhook (applied whole).
    pub crds: Vec<CustomResourceDefinition>,
}

/// The configurations for a CA and the address the server is bound to (a `url:` client
/// config on loopback needs the port, known only once bound).
pub type Register = Arc<dyn Fn(&CaInjection, SocketAddr) -> Configurations + Send + Sync>;

pub struct Plan {
    pub webhooks: Webhooks,
    pub listen: SocketAddr,
    pub certificates: CertSource,
    /// The configurations for a CA; written with the generated CA once serving.
    pub register: Option<Register>,
    /// The field manager of that write.
    pub field_manager: String,
}

/// Serves `plan` until `shutdown` and, with a generated certificate, writes its
/// configurations with the CA.
pub async fn start(
    plan: Plan,
    client: &Client,
    shutdown: CancellationToken,
) -> Result<Serving, WebhookError> {
    let certs = match &plan.certificates {
        CertSource::Refused(e) => return Err(e.clone().into()),
        CertSource::SharedCa {
            namespace, secret, ..
        } => {
            let ca = super::shared::load_or_create(client, namespace, secret).await?;
            Certificates::from_shared(plan.certificates.clone(), &ca)?
        }
        _ => Certificates::new(plan.certificates.clone())?,
    };
    let certs = Arc::new(certs);
    let ca = certs.ca_pem().map(|p| p.as_bytes().to_vec());
    let serving = serve(plan.webhooks, plan.listen, certs, shutdown).await?;
    tracing::info!(addr = %serving.local_addr, "serving webhooks");
    if let (Some(register), Some(ca)) = (plan.register, ca) {
        let c = register(&CaInjection::Bundle(ca), serving.local_addr);
        config::apply(
            client,
            &plan.field_manager,
            c.validating.as_ref(),
            c.mutating.as_ref(),
        )
        .await
        .map_err(WebhookError::Register)?;
        let pp = PatchParams::apply(&plan.field_manager).force();
        for crd in &c.crds {
            Api::<CustomResourceDefinition>::all(client.clone())
                .patch(&crd.name_any(), &pp, &Patch::Apply(crd))
                .await
                .map_err(WebhookError::Register)?;
        }
    }
    Ok(serving)
}
