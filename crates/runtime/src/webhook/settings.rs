//! How an operator's webhooks are served, from its environment: the same variables for every
//! operator, under its own prefix (`BOSUN_VMGROUP_WEBHOOK_ADDR`, …):
//!
//! - `<PREFIX>_WEBHOOK_ADDR` — serve on this address, e.g. `0.0.0.0:9443`, or Go's `:9443` (every
//!   interface) as controller-runtime's flags take it (unset: no webhooks);
//! - `<PREFIX>_WEBHOOK_CERT_DIR` — `tls.crt` and `tls.key` there (a cert-manager Certificate's
//!   Secret mounted in the pod); the manifests carry the configurations with cert-manager's CA
//!   injection and nothing is written at start. Unset: a CA and a certificate are generated
//!   and the operator writes its configurations with that CA; behind a Service the CA is
//!   kept in the Secret `<configuration>-webhook-ca` and shared by every replica (see
//!   [`super::shared`]), without one it is the process's own (one replica: development);
//! - `<PREFIX>_WEBHOOK_SERVICE` — `namespace/name[:port]` of the Service in front of the
//!   webhooks, which written configurations point at (the generated certificate names
//!   `<name>.<namespace>.svc`); unset: `https://<bound address>` (an API server on the same
//!   machine: development, tests);
//!
//! A value that is set but does not parse is an error naming the variable, returned by
//! [`Settings::try_from_lookup`] and, through [`Settings::from_lookup`], by the manager when it
//! starts the webhooks: never webhooks silently off, nor configurations written with the
//! bound address (`https://0.0.0.0:9443`, which the API server cannot reach, and under
//! `failurePolicy: Fail` every write of the kind refused).
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
    /// Set when the environment named webhooks but a value did not parse: starting them fails
    /// with it ([`super::plan::start`]), before anything is bound or written.
    pub refused: Option<SettingsError>,
}

/// A webhook setting that is present but unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?} {problem}")]
pub struct SettingsError {
    pub variable: String,
    pub value: String,
    pub problem: String,
}

/// `namespace/name[:port]` (port 443 when absent).
pub fn parse_service(s: &str) -> Option<(String, String, i32)> {
    service(s).ok()
}

/// A DNS-1123 label: what a namespace and a Service name must be.
fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn service(s: &str) -> Result<(String, String, i32), String> {
    const FORM: &str = "namespace/name or namespace/name:port, e.g. ops/bosun-webhook:443";
    let Some((ns, rest)) = s.split_once('/') else {
        return Err(format!("is not a Service: expected {FORM}"));
    };
    let (name, port) = match rest.split_once(':') {
        Some((n, p)) => match p.parse::<u16>() {
            Ok(port) if port > 0 => (n, i32::from(port)),
            _ => {
                return Err(format!(
                    "has port {p:?}: a Service port is a number from 1 to 65535 (the port, \
                     not its name): expected {FORM}"
                ))
            }
        },
        None => (rest, 443),
    };
    for (what, v) in [("namespace", ns), ("name", name)] {
        if !dns_label(v) {
            return Err(format!("has {what} {v:?}, which is not a DNS label (lower-case letters, digits and '-'): expected {FORM}"));
        }
    }
    Ok((ns.to_string(), name.to_string(), port))
}

/// `host:port`, `[v6]:port`, or Go's `:port` for every interface.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    let parsed = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}").parse(),
        None => s.parse(),
    };
    parsed.map_err(|_| {
        "is not an address to listen on: expected ip:port such as 0.0.0.0:9443 (or :9443), \
         an IP address, not a host name"
            .to_string()
    })
}

impl Settings {
    pub fn new(listen: SocketAddr, configuration: &str) -> Self {
        Settings {
            listen,
            cert_dir: None,
            service: None,
            configuration: configuration.into(),
            namespace_selector: None,
            refused: None,
        }
    }

    /// The settings under `prefix` (see the module documentation); None when not enabled.
    /// Values that do not parse are refused ([`Settings::refused`]), so that starting the
    /// webhooks fails naming the variable; see [`Settings::try_from_lookup`] to refuse earlier.
    pub fn from_lookup(
        prefix: &str,
        configuration: &str,
        get: impl Fn(&str) -> Option<String>,
    ) -> Option<Settings> {
        match Self::try_from_lookup(prefix, configuration, get) {
            Ok(settings) => settings,
            // The address is never bound: the manager refuses the plan first.
            Err(e) => Some(Settings {
                refused: Some(e),
                ..Settings::new(SocketAddr::from(([127, 0, 0, 1], 0)), configuration)
            }),
        }
    }

