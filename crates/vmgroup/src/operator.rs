//! The VmGroup operator as the runtime sees it: the CRD, the RBAC, the settings and the
//! watch. The pipeline itself is in [`crate::reconcile`].
//!
//! Settings come from the environment (the manager Deployment sets them), so that the
//! registry stays a list of operators:
//! - `BOSUN_VMGROUP_SECRET` — the credentials Secret (default `vc-creds`, as in the seed);
//! - `BOSUN_VMGROUP_SECRET_NAMESPACE` — its namespace (default `POD_NAMESPACE`, the operator's
//!   own; without either, each VmGroup's namespace);
//! - `BOSUN_VMGROUP_PARENT_FOLDER` — the folder the groups' folders go in (default
//!   `/DC0/vm`, vcsim's; set it to your datacenter's VM folder);
//! - `BOSUN_VMGROUP_LOGIN_RETRY_SECONDS` — the wait before a login vCenter refused is tried
//!   again with the same Secret, doubled per refusal up to 15 minutes (default 60: with
//!   vCenter SSO's default lockout of 5 failures in 3 minutes, never reached);
//! - `BOSUN_VMGROUP_RESOURCE_POOL` — the resource pool clones go in, as an inventory path
//!   (e.g. `/DC0/host/DC0_C0/Resources`); default: the template's own pool, or for a vSphere
//!   template (which has none) its host's cluster or compute resource pool;
//! - `BOSUN_VMGROUP_TEMPLATE_ROOTS` — comma-separated inventory paths a `spec.template` must
//!   lie under (compared by whole path components; `.`/`..` refused); unset: any VM or
//!   template the operator's vCenter account sees, said by a warning at start;
//! - `BOSUN_VMGROUP_CA_FILE` — a PEM CA bundle for vCenter when the Secret has no `ca.crt`;
//! - `BOSUN_VMGROUP_INSECURE=true` — no certificate check (labs with self-signed certificates);
//! - `BOSUN_VMGROUP_RESYNC_SECONDS` — how often a group is read again to repair VMs changed in
//!   vCenter (default 60);
//! - `BOSUN_VMGROUP_PARALLEL` — clones and power operations in flight per group (default 4);
//! - `BOSUN_VMGROUP_REQUEST_TIMEOUT_SECONDS` — the bound on one vCenter request (default 60);
//! - `BOSUN_VMGROUP_WEBHOOK_ADDR`, `BOSUN_VMGROUP_WEBHOOK_CERT_DIR`,
//!   `BOSUN_VMGROUP_WEBHOOK_SERVICE` — the defaulting and validating webhooks
//!   ([`crate::webhook`]), as [`bosun_runtime::webhook::settings`] reads them (default: not
//!   served).
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::cache::scoped_api;
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::{named_rule, rule, Rbac};
use bosun_runtime::status::StatusWriter;
use bosun_runtime::webhook::{Plan, Settings as WebhookSettings};
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Client, CustomResourceExt};

use crate::api::VmGroup;
use crate::connect::Connections;
use crate::reconcile::reconcile;

pub const FIELD_MANAGER: &str = "bosun-vmgroup";
/// The metric family of vCenter calls on `/metrics`: `bosun_vcenter_calls_total{method}`.
pub const VCENTER_CALLS: &str = "bosun_vcenter_calls";

/// The operator's settings (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub secret_name: String,
    /// None: each VmGroup's own namespace.
    pub secret_namespace: Option<String>,
    pub parent_folder: String,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
    pub resync: Duration,
    pub parallel: usize,
    pub request_timeout: Duration,
    /// The wait before a login vCenter refused is tried again with the same Secret (doubled
    /// per refusal, see [`crate::connect`]).
    pub login_retry: Duration,
    /// The resource pool clones go in (inventory path); None: the template's own, or for a
    /// vSphere template its host's cluster pool.
    pub resource_pool: Option<String>,
    /// The inventory paths templates must lie under (`BOSUN_VMGROUP_TEMPLATE_ROOTS`); None:
    /// any template the operator's vCenter account sees (the seed's behaviour).
    pub template_roots: Option<Vec<String>>,
    /// None: no webhooks.
    pub webhook: Option<WebhookSettings>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            secret_name: "vc-creds".into(),
            secret_namespace: None,
            parent_folder: "/DC0/vm".into(),
            ca_file: None,
            insecure: false,
            resync: Duration::from_secs(60),
            parallel: 4,
            request_timeout: Duration::from_secs(60),
            login_retry: Duration::from_secs(60),
            resource_pool: None,
            template_roots: None,
            webhook: None,
        }
    }
}

