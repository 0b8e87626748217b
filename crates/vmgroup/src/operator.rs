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
//! - `BOSUN_VMGROUP_CA_FILE` — a PEM CA bundle for vCenter when the Secret has no `ca.crt`;
//! - `BOSUN_VMGROUP_INSECURE=true` — no certificate check (labs with self-signed certificates);
//! - `BOSUN_VMGROUP_RESYNC_SECONDS` — how often a group is read again to repair VMs changed in
//!   vCenter (default 60);
//! - `BOSUN_VMGROUP_PARALLEL` — clones and power operations in flight per group (default 4);
//! - `BOSUN_VMGROUP_REQUEST_TIMEOUT_SECONDS` — the bound on one vCenter request (default 60);
//! - `BOSUN_VMGROUP_WEBHOOK_ADDR` — serve the defaulting and validating webhooks
//!   ([`crate::webhook`]) on this address, e.g. `0.0.0.0:9443` (default: not served);
//! - `BOSUN_VMGROUP_WEBHOOK_CERT_DIR` — `tls.crt` and `tls.key` there (a cert-manager
//!   Certificate's Secret mounted in the pod); the manifests then carry the configurations
//!   with cert-manager's CA injection. Without it a CA and certificate are generated at start
//!   and the operator writes the configurations with that CA itself (one replica only);
//! - `BOSUN_VMGROUP_WEBHOOK_SERVICE` — `namespace/name:port` of the Service in front of the
//!   webhook, which the written configurations point at; without it they point at
//!   `https://<the bound address>` (the API server on the same machine: development).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::cache::scoped_api;
use bosun_runtime::events::Events;
use bosun_runtime::manager::{ControllerContext, Operator, OperatorError};
use bosun_runtime::rbac::{named_rule, rule, Rbac};
use bosun_runtime::status::StatusWriter;
use bosun_runtime::webhook::config::Target;
use bosun_runtime::webhook::{CertSource, Plan};
use bosun_runtime::{Primary, Wiring};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{Client, CustomResourceExt};

use crate::api::VmGroup;
use crate::connect::Connections;
use crate::reconcile::reconcile;

pub const FIELD_MANAGER: &str = "bosun-vmgroup";

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
    /// None: no webhooks.
    pub webhook: Option<WebhookSettings>,
}

/// Where and how the webhooks are served (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookSettings {
    pub listen: SocketAddr,
    pub cert_dir: Option<PathBuf>,
    /// `namespace`, `name`, `port` of the Service; None: the bound address itself.
    pub service: Option<(String, String, i32)>,
    /// The name of the configurations written with a generated CA.
    pub configuration: String,
    /// Only VmGroups in matching namespaces are reviewed (None: all).
    pub namespace_selector: Option<LabelSelector>,
}

impl WebhookSettings {
    pub fn new(listen: SocketAddr) -> Self {
        WebhookSettings {
            listen,
            cert_dir: None,
            service: None,
            configuration: crate::webhook::CONFIGURATION.into(),
            namespace_selector: None,
        }
    }
}

/// `namespace/name:port` (port 443 when absent).
fn parse_service(s: &str) -> Option<(String, String, i32)> {
    let (ns, rest) = s.split_once('/')?;
    let (name, port) = match rest.split_once(':') {
        Some((n, p)) => (n, p.parse().ok()?),
        None => (rest, 443),
    };
    (!ns.is_empty() && !name.is_empty()).then(|| (ns.to_string(), name.to_string(), port))
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
            webhook: get("BOSUN_VMGROUP_WEBHOOK_ADDR")
                .and_then(|a| a.parse().ok())
                .map(|listen| WebhookSettings {
                    cert_dir: get("BOSUN_VMGROUP_WEBHOOK_CERT_DIR").map(PathBuf::from),
                    service: get("BOSUN_VMGROUP_WEBHOOK_SERVICE")
                        .as_deref()
                        .and_then(parse_service),
                    ..WebhookSettings::new(listen)
                }),
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
            // With a generated certificate the operator writes its webhook configurations
            // (with the new CA) at start. A server-side apply that creates an object needs
            // `create`, which RBAC cannot restrict to names: a cluster-wide right to create
            // webhook configurations. Installs that would rather not grant it use a
            // cert-manager certificate (BOSUN_VMGROUP_WEBHOOK_CERT_DIR): then nothing here.
            cluster: match &self.settings.webhook {
                Some(w) if w.cert_dir.is_none() => vec![
                    named_rule(
                        "admissionregistration.k8s.io",
                        "mutatingwebhookconfigurations",
                        &[&w.configuration],
                        &["get", "patch"],
                    ),
                    named_rule(
                        "admissionregistration.k8s.io",
                        "validatingwebhookconfigurations",
                        &[&w.configuration],
                        &["get", "patch"],
                    ),
                    rule(
                        "admissionregistration.k8s.io",
                        &[
                            "mutatingwebhookconfigurations",
                            "validatingwebhookconfigurations",
                        ],
                        &["create"],
                    ),
                ],
                _ => vec![],
            },
        }
    }

    fn webhooks(&self) -> Option<Plan> {
        let w = self.settings.webhook.clone()?;
        let certificates = match &w.cert_dir {
            Some(dir) => CertSource::dir(dir),
            None => {
                let mut hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
                if let Some((ns, name, _)) = &w.service {
                    hosts.push(format!("{name}.{ns}.svc"));
                    hosts.push(format!("{name}.{ns}.svc.cluster.local"));
                }
                CertSource::Generated {
                    hosts,
                    validity: Duration::from_secs(30 * 24 * 3600),
                }
            }
        };
        let register: bosun_runtime::webhook::plan::Register =
            std::sync::Arc::new(move |ca, bound| {
                let target = match &w.service {
                    Some((namespace, name, port)) => Target::Service {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        port: *port,
                    },
                    None => Target::Url(format!("https://{bound}")),
                };
                let hooks = crate::webhook::hooks(w.namespace_selector.clone());
                crate::webhook::configurations(&w.configuration, &target, ca, hooks)
            });
        Some(Plan {
            webhooks: crate::webhook::webhooks(&self.settings.parent_folder),
            listen: w.listen,
            certificates,
            register: Some(register),
            field_manager: FIELD_MANAGER.into(),
        })
    }

    fn run(&self, ctx: ControllerContext) -> BoxFuture<'static, Result<(), OperatorError>> {
        let settings = self.settings.clone();
        let connections = self.connections.clone();
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
        let s = Settings::from_lookup(|k| match k {
            "BOSUN_VMGROUP_WEBHOOK_ADDR" => Some("0.0.0.0:9443".into()),
            "BOSUN_VMGROUP_WEBHOOK_SERVICE" => Some("ops/bosun-webhook:8443".into()),
            _ => None,
        });
        let w = s.webhook.expect("enabled");
        assert_eq!(w.listen.port(), 9443);
        assert_eq!(
            w.service,
            Some(("ops".into(), "bosun-webhook".into(), 8443))
        );
        assert_eq!(
            parse_service("ops/hook"),
            Some(("ops".into(), "hook".into(), 443))
        );
        assert_eq!(parse_service("hook"), None);
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
        for (name, field) in spec["properties"].as_object().expect("props") {
            assert!(
                field["description"].is_string(),
                "spec.{name} is documented"
            );
        }
    }
}
