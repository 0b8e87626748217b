//! Pure builders for the objects that point the API server at the webhooks —
//! `ValidatingWebhookConfiguration`, `MutatingWebhookConfiguration` and a CRD's conversion —
//! and one call that applies the admission configurations.
//!
//! The CA reaches them one of two ways ([`CaInjection`]): bosun writes the bundle itself (a
//! generated certificate, [`super::certs::Certificates::ca_pem`]), or the objects carry
//! cert-manager's `cert-manager.io/inject-ca-from: <namespace>/<certificate>` annotation and
//! cert-manager's CA injector fills `caBundle` (certificates from a mounted Secret).
//!
//! `failurePolicy` is chosen per webhook ([`Hook::failure_policy`]): `Fail` when what the
//! webhook guarantees cannot be checked later (an immutable field: once a change is stored,
//! the old value is gone), `Ignore` when the operator copes without it (a default it would
//! apply itself anyway). The operator documents its choice beside each hook.
use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;

pub const CERT_MANAGER_INJECT: &str = "cert-manager.io/inject-ca-from";

/// Where the API server sends reviews.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A base URL, e.g. `https://127.0.0.1:9443` (tests, a webhook outside the cluster); the
    /// certificate must name that host (an IP SAN for an address).
    Url(String),
    /// The operator's Service in the cluster.
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
}

/// How the CA bundle gets into the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaInjection {
    /// PEM, written into `caBundle` now.
    Bundle(Vec<u8>),
    /// `<namespace>/<certificate>`: cert-manager's CA injector writes `caBundle`.
    CertManager(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is refused while the webhook cannot be reached.
    Fail,
    /// The request is admitted without the webhook while it cannot be reached.
    Ignore,
}

impl FailurePolicy {
    fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// One webhook of a configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Hook {
    /// A qualified name, e.g. `validate.vmgroups.vm.codeconnect.vmworld.com`.
    pub name: String,
    /// The server path it is registered at.
    pub path: String,
    pub rules: Vec<RuleWithOperations>,
    pub failure_policy: FailurePolicy,
    /// Only objects in matching namespaces (None: all).
    pub namespace_selector: Option<LabelSelector>,
    pub timeout_seconds: i32,
}

/// A rule for `resources` of `group/version`, namespaced, for `operations`
/// (`CREATE`, `UPDATE`, `DELETE`).
pub fn rule(
    group: &str,
    version: &str,
    resources: &[&str],
    operations: &[&str],
) -> RuleWithOperations {
    let v = |s: &[&str]| Some(s.iter().map(|x| x.to_string()).collect());
    RuleWithOperations {
        api_groups: v(&[group]),
        api_versions: v(&[version]),
        resources: v(resources),
        operations: v(operations),
        scope: Some("Namespaced".into()),
    }
}

fn client_config(target: &Target, ca: &CaInjection, path: &str) -> WebhookClientConfig {
    let ca_bundle = match ca {
        CaInjection::Bundle(pem) => Some(ByteString(pem.clone())),
        CaInjection::CertManager(_) => None,
    };
    match target {
        Target::Url(base) => WebhookClientConfig {
            url: Some(format!("{}{path}", base.trim_end_matches('/'))),
            ca_bundle,
            service: None,
        },
        Target::Service {
            namespace,
            name,
            port,
        } => WebhookClientConfig {
            url: None,
            ca_bundle,
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(path.into()),
                port: Some(*port),
            }),
        },
    }
}

fn metadata(name: &str, ca: &CaInjection) -> ObjectMeta {
    let annotations = match ca {
        CaInjection::CertManager(cert) => Some(BTreeMap::from([(
            CERT_MANAGER_INJECT.to_string(),
            cert.clone(),
        )])),
        CaInjection::Bundle(_) => None,
    };
    ObjectMeta {
        name: Some(name.into()),
        annotations,
        ..Default::default()
    }
}

pub fn validating(
    name: &str,
    target: &Target,
    ca: &CaInjection,
    hooks: &[Hook],
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: metadata(name, ca),
        webhooks: Some(
            hooks
                .iter()
                .map(|h| ValidatingWebhook {
                    name: h.name.clone(),
                    admission_review_versions: vec!["v1".into()],
                    client_config: client_config(target, ca, &h.path),
                    failure_policy: Some(h.failure_policy.as_str().into()),
                    match_policy: Some("Equivalent".into()),
                    namespace_selector: h.namespace_selector.clone(),
                    rules: Some(h.rules.clone()),
                    side_effects: "None".into(),
                    timeout_seconds: Some(h.timeout_seconds),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

pub fn mutating(
    name: &str,
    target: &Target,
    ca: &CaInjection,
    hooks: &[Hook],
) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: metadata(name, ca),
        webhooks: Some(
            hooks
                .iter()
                .map(|h| MutatingWebhook {
                    name: h.name.clone(),
                    admission_review_versions: vec!["v1".into()],
                    client_config: client_config(target, ca, &h.path),
                    failure_policy: Some(h.failure_policy.as_str().into()),
                    match_policy: Some("Equivalent".into()),
                    namespace_selector: h.namespace_selector.clone(),
                    // A default applied once is stable: no second call after other webhooks.
                    reinvocation_policy: Some("Never".into()),
                    rules: Some(h.rules.clone()),
                    side_effects: "None".into(),
                    timeout_seconds: Some(h.timeout_seconds),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

/// A CRD's `spec.conversion` sending ConversionReviews to `path`.
pub fn crd_conversion(
    target: &Target,
    ca: &CaInjection,
    path: &str,
) -> apiext::CustomResourceConversion {
    let admission = client_config(target, ca, path);
    apiext::CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(apiext::WebhookConversion {
            client_config: Some(apiext::WebhookClientConfig {
                ca_bundle: admission.ca_bundle,
                url: admission.url,
                service: admission.service.map(|s| apiext::ServiceReference {
                    name: s.name,
                    namespace: s.namespace,
                    path: s.path,
                    port: s.port,
                }),
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    }
}

/// Server-side applies the configurations (e.g. with a freshly generated CA at start).
pub async fn apply(
    client: &Client,
    field_manager: &str,
    validating: Option<&ValidatingWebhookConfiguration>,
    mutating: Option<&MutatingWebhookConfiguration>,
) -> Result<(), kube::Error> {
    let pp = PatchParams::apply(field_manager).force();
    if let Some(v) = validating {
        let name = v.metadata.name.clone().unwrap_or_default();
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .patch(&name, &pp, &Patch::Apply(v))
            .await?;
    }
    if let Some(m) = mutating {
        let name = m.metadata.name.clone().unwrap_or_default();
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .patch(&name, &pp, &Patch::Apply(m))
            .await?;
    }
    Ok(())
}