impl Settings {
    /// The settings from the environment, defaults for what is unset.
    pub fn from_env() -> Settings {
        Self::from_lookup(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Settings {
        let d = Settings::default();
        Settings {
            secret_name: get("BOSUN_VMGROUP_SECRET").unwrap_or(d.secret_name),
            secret_namespace: get("BOSUN_VMGROUP_SECRET_NAMESPACE")
                .or_else(|| get("POD_NAMESPACE")),
            parent_folder: get("BOSUN_VMGROUP_PARENT_FOLDER").unwrap_or(d.parent_folder),
            ca_file: get("BOSUN_VMGROUP_CA_FILE").map(PathBuf::from),
            insecure: get("BOSUN_VMGROUP_INSECURE").is_some_and(|v| v == "true" || v == "1"),
            resync: get("BOSUN_VMGROUP_RESYNC_SECONDS")
                .and_then(|v| v.parse().ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs)
                .unwrap_or(d.resync),
            parallel: get("BOSUN_VMGROUP_PARALLEL")
                .and_then(|v| v.parse().ok())
                .filter(|n| *n > 0)
                .unwrap_or(d.parallel),
            request_timeout: get("BOSUN_VMGROUP_REQUEST_TIMEOUT_SECONDS")
                .and_then(|v| v.parse().ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs)
                .unwrap_or(d.request_timeout),
            login_retry: get("BOSUN_VMGROUP_LOGIN_RETRY_SECONDS")
                .and_then(|v| v.parse().ok())
                .filter(|s| *s > 0)
                .map(Duration::from_secs)
                .unwrap_or(d.login_retry),
            resource_pool: get("BOSUN_VMGROUP_RESOURCE_POOL"),
            // Set but listing nothing usable restricts to nothing: fail closed.
            template_roots: get("BOSUN_VMGROUP_TEMPLATE_ROOTS").map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(String::from)
                    .collect()
            }),
            webhook: WebhookSettings::from_lookup(
                "BOSUN_VMGROUP",
                crate::webhook::CONFIGURATION,
                &get,
            ),
        }
    }
}

pub struct VmGroupOperator {
    pub settings: Arc<Settings>,
    connections: Connections,
}

impl VmGroupOperator {
    pub fn new(settings: Settings) -> Self {
        VmGroupOperator {
            settings: Arc::new(settings),
            connections: Connections::default(),
        }
    }

    pub fn from_env() -> Self {
        Self::new(Settings::from_env())
    }

    /// vCenter calls made so far, per vim25 method.
    pub async fn vcenter_calls(&self) -> std::collections::BTreeMap<String, u64> {
        self.connections.counts().await
    }
}

/// What a reconcile reads and writes with.
pub struct Context {
    pub client: Client,
    pub status: StatusWriter,
    pub events: Events,
    pub settings: Arc<Settings>,
    pub vcenter: Connections,
}

impl Operator for VmGroupOperator {
    fn name(&self) -> &str {
        "vmgroup"
    }

    fn crds(&self) -> Vec<CustomResourceDefinition> {
        vec![VmGroup::crd()]
    }

    fn rbac(&self) -> Rbac {
        Rbac {
            namespaced: vec![
                // The primary cache; the finalizer is a patch.
                rule(
                    "vm.codeconnect.vmworld.com",
                    &["vmgroups"],
                    &["list", "watch", "patch"],
                ),
                rule(
                    "vm.codeconnect.vmworld.com",
                    &["vmgroups/status"],
                    &["patch"],
                ),
                // The vCenter credentials: that one Secret, read by name.
                named_rule("", "secrets", &[&self.settings.secret_name], &["get"]),
            ],
            // With a generated certificate the operator writes its webhook configurations.
            cluster: self
                .settings
                .webhook
                .as_ref()
                .map(WebhookSettings::rbac)
                .unwrap_or_default(),
        }
    }

    fn webhooks(&self) -> Option<Plan> {
        let w = self.settings.webhook.clone()?;
        let certificates = w.certificates();
        let register: bosun_runtime::webhook::plan::Register =
            std::sync::Arc::new(move |ca, bound| {
                let hooks = crate::webhook::hooks(w.namespace_selector.clone());
                crate::webhook::configurations(&w.configuration, &w.target(bound), ca, hooks)
            });
        Some(Plan {
            webhooks: crate::webhook::webhooks_with(
                &self.settings.parent_folder,
                self.settings.template_roots.clone(),
            ),
            listen: self.settings.webhook.as_ref()?.listen,
            certificates,
            register: Some(register),
            field_manager: FIELD_MANAGER.into(),
        })
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let settings = self.settings.clone();
        log_template_roots(settings.template_roots.as_deref());
        let connections = self.connections.clone();
        let counts = connections.counter();
        ctx.metrics.add_text_fn("vcenter_calls", move || {
            counts.openmetrics(
                VCENTER_CALLS,
                "vCenter (vim25) calls per method, retries and re-logins included",
            )
        });
        Box::pin(async move {
            let client = ctx.client.clone();
            ctx.run_controller(
                |ns| wire(&client, ns, settings.clone(), connections.clone()),
                reconcile,
            )
            .await;
            Ok(())
        })
    }
}

