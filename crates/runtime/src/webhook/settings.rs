//! How an operator's webhooks are served, from its environment: the same variables for every
//! operator, under its own prefix (`BOSUN_VMGROUP_WEBHOOK_ADDR`, …):
//!
//! - `<PREFIX>_WEBHOOK_ADDR` — serve on this address, e.g. `0.0.0.0:9443` (unset: no webhooks);
//! - `<PREFIX>_WEBHOOK_CERT_DIR` — `tls.crt` and `tls.key` there (a cert-manager Certificate's
//!   Secret mounted in the pod); the manifests carry the configurations with cert-manager's CA
//!   injection and nothing is written at start. Unset: a CA and a certificate are generated
//!   and the operator writes its configurations with that CA (one replica only, see
//!   [`super::plan`]);
//! - `<PREFIX>_WEBHOOK_SERVICE` — `namespace/name[:port]` of the Service in front of the
//!   webhooks, which written configurations point at (the generated certificate names
//!   `<name>.<namespace>.svc`); unset: `https://<bound address>` (an API server on the same
//!   machine: development, tests);
//! - `BOSUN_NAMESPACES` (else operator-sdk's `WATCH_NAMESPACE`) — the namespaces the operator
//!   watches, as `bosun run` reads them (its `--namespaces` flag is passed on under that
//!   name): the admission webhooks then review objects in those namespaces only
//!   ([`watched_namespaces`]), so an install watching `shop` neither judges nor, under
//!   `failurePolicy: Fail`, blocks the objects of other namespaces.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::config::Target;
use super::CertSource;
use crate::rbac::{named_rule, rule};

/// The label holding a namespace's own name. The API server sets it on every namespace from
/// Kubernetes 1.21 on (`NamespaceDefaultLabelName`, GA in 1.22); on 1.20 and older an admin
/// sets it on each watched namespace (`kubectl label namespace shop
/// kubernetes.io/metadata.name=shop`), or the webhooks skip that namespace.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The selector of the namespaces `names` (by [`NAMESPACE_NAME_LABEL`]); None (every
/// namespace) when there are none.
pub fn watched_namespaces(names: &[String]) -> Option<LabelSelector> {
    let mut values: Vec<String> = names
        .iter()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    values.sort();
    values.dedup();
    (!values.is_empty()).then(|| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.into(),
            operator: "In".into(),
            values: Some(values),
        }]),
        match_labels: None,
    })
}

