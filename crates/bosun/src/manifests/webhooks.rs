//! The webhook part of an install (`bosun manifests --webhooks=vmgroup,bookstore`): what the
//! operators named serve, reached through one Service, with certificates from cert-manager.
//!
//! Each operator gets its own port (9443, 9444, … in the order named), its own cert-manager
//! `Certificate` `bosun-<operator>` (a Secret of the same name, mounted read-only at
//! `/var/run/bosun/webhooks/<operator>`), all issued by a self-signed `Issuer` — kubebuilder's
//! default; point the Certificates at your own issuer by editing `issuerRef`. The Deployment
//! sets `BOSUN_<OPERATOR>_WEBHOOK_{ADDR,CERT_DIR,SERVICE}` ([`bosun_runtime::webhook::settings`]),
//! and the operators are configured from that same environment, so the configurations and
//! CRDs printed here, and the RBAC (none to write configurations: cert-manager injects the
//! CA), are what the pods run with. Every replica serves its webhooks, so the Service selects
//! them all.
use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_runtime::manager::Operator;
use bosun_runtime::webhook::config::CaInjection;
use k8s_openapi::api::core::v1::{
    EnvVar, SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};

use super::{labels, meta, ManifestArgs, NAME};

/// The Service in front of every operator's webhooks.
pub const SERVICE: &str = "bosun-webhook";
/// The self-signed cert-manager Issuer of the webhook certificates.
pub const ISSUER: &str = "bosun-selfsigned";
const FIRST_PORT: i32 = 9443;

/// An operator whose webhooks are served.
pub struct Served {
    pub operator: String,
    pub port: i32,
}

impl Served {
    /// The cert-manager Certificate (and its Secret).
    pub fn certificate(&self) -> String {
        format!("{NAME}-{}", self.operator)
    }
    fn prefix(&self) -> String {
        format!("BOSUN_{}", self.operator.to_uppercase().replace('-', "_"))
    }
    fn cert_dir(&self) -> String {
        format!("/var/run/bosun/webhooks/{}", self.operator)
    }
    /// The container and Service port's name (at most 15 characters).
    fn port_name(&self) -> String {
        let mut n = format!("wh-{}", self.operator);
        n.truncate(15);
        n
    }
    fn volume(&self) -> String {
        format!("webhook-{}", self.operator)
    }
}

pub fn served(a: &ManifestArgs) -> Vec<Served> {
    a.webhooks
        .iter()
        .filter(|n| !n.is_empty())
        .enumerate()
        .map(|(i, n)| Served {
            operator: n.clone(),
            port: FIRST_PORT + i as i32,
        })
        .collect()
}

/// The environment the Deployment sets for the webhooks (and the operators are built from),
/// in the order the operators are named.
pub fn env_list(a: &ManifestArgs) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for s in served(a) {
        let p = s.prefix();
        env.push((format!("{p}_WEBHOOK_ADDR"), format!("0.0.0.0:{}", s.port)));
        env.push((format!("{p}_WEBHOOK_CERT_DIR"), s.cert_dir()));
        env.push((
            format!("{p}_WEBHOOK_SERVICE"),
            format!("{}/{SERVICE}:{}", a.namespace, s.port),
        ));
    }
    env
}

/// The environment the operators are built from: [`env_list`], and the namespaces watched
/// as `bosun run` passes them on from its `--namespaces` (the Deployment's argument), so that
/// the configurations printed select those namespaces as the pods' would.
pub fn env(a: &ManifestArgs) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = env_list(a).into_iter().collect();
    if !a.watch_namespaces.is_empty() {
        env.insert("BOSUN_NAMESPACES".into(), a.watch_namespaces.join(","));
    }
    env
}

/// Refuses `--webhooks` naming an operator not selected, or one that serves none.
pub fn check(a: &ManifestArgs, operators: &[Arc<dyn Operator>]) -> anyhow::Result<()> {
    for s in served(a) {
        match operators.iter().find(|o| o.name() == s.operator) {
            None => anyhow::bail!(
                "--webhooks names {:?}, which is not among the operators installed (add it to --operators)",
                s.operator
            ),
            Some(op) if op.webhooks().is_none() => {
                anyhow::bail!("operator {:?} serves no webhooks", s.operator)
            }
            Some(_) => {}
        }
    }
    Ok(())
}

pub fn env_vars(a: &ManifestArgs) -> Vec<EnvVar> {
    env_list(a)
        .into_iter()
        .map(|(name, value)| EnvVar {
            name,
            value: Some(value),
            ..Default::default()
        })
        .collect()
}

pub fn ports(a: &ManifestArgs) -> Vec<(String, i32)> {
    served(a).iter().map(|s| (s.port_name(), s.port)).collect()
}

pub fn volumes(a: &ManifestArgs) -> Vec<(Volume, VolumeMount)> {
    served(a)
        .iter()
        .map(|s| {
            (
                Volume {
                    name: s.volume(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(s.certificate()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                VolumeMount {
                    name: s.volume(),
                    mount_path: s.cert_dir(),
                    read_only: Some(true),
                    ..Default::default()
                },
            )
        })
        .collect()
}

fn issuer(a: &ManifestArgs) -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": meta(a, ISSUER, Some(&a.namespace)),
        "spec": {"selfSigned": {}},
    })
}

fn certificate(a: &ManifestArgs, s: &Served) -> Value {
    let ns = &a.namespace;
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": meta(a, &s.certificate(), Some(ns)),
        "spec": {
            "secretName": s.certificate(),
            "dnsNames": [format!("{SERVICE}.{ns}.svc"), format!("{SERVICE}.{ns}.svc.cluster.local")],
            "issuerRef": {"kind": "Issuer", "name": ISSUER},
            // Renewed a third of the way before expiry; the server reloads the files.
            "duration": "2160h",
            "renewBefore": "720h",
        },
    })
}

fn service(a: &ManifestArgs) -> Service {
    Service {
        metadata: meta(a, SERVICE, Some(&a.namespace)),
        spec: Some(ServiceSpec {
            selector: Some(labels(a)),
            ports: Some(
                served(a)
                    .iter()
                    .map(|s| ServicePort {
                        name: Some(s.port_name()),
                        port: s.port,
                        target_port: Some(IntOrString::String(s.port_name())),
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The Issuer, the Certificates, the Service and the operators' admission configurations
/// (CRDs with a conversion webhook are printed with the CRDs), in apply order.
pub fn objects(a: &ManifestArgs, operators: &[Arc<dyn Operator>]) -> anyhow::Result<Vec<Value>> {
    let served = served(a);
    if served.is_empty() {
        return Ok(vec![]);
    }
    let mut out = vec![issuer(a)];
    out.extend(served.iter().map(|s| certificate(a, s)));
    out.push(serde_json::to_value(service(a))?);
    for s in &served {
        let Some(plan) = operators
            .iter()
            .find(|o| o.name() == s.operator)
            .and_then(|o| o.webhooks())
        else {
            continue;
        };
        let Some(register) = plan.register else {
            continue;
        };
        let ca = CaInjection::CertManager(format!("{}/{}", a.namespace, s.certificate()));
        let c = register(&ca, plan.listen);
        if let Some(m) = c.mutating {
            out.push(serde_json::to_value(m)?);
        }
        if let Some(v) = c.validating {
            out.push(serde_json::to_value(v)?);
        }
    }
    Ok(out)
}