/// Says at start which templates VmGroups may clone, so an unrestricted operator is visible.
fn log_template_roots(roots: Option<&[String]>) {
    match roots {
        None => tracing::warn!(
            "BOSUN_VMGROUP_TEMPLATE_ROOTS is unset: templates are unrestricted, any VmGroup may \
             clone any VM or template the operator's vCenter account sees"
        ),
        Some([]) => {
            tracing::warn!("BOSUN_VMGROUP_TEMPLATE_ROOTS lists no path: every template is refused")
        }
        Some(roots) => {
            for bad in roots
                .iter()
                .filter(|r| crate::validate::normalize_path(r).is_err())
            {
                tracing::warn!(
                    root = %bad,
                    "BOSUN_VMGROUP_TEMPLATE_ROOTS entry is not an absolute inventory path without \
                     . or ..: it allows nothing"
                );
            }
            tracing::info!(roots = %roots.join(","), "VmGroup templates are restricted to these inventory paths");
        }
    }
}

fn wire(
    client: &Client,
    ns: Option<&str>,
    settings: Arc<Settings>,
    vcenter: Connections,
) -> Wiring<VmGroup, Context> {
    let status = StatusWriter::new(FIELD_MANAGER);
    let primary = Primary::watch(scoped_api(client.clone(), ns), (), Default::default())
        .forgetting(&status)
        .skip_status_only();
    let context = Arc::new(Context {
        client: client.clone(),
        status,
        events: Events::new(client.clone(), "bosun-vmgroup"),
        settings,
        vcenter,
    });
    Wiring::new(primary, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_the_environment_with_defaults() {
        let d = Settings::from_lookup(|_| None);
        assert_eq!(d, Settings::default());
        let s = Settings::from_lookup(|k| match k {
            "POD_NAMESPACE" => Some("ops".into()),
            "BOSUN_VMGROUP_PARENT_FOLDER" => Some("/DC1/vm/k8s".into()),
            "BOSUN_VMGROUP_INSECURE" => Some("true".into()),
            "BOSUN_VMGROUP_PARALLEL" => Some("0".into()),
            _ => None,
        });
        assert_eq!(s.secret_namespace.as_deref(), Some("ops"));
        assert_eq!(s.parent_folder, "/DC1/vm/k8s");
        assert!(s.insecure);
        assert_eq!(s.parallel, 4, "0 in flight would never clone");
        assert_eq!(s.webhook, None, "webhooks are off by default");
        assert_eq!(
            s.template_roots, None,
            "templates are unrestricted by default"
        );
        let s = Settings::from_lookup(|k| {
            (k == "BOSUN_VMGROUP_TEMPLATE_ROOTS").then(|| " /DC0/vm/a , ,/DC1/vm/b".to_string())
        });
        assert_eq!(
            s.template_roots,
            Some(vec!["/DC0/vm/a".to_string(), "/DC1/vm/b".to_string()])
        );
        let s =
            Settings::from_lookup(|k| (k == "BOSUN_VMGROUP_TEMPLATE_ROOTS").then(|| ",".into()));
        assert_eq!(
            s.template_roots,
            Some(vec![]),
            "set but empty allows nothing"
        );
        let s = Settings::from_lookup(|k| {
            (k == "BOSUN_VMGROUP_WEBHOOK_ADDR").then(|| "0.0.0.0:9443".to_string())
        });
        let w = s.webhook.expect("enabled");
        assert_eq!(w.listen.port(), 9443);
        assert_eq!(w.configuration, "bosun-vmgroup");
    }

    #[test]
    fn the_crd_is_the_seeds() {
        let crd = VmGroup::crd();
        let json = serde_json::to_value(&crd).expect("json");
        assert_eq!(json["spec"]["names"]["shortNames"][0], "vg");
        let v = &json["spec"]["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        assert_eq!(
            v["subresources"]["scale"]["specReplicasPath"],
            ".spec.replicas"
        );
        let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["cpu"]["maximum"], 4.0);
        assert_eq!(spec["properties"]["memory"]["maximum"], 8.0);
        assert_eq!(spec["properties"]["replicas"]["minimum"], 1.0);
        let mut required: Vec<&str> = spec["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["cpu", "memory", "replicas", "template"]);
        let columns: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            columns,
            [
                "Phase",
                "Current",
                "Desired",
                "CPU",
                "Memory",
                "Template",
                "Last_Message"
            ]
        );
        // `kubectl explain` shows every field's description.
        let status = &v["schema"]["openAPIV3Schema"]["properties"]["status"];
        for (part, props) in [("spec", spec), ("status", status)] {
            let props = props["properties"].as_object().expect("props");
            assert!(!props.is_empty());
            for (name, field) in props {
                assert!(
                    field["description"].is_string(),
                    "{part}.{name} is documented"
                );
            }
        }
        assert_eq!(
            v["subresources"]["scale"]["statusReplicasPath"], ".status.desiredReplicas",
            "the seed's scale marker"
        );
    }
}