/// The namespaces watched, from `BOSUN_NAMESPACES`, else `WATCH_NAMESPACE` (comma-separated;
/// empty: all).
pub fn namespaces_from_lookup(get: &impl Fn(&str) -> Option<String>) -> Vec<String> {
    get("BOSUN_NAMESPACES")
        .or_else(|| get("WATCH_NAMESPACE"))
        .map(|v| {
            v.split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub listen: SocketAddr,
    pub cert_dir: Option<PathBuf>,
    /// `namespace`, `name`, `port` of the Service; None: the bound address itself.
    pub service: Option<(String, String, i32)>,
    /// The name of the configurations written with a generated CA.
    pub configuration: String,
    /// Only objects in matching namespaces are reviewed (None: all).
    pub namespace_selector: Option<LabelSelector>,
}

/// `namespace/name[:port]` (port 443 when absent).
pub fn parse_service(s: &str) -> Option<(String, String, i32)> {
    let (ns, rest) = s.split_once('/')?;
    let (name, port) = match rest.split_once(':') {
        Some((n, p)) => (n, p.parse().ok()?),
        None => (rest, 443),
    };
    (!ns.is_empty() && !name.is_empty()).then(|| (ns.to_string(), name.to_string(), port))
}

impl Settings {
    pub fn new(listen: SocketAddr, configuration: &str) -> Self {
        Settings {
            listen,
            cert_dir: None,
            service: None,
            configuration: configuration.into(),
            namespace_selector: None,
        }
    }

    /// The settings under `prefix` (see the module documentation); None when not enabled.
    pub fn from_lookup(
        prefix: &str,
        configuration: &str,
        get: impl Fn(&str) -> Option<String>,
    ) -> Option<Settings> {
        let listen = get(&format!("{prefix}_WEBHOOK_ADDR"))?.parse().ok()?;
        Some(Settings {
            cert_dir: get(&format!("{prefix}_WEBHOOK_CERT_DIR")).map(PathBuf::from),
            service: get(&format!("{prefix}_WEBHOOK_SERVICE"))
                .as_deref()
                .and_then(parse_service),
            namespace_selector: watched_namespaces(&namespaces_from_lookup(&get)),
            ..Settings::new(listen, configuration)
        })
    }

    /// Whether the operator writes its configurations itself (a generated certificate).
    pub fn registers(&self) -> bool {
        self.cert_dir.is_none()
    }

    pub fn certificates(&self) -> CertSource {
        match &self.cert_dir {
            Some(dir) => CertSource::dir(dir),
            None => {
                let mut hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
                if let Some((ns, name, _)) = &self.service {
                    hosts.push(format!("{name}.{ns}.svc"));
                    hosts.push(format!("{name}.{ns}.svc.cluster.local"));
                }
                CertSource::Generated {
                    hosts,
                    validity: Duration::from_secs(30 * 24 * 3600),
                }
            }
        }
    }

    /// Where written configurations send reviews, the server being bound to `bound`.
    pub fn target(&self, bound: SocketAddr) -> Target {
        match &self.service {
            Some((namespace, name, port)) => Target::Service {
                namespace: namespace.clone(),
                name: name.clone(),
                port: *port,
            },
            None => Target::Url(format!("https://{bound}")),
        }
    }

    /// What writing the configurations needs: `patch` on them by name, and `create`, which
    /// RBAC cannot restrict to names — a cluster-wide right to create webhook configurations.
    /// Installs that would rather not grant it use a cert-manager certificate: then nothing.
    pub fn rbac(&self) -> Vec<PolicyRule> {
        if !self.registers() {
            return vec![];
        }
        let group = "admissionregistration.k8s.io";
        let kinds = [
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
        ];
        let mut rules: Vec<PolicyRule> = kinds
            .iter()
            .map(|k| named_rule(group, k, &[&self.configuration], &["get", "patch"]))
            .collect();
        rules.push(rule(group, &kinds, &["create"]));
        rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_prefixed_environment() {
        assert_eq!(Settings::from_lookup("X", "c", |_| None), None);
        let s = Settings::from_lookup("X", "c", |k| match k {
            "X_WEBHOOK_ADDR" => Some("0.0.0.0:9443".into()),
            "X_WEBHOOK_SERVICE" => Some("ops/hook:8443".into()),
            _ => None,
        })
        .expect("enabled");
        assert_eq!(s.listen.port(), 9443);
        assert_eq!(s.service, Some(("ops".into(), "hook".into(), 8443)));
        assert!(s.registers());
        assert_eq!(s.rbac().len(), 3);
        match s.certificates() {
            CertSource::Generated { hosts, .. } => {
                assert!(hosts.contains(&"hook.ops.svc".to_string()), "{hosts:?}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_service("ops/hook"),
            Some(("ops".into(), "hook".into(), 443))
        );
        assert_eq!(parse_service("hook"), None);
        let files = Settings {
            cert_dir: Some("/certs".into()),
            ..s
        };
        assert!(files.rbac().is_empty(), "cert-manager: nothing written");
        assert_eq!(files.namespace_selector, None, "no namespaces: all");
    }

    #[test]
    fn watched_namespaces_select_the_webhooks_namespaces_by_name() {
        let s = Settings::from_lookup("X", "c", |k| match k {
            "X_WEBHOOK_ADDR" => Some("0.0.0.0:9443".into()),
            "BOSUN_NAMESPACES" => Some("shop, books,,shop".into()),
            "WATCH_NAMESPACE" => Some("ignored".into()),
            _ => None,
        })
        .expect("enabled");
        let sel = serde_json::to_value(s.namespace_selector).expect("json");
        assert_eq!(
            sel,
            serde_json::json!({"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "In", "values": ["books", "shop"]
            }]})
        );
        // operator-sdk's variable when bosun's is absent; empty means every namespace.
        let get = |w: &'static str| move |k: &str| (k == "WATCH_NAMESPACE").then(|| w.to_string());
        assert_eq!(namespaces_from_lookup(&get("ops")), ["ops"]);
        assert_eq!(watched_namespaces(&namespaces_from_lookup(&get(""))), None);
    }
}
