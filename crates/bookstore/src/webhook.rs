//! The BookStore operator with its conversion webhook ([`crate::convert`]) served: what a
//! cluster moving from the Helm- or Ansible-based BookStore (`charts.example.com/v1alpha1`)
//! runs, so their BookStores are read and written as `v1` without being recreated.
//!
//! Enabled by `BOSUN_BOOKSTORE_WEBHOOK_ADDR` (with `_CERT_DIR`, `_SERVICE`, as
//! [`bosun_runtime::webhook::settings`] reads them). The CRD then serves both versions, v1
//! stored:
//! * generated certificate — the operator applies the two-version CRD with the webhook's CA
//!   at start (its RBAC gains `patch` on that one CRD);
//! * cert-manager (`_CERT_DIR`) — [`Operator::crds`] (hence `bosun crd`) prints the
//!   two-version CRD pointing at the Service, annotated for cert-manager's CA injector with the
//!   Certificate `<service namespace>/<configuration>` (`bosun-bookstore`).
use std::sync::Arc;

use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::{named_rule, Rbac};
use bosun_runtime::webhook::config::{crd_conversion, CaInjection, Target, CERT_MANAGER_INJECT};
use bosun_runtime::webhook::{Configurations, Plan, Settings as WebhookSettings, Webhooks};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::convert::{crd_with_conversion, PATH};
use crate::operator::{BookStoreOperator, FIELD_MANAGER};

pub const CONFIGURATION: &str = "bosun-bookstore";
const CRD_NAME: &str = "bookstores.charts.example.com";

/// The BookStore operator, with the conversion webhook when the environment enables it.
pub fn from_env() -> Arc<dyn Operator> {
    from_lookup(&|k: &str| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// The BookStore operator for the environment `get` reads (`bosun manifests` passes the
/// Deployment's, so what it prints matches what the pod runs).
pub fn from_lookup(get: &dyn Fn(&str) -> Option<String>) -> Arc<dyn Operator> {
    match WebhookSettings::from_lookup("BOSUN_BOOKSTORE", CONFIGURATION, get) {
        Some(webhook) => Arc::new(ConvertingBookStore { webhook }),
        None => Arc::new(BookStoreOperator),
    }
}

pub struct ConvertingBookStore {
    pub webhook: WebhookSettings,
}

/// The two-version CRD converted by the webhook at `target`.
pub fn crd(target: &Target, ca: &CaInjection) -> CustomResourceDefinition {
    let mut crd = crd_with_conversion(crd_conversion(target, ca, PATH));
    if let CaInjection::CertManager(cert) = ca {
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(CERT_MANAGER_INJECT.into(), cert.clone());
    }
    crd
}

impl Operator for ConvertingBookStore {
    fn name(&self) -> &str {
        BookStoreOperator.name()
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        match (&self.webhook.cert_dir, &self.webhook.service) {
            (Some(_), Some((ns, _, _))) => {
                let target = self.webhook.target(self.webhook.listen);
                let ca = CaInjection::CertManager(format!("{ns}/{}", self.webhook.configuration));
                vec![crd(&target, &ca)]
            }
            // Written at start with the generated CA.
            _ => BookStoreOperator.crds(),
        }
    }

    fn rbac(&self) -> Rbac {
        let mut rbac = BookStoreOperator.rbac();
        if self.webhook.registers() {
            rbac.cluster.push(named_rule(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                &[CRD_NAME],
                &["get", "patch"],
            ));
        }
        rbac
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        BookStoreOperator.run(ctx)
    }

    fn webhooks(&self) -> Option<Plan> {
        let w = self.webhook.clone();
        let register: bosun_runtime::webhook::plan::Register =
            Arc::new(move |ca, bound| Configurations {
                crds: vec![crd(&w.target(bound), ca)],
                ..Default::default()
            });
        Some(Plan {
            webhooks: Webhooks::new().convert(PATH, crate::convert::convert),
            listen: self.webhook.listen,
            certificates: self.webhook.certificates(),
            register: Some(register),
            field_manager: FIELD_MANAGER.into(),
        })
    }
}