    /// The settings under `prefix`: None when `<PREFIX>_WEBHOOK_ADDR` is unset, an error
    /// naming the variable when a value is set but does not parse.
    pub fn try_from_lookup(
        prefix: &str,
        configuration: &str,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Settings>, SettingsError> {
        let refuse = |variable: String, value: &str, problem: String| SettingsError {
            variable,
            value: value.to_string(),
            problem,
        };
        let addr_var = format!("{prefix}_WEBHOOK_ADDR");
        let Some(addr) = get(&addr_var) else {
            return Ok(None);
        };
        let listen = listen_addr(addr.trim()).map_err(|p| refuse(addr_var, &addr, p))?;
        let service_var = format!("{prefix}_WEBHOOK_SERVICE");
        let service = match get(&service_var) {
            Some(v) => Some(service(v.trim()).map_err(|p| refuse(service_var, &v, p))?),
            None => None,
        };
        Ok(Some(Settings {
            cert_dir: get(&format!("{prefix}_WEBHOOK_CERT_DIR")).map(PathBuf::from),
            service,
            namespace_selector: watched_namespaces(&namespaces_from_lookup(&get)),
            ..Settings::new(listen, configuration)
        }))
    }

    /// Whether the operator writes its configurations itself (a generated certificate).
    pub fn registers(&self) -> bool {
        self.cert_dir.is_none()
    }

    pub fn certificates(&self) -> CertSource {
        if let Some(e) = &self.refused {
            return CertSource::Refused(e.clone());
        }
        let validity = Duration::from_secs(30 * 24 * 3600);
        let mut hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        match (&self.cert_dir, &self.service) {
            (Some(dir), _) => CertSource::dir(dir),
            // Behind a Service there may be several replicas: one CA for all of them.
            (None, Some((ns, name, _))) => {
                hosts.push(format!("{name}.{ns}.svc"));
                hosts.push(format!("{name}.{ns}.svc.cluster.local"));
                CertSource::SharedCa {
                    namespace: ns.clone(),
                    secret: self.ca_secret(),
                    hosts,
                    validity,
                }
            }
            (None, None) => CertSource::Generated { hosts, validity },
        }
    }

    /// The Secret holding the CA shared by the replicas (in the Service's namespace).
    pub fn ca_secret(&self) -> String {
        format!("{}-webhook-ca", self.configuration)
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
    /// RBAC cannot restrict to names — a cluster-wide right to create webhook configurations;
    /// behind a Service, reading the shared CA's Secret by name and creating it (`create` on
    /// Secrets, again not restricted by name). Installs that would rather not grant these
    /// use a cert-manager certificate: then nothing.
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
        if self.service.is_some() {
            rules.push(named_rule("", "secrets", &[&self.ca_secret()], &["get"]));
            rules.push(rule("", &["secrets"], &["create"]));
        }
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
        // Behind a Service: the shared CA's Secret is read by name and created.
        assert_eq!(s.rbac().len(), 5);
        match s.certificates() {
            CertSource::SharedCa {
                namespace,
                secret,
                hosts,
                ..
            } => {
                assert_eq!(
                    (namespace.as_str(), secret.as_str()),
                    ("ops", "c-webhook-ca")
                );
                assert!(hosts.contains(&"hook.ops.svc".to_string()), "{hosts:?}")
            }
            other => panic!("{other:?}"),
        }
        let loopback = Settings {
            service: None,
            ..s.clone()
        };
        assert!(matches!(
            loopback.certificates(),
            CertSource::Generated { .. }
        ));
        assert_eq!(loopback.rbac().len(), 3);
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

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    /// A value that is set but unusable never turns the webhooks off silently, nor leaves the
    /// configurations pointing at the bound address: it is an error naming the variable.
    #[test]
    fn a_setting_that_does_not_parse_is_an_error_naming_the_variable() {
        let addr = |v: &str| lookup(&[("X_WEBHOOK_ADDR", v)]);
        for bad in [
            "localhost:9443",
            "9443",
            "0.0.0.0",
            "0.0.0.0:http",
            ":",
            "[::1]",
            "",
        ] {
            let e = Settings::try_from_lookup("X", "c", addr(bad)).expect_err(bad);
            assert_eq!(e.variable, "X_WEBHOOK_ADDR", "{bad}");
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("X_WEBHOOK_ADDR={bad:?} "))
                    && text.contains("0.0.0.0:9443"),
                "{text}"
            );
            // Through the infallible constructor operators use: refused when started.
            let s = Settings::from_lookup("X", "c", addr(bad)).expect("webhooks not silently off");
            assert_eq!(s.refused.as_ref(), Some(&e));
            match s.certificates() {
                CertSource::Refused(r) => assert_eq!(r, e),
                other => panic!("{other:?}"),
            }
        }
        // Go's form (controller-runtime's flags) and IPv6 are addresses.
        for (good, want) in [(":9443", "0.0.0.0:9443"), ("[::]:9443", "[::]:9443")] {
            let s = Settings::try_from_lookup("X", "c", addr(good))
                .expect(good)
                .expect("enabled");
            assert_eq!(s.listen.to_string(), want);
            assert_eq!(s.refused, None);
        }
        let service = |v: &str| lookup(&[("X_WEBHOOK_ADDR", ":9443"), ("X_WEBHOOK_SERVICE", v)]);
        for bad in [
            "ops/hook:https",
            "ops/hook:0",
            "ops/hook:70000",
            "ops/hook:-1",
            "hook",
            "/hook",
            "ops/",
            "Ops/hook",
            "ops/hook.svc",
            "ops/hook/x",
        ] {
            let e = Settings::try_from_lookup("X", "c", service(bad)).expect_err(bad);
            assert_eq!(e.variable, "X_WEBHOOK_SERVICE", "{bad}");
            assert!(e.to_string().contains("namespace/name"), "{e}");
            let s = Settings::from_lookup("X", "c", service(bad)).expect("refused, not off");
            assert_eq!(s.refused, Some(e));
        }
        let s = Settings::try_from_lookup("X", "c", service("ops/hook:8443"))
            .expect("valid")
            .expect("enabled");
        assert_eq!(s.service, Some(("ops".into(), "hook".into(), 8443)));
        assert_eq!(Settings::try_from_lookup("X", "c", lookup(&[])), Ok(None));
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
