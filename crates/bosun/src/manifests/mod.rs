//! `bosun manifests`: everything needed to install bosun, built as typed k8s-openapi objects
//! from the operator registry (CRDs, RBAC from each operator's rules, the Deployment, the
//! metrics Service). Pure builders; the committed `deploy/base/bosun.yaml` is this output at
//! the defaults (checked by a test), and the Helm chart under `charts/bosun` renders the same
//! objects (checked with Helm's engine).
mod deployment;
pub mod rbac;
pub mod webhooks;

use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_runtime::manager::Operator;
use clap::Args;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// bosun's image as the release workflow pushes it: tagged with the git tag, `v<version>`.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/bosun-dev/bosun:v", env!("CARGO_PKG_VERSION"));

#[derive(Args, Debug, Clone)]
pub struct ManifestArgs {
    /// Container image of bosun.
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Namespace bosun runs in.
    #[arg(long, default_value = "bosun-system")]
    pub namespace: String,
    /// Coded operators to enable (comma-separated). Default: bookstore, or none when
    /// --watches is given.
    #[arg(long, value_delimiter = ',')]
    pub operators: Option<Vec<String>>,
    /// An operator-sdk watches.yaml: CRDs and RBAC for its entries, and the Deployment runs it.
    #[arg(long, visible_alias = "watches-file")]
    pub watches: Option<std::path::PathBuf>,
    /// The watches file's path inside the image (the Deployment's `--watches`): build an
    /// image from bosun's with the watches file and its charts or roles copied in.
    #[arg(long, default_value = "/opt/bosun/watches.yaml")]
    pub watches_in_image: String,
    /// Release storage of chart entries: `secret`, `configmap` (Helm's ConfigMaps driver) or
    /// `none` (no Secrets granted then).
    #[arg(long, default_value = "secret")]
    pub release_storage: bosun_helm_operator::Storage,
    /// Namespaces to watch (comma-separated); all when empty. When set, RBAC for the
    /// operators' resources is granted with a Role in each watched namespace only.
    #[arg(long, value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Replicas (leader election keeps one active).
    #[arg(long, default_value_t = 2)]
    pub replicas: i32,
    /// Log format: text or json.
    #[arg(long, default_value = "json")]
    pub log_format: String,
    /// Operators whose webhooks to serve (comma-separated, each among the operators
    /// installed): adds the webhook Service, the webhook configurations or the CRD's
    /// conversion, and cert-manager Certificates with a self-signed Issuer (cert-manager must
    /// be installed). None by default.
    #[arg(long, value_delimiter = ',')]
    pub webhooks: Vec<String>,
    /// The name of the Deployment, its ServiceAccount, roles and metrics Service, and the
    /// prefix of its Lease (`<name>-leader`): two installs in one namespace need two names.
    /// Default: bosun (`bosun bundle`: the package).
    #[arg(long)]
    pub name: Option<String>,
    /// Shard every operator's objects over the replicas instead of electing one leader
    /// (`bosun run --sharding`): `--replicas` is then the number of shards. Adds the Lease
    /// rule the replicas' membership and the sharder need.
    #[arg(long)]
    pub sharding: bool,
    /// Shard over N replicas: the Deployment runs N replicas with `bosun run --shards=N`
    /// (sharding on, N members expected). Refused together with `--replicas`.
    #[arg(long, value_parser = parse_shards, conflicts_with = "replicas")]
    pub shards: Option<i32>,
}

/// A replica count for `--shards`, refused as `bosun run --shards` refuses it.
fn parse_shards(s: &str) -> Result<i32, String> {
    match s.parse::<i32>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("the number of shards must be at least 1".into()),
        Err(_) => Err(format!(
            "{s:?} is not a number of shards (a whole number, 1 or more)"
        )),
    }
}

impl Default for ManifestArgs {
    fn default() -> Self {
        ManifestArgs {
            image: DEFAULT_IMAGE.into(),
            namespace: "bosun-system".into(),
            operators: None,
            watches: None,
            watches_in_image: "/opt/bosun/watches.yaml".into(),
            release_storage: bosun_helm_operator::Storage::Secrets,
            watch_namespaces: vec![],
            replicas: 2,
            log_format: "json".into(),
            webhooks: vec![],
            name: None,
            sharding: false,
            shards: None,
        }
    }
}

impl ManifestArgs {
    /// Whether the replicas shard (`--sharding` or `--shards`).
    pub fn sharded(&self) -> bool {
        self.sharding || self.shards.is_some()
    }

    /// The Deployment's replicas: `--shards` when given, else `--replicas`.
    pub fn replica_count(&self) -> i32 {
        self.shards.unwrap_or(self.replicas)
    }

    /// The operators these flags select (see [`crate::registry::operators`]).
    /// They are configured from the Deployment's environment (see [`webhooks`]), not this
    /// process's, so the CRDs and RBAC printed are those of the pods.
    pub fn operators(&self) -> anyhow::Result<Vec<Arc<dyn Operator>>> {
        let env = webhooks::env(self);
        let ops = crate::registry::operators(&crate::registry::Sources {
            operators: self.operators.as_deref(),
            watches: self.watches.as_deref(),
            release_storage: self.release_storage,
            env: Some(&env),
            ..Default::default()
        })?;
        webhooks::check(self, &ops)?;
        Ok(ops)
    }

    /// The install's name ([`ManifestArgs::name`]).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(NAME)
    }

    /// The Lease the Deployment's replicas elect a leader with.
    pub fn lease_name(&self) -> String {
        format!("{}-leader", self.name())
    }

    /// Refuses a name that cannot name every object: a DNS-1035 label, so that its longest
    /// derivative (the Service `<name>-metrics`) is one too, within 63 characters.
    fn check_name(&self) -> anyhow::Result<()> {
        let n = self.name();
        let longest = format!("{n}-metrics");
        let label = n.starts_with(|c: char| c.is_ascii_lowercase())
            && !n.ends_with('-')
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !label || longest.len() > 63 {
            anyhow::bail!(
                "--name {n:?}: use lowercase letters, digits and '-', starting with a letter, \
                 at most 55 characters (the Service {longest:?} must be a DNS label)"
            );
        }
        Ok(())
    }

    /// The coded operators the Deployment's `--operators` names.
    pub fn coded_names(&self) -> Vec<String> {
        match (&self.operators, &self.watches) {
            (Some(list), _) => list.clone(),
            (None, Some(_)) => Vec::new(),
            (None, None) => crate::registry::default_names(),
        }
    }
}

/// The default install name.
pub const NAME: &str = "bosun";

fn labels(a: &ManifestArgs) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), a.name().to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            "operator".to_string(),
        ),
    ])
}

fn meta(a: &ManifestArgs, name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(labels(a)),
        ..Default::default()
    }
}

/// Every object, in apply order, for the given operators.
pub fn objects(a: &ManifestArgs, operators: &[Arc<dyn Operator>]) -> anyhow::Result<Vec<Value>> {
    a.check_name()?;
    let mut out = Vec::new();
    for op in operators {
        for crd in op.crds() {
            out.push(serde_json::to_value(crd)?);
        }
    }
    out.push(serde_json::to_value(Namespace {
        metadata: ObjectMeta {
            name: Some(a.namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    })?);
    out.push(serde_json::to_value(ServiceAccount {
        metadata: meta(a, a.name(), Some(&a.namespace)),
        ..Default::default()
    })?);
    out.extend(rbac::objects(a, operators)?);
    out.push(serde_json::to_value(deployment::deployment(a))?);
    out.push(serde_json::to_value(deployment::metrics_service(a))?);
    out.extend(webhooks::objects(a, operators)?);
    Ok(out)
}

/// Objects as a YAML stream.
pub fn to_yaml(objects: &[Value]) -> anyhow::Result<String> {
    let mut s = String::new();
    for o in objects {
        s.push_str("---\n");
        s.push_str(&serde_yaml::to_string(o)?);
    }
    Ok(s)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn objs(a: &ManifestArgs) -> Vec<Value> {
        let ops = a.operators().expect("operators");
        objects(a, &ops).expect("objects")
    }

    fn yaml(a: &ManifestArgs) -> String {
        to_yaml(&objs(a)).expect("yaml")
    }

    #[test]
    fn committed_base_is_fresh() {
        let committed = include_str!("../../../../deploy/base/bosun.yaml");
        assert!(
            committed == yaml(&ManifestArgs::default()),
            "deploy/base/bosun.yaml is stale: run `cargo run -p bosun -- manifests > deploy/base/bosun.yaml`"
        );
    }

    #[test]
    fn committed_namespaced_overlay_is_fresh() {
        let committed = include_str!("../../../../deploy/overlays/namespaced/bosun.yaml");
        let args = ManifestArgs {
            watch_namespaces: vec!["shop".into()],
            ..Default::default()
        };
        assert!(
            committed == yaml(&args),
            "deploy/overlays/namespaced/bosun.yaml is stale: run `cargo run -p bosun -- manifests --watch-namespaces=shop > deploy/overlays/namespaced/bosun.yaml`"
        );
    }

    pub(crate) fn webhook_args() -> ManifestArgs {
        ManifestArgs {
            operators: Some(vec!["bookstore".into(), "vmgroup".into()]),
            webhooks: vec!["bookstore".into(), "vmgroup".into()],
            ..Default::default()
        }
    }

    #[test]
    fn committed_webhooks_overlay_is_fresh() {
        let committed = include_str!("../../../../deploy/overlays/webhooks/bosun.yaml");
        assert!(
            committed == yaml(&webhook_args()),
            "deploy/overlays/webhooks/bosun.yaml is stale: run `cargo run -p bosun -- manifests --operators=bookstore,vmgroup --webhooks=bookstore,vmgroup > deploy/overlays/webhooks/bosun.yaml`"
        );
    }

    /// cert-manager injects the CA of the Certificate an object names: each named one must be
    /// printed, and its Secret mounted where that operator reads its certificate.
    #[test]
    fn every_ca_injection_names_a_certificate_mounted_for_its_operator() {
        let objs = objs(&webhook_args());
        let injected: Vec<&str> = objs
            .iter()
            .filter_map(|o| {
                o["metadata"]["annotations"][bosun_runtime::webhook::config::CERT_MANAGER_INJECT]
                    .as_str()
            })
            .collect();
        assert_eq!(
            injected.len(),
            3,
            "two admission configurations and the BookStore CRD: {injected:?}"
        );
        let dep = objs
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        let pod = &dep["spec"]["template"]["spec"];
        let env = |name: &str| {
            pod["containers"][0]["env"]
                .as_array()
                .expect("env")
                .iter()
                .find(|e| e["name"] == name)
                .and_then(|e| e["value"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        for name in injected {
            let (ns, cert) = name.split_once('/').expect("namespace/name");
            assert_eq!(ns, "bosun-system");
            let c = objs
                .iter()
                .find(|o| o["kind"] == "Certificate" && o["metadata"]["name"] == cert)
                .unwrap_or_else(|| panic!("no Certificate {cert}"));
            assert_eq!(c["spec"]["issuerRef"]["name"], webhooks::ISSUER);
            assert!(c["spec"]["dnsNames"][0] == "bosun-webhook.bosun-system.svc");
            let secret = c["spec"]["secretName"].as_str().expect("secret");
            let volume = pod["volumes"]
                .as_array()
                .expect("volumes")
                .iter()
                .find(|v| v["secret"]["secretName"] == secret)
                .expect("secret mounted");
            let mount = pod["containers"][0]["volumeMounts"]
                .as_array()
                .expect("mounts")
                .iter()
                .find(|m| m["name"] == volume["name"])
                .expect("mount");
            let op = cert.trim_start_matches("bosun-").to_uppercase();
            assert_eq!(
                mount["mountPath"].as_str(),
                Some(env(&format!("BOSUN_{op}_WEBHOOK_CERT_DIR")).as_str())
            );
        }
        assert!(objs.iter().any(|o| o["kind"] == "Issuer"));
    }

    /// The Service's ports are the ones the operators listen on and the configurations call.
    #[test]
    fn webhook_service_ports_reach_the_listeners() {
        let objs = objs(&webhook_args());
        let svc = objs
            .iter()
            .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == webhooks::SERVICE)
            .expect("webhook service");
        let ports = svc["spec"]["ports"].as_array().expect("ports");
        let text = serde_json::to_string(&objs).expect("json");
        for (op, port) in [("BOOKSTORE", 9443), ("VMGROUP", 9444)] {
            assert!(ports.iter().any(|p| p["port"] == port));
            assert!(
                text.contains(&format!(
                    "\"BOSUN_{op}_WEBHOOK_ADDR\",\"value\":\"0.0.0.0:{port}\""
                )),
                "{op}"
            );
        }
        for o in objs.iter().filter(|o| {
            o["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("WebhookConfiguration"))
        }) {
            let cc = &o["webhooks"][0]["clientConfig"];
            assert_eq!(cc["service"]["name"], webhooks::SERVICE);
            assert_eq!(cc["service"]["port"], 9444, "VmGroup's port");
            assert!(
                cc["url"].is_null() && cc["caBundle"].is_null(),
                "cert-manager injects the CA"
            );
        }
    }

    /// With cert-manager nothing is written at start: no right to write configurations or
    /// CRDs is granted.
    #[test]
    fn webhooks_from_cert_manager_need_no_write_rights() {
        let a = webhook_args();
        let text =
            serde_json::to_string(&rbac::objects(&a, &a.operators().expect("ops")).expect("rbac"))
                .expect("json");
        assert!(
            !text.contains("webhookconfigurations") && !text.contains("customresourcedefinitions"),
            "{text}"
        );
    }

    #[test]
    fn webhooks_of_an_operator_not_installed_or_without_any_are_refused() {
        let err = |a: ManifestArgs| a.operators().err().expect("refused").to_string();
        let e = err(ManifestArgs {
            webhooks: vec!["vmgroup".into()],
            ..Default::default()
        });
        assert!(e.contains("--operators"), "{e}");
        let e = err(ManifestArgs {
            operators: Some(vec!["myownshell".into()]),
            webhooks: vec!["myownshell".into()],
            ..Default::default()
        });
        assert!(e.contains("serves no webhooks"), "{e}");
    }

    /// `--name` names every namespaced object and the Lease, so two installs share a namespace.
    #[test]
    fn a_name_names_every_object_and_the_lease() {
        let objs = objs(&ManifestArgs {
            name: Some("shop-ops".into()),
            ..Default::default()
        });
        for o in objs.iter().filter(|o| {
            !matches!(
                o["kind"].as_str(),
                Some("Namespace" | "CustomResourceDefinition")
            )
        }) {
            let name = o["metadata"]["name"].as_str().expect("name");
            assert!(name.starts_with("shop-ops"), "{} {name}", o["kind"]);
            assert_eq!(
                o["metadata"]["labels"]["app.kubernetes.io/name"],
                "shop-ops"
            );
        }
        let text = serde_json::to_string(&objs).expect("json");
        assert!(text.contains("--lease-name=shop-ops-leader"), "{text}");
        assert!(!text.contains("\"bosun-leader\""), "{text}");
        for bad in ["Shop", "-x", "x-", "a.b", &"x".repeat(56)] {
            let a = ManifestArgs {
                name: Some(bad.to_string()),
                ..Default::default()
            };
            let err = objects(&a, &a.operators().expect("ops"))
                .expect_err(bad)
                .to_string();
            assert!(err.contains("--name"), "{err}");
        }
    }

    #[test]
    fn no_wildcard_in_any_rule() {
        for args in [
            ManifestArgs::default(),
            ManifestArgs {
                operators: Some(vec!["bookstore".into(), "myownshell".into()]),
                watch_namespaces: vec!["a".into(), "b".into()],
                ..Default::default()
            },
        ] {
            let text = serde_json::to_string(&objs(&args)).expect("json");
            assert!(!text.contains("\"*\""), "wildcard found");
        }
    }

    #[test]
    fn restricted_security_context() {
        let objs = objs(&ManifestArgs::default());
        let dep = objs
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        let pod = &dep["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(
            (
                c["readOnlyRootFilesystem"].as_bool(),
                c["allowPrivilegeEscalation"].as_bool()
            ),
            (Some(true), Some(false))
        );
        assert_eq!(c["capabilities"]["drop"][0], "ALL");
        assert_eq!(dep["spec"]["replicas"], 2);
    }

    fn manifest_args(argv: &[&str]) -> Result<ManifestArgs, clap::Error> {
        use clap::Parser;
        match crate::cli::Cli::try_parse_from(argv)?.command {
            crate::cli::Command::Manifests(a) => Ok(a),
            _ => panic!("not manifests"),
        }
    }

    #[test]
    fn shards_sets_the_replicas_and_the_flag_and_refuses_replicas_beside_it() {
        let a = manifest_args(&["bosun", "manifests", "--shards", "3"]).expect("parses");
        let objs = objs(&a);
        let dep = objs
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        assert_eq!(dep["spec"]["replicas"], 3);
        let args = &dep["spec"]["template"]["spec"]["containers"][0]["args"];
        let args: Vec<&str> = args
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&"--shards=3"), "{args:?}");
        assert!(!args.contains(&"--sharding"), "{args:?}");
        // The membership and sharder Lease rule comes with it, as with --sharding.
        let sharding = objs_sharding_rbac(&ManifestArgs {
            sharding: true,
            ..Default::default()
        });
        assert_eq!(objs_sharding_rbac(&a), sharding);
        // Today's --sharding --replicas N keeps working.
        let a = manifest_args(&["bosun", "manifests", "--sharding", "--replicas", "3"])
            .expect("parses");
        assert_eq!((a.replica_count(), a.sharded()), (3, true));
        let e = manifest_args(&["bosun", "manifests", "--shards", "3", "--replicas", "2"])
            .expect_err("both");
        assert!(e.to_string().contains("cannot be used with"), "{e}");
        let e = manifest_args(&["bosun", "manifests", "--shards", "0"]).expect_err("0");
        assert!(e.to_string().contains("at least 1"), "{e}");
    }

    /// The RBAC objects of an install (the Lease rules differ with sharding).
    fn objs_sharding_rbac(a: &ManifestArgs) -> Vec<Value> {
        objs(a)
            .into_iter()
            .filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole")
            .collect()
    }

    #[test]
    fn namespaced_install_uses_roles_per_watched_namespace() {
        let objs = objs(&ManifestArgs {
            watch_namespaces: vec!["shop".into()],
            ..Default::default()
        });
        let role = objs
            .iter()
            .find(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == "shop")
            .expect("role in shop");
        assert!(role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["resources"][0] == "bookstores"));
        let cr = objs
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        assert!(
            !serde_json::to_string(cr)
                .expect("json")
                .contains("bookstores"),
            "cluster role is only cluster-scoped reads"
        );
    }

    #[test]
    fn only_the_selected_operators_crds_are_installed() {
        let kinds = |ops: &[&str]| -> Vec<String> {
            objs(&ManifestArgs {
                operators: Some(ops.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            })
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .map(|o| {
                o["spec"]["names"]["kind"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
        };
        assert_eq!(kinds(&["bookstore"]), vec!["BookStore"]);
        assert_eq!(
            kinds(&["myownshell", "bookstore"]),
            vec!["MyOwnShell", "BookStore"]
        );
    }

    /// Every release storage but the default reaches the Deployment's args, and the role grants
    /// the kind that storage writes (ConfigMaps for `configmap`, no Secrets for `none`).
    #[test]
    fn the_release_storage_reaches_the_pods_and_their_role() {
        use bosun_helm_operator::Storage;
        let watches = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/helm-bookstore/watches.yaml");
        let seen = |storage: Storage| -> (Vec<String>, String) {
            let objs = objs(&ManifestArgs {
                watches: Some(watches.clone()),
                release_storage: storage,
                ..Default::default()
            });
            let deploy = objs
                .iter()
                .find(|o| o["kind"] == "Deployment")
                .expect("a Deployment");
            let args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .expect("args")
                .iter()
                .filter_map(|a| a.as_str())
                .filter(|a| a.starts_with("--release-storage"))
                .map(String::from)
                .collect();
            let rules = objs
                .iter()
                .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
                .map(|o| o["rules"].to_string())
                .collect::<Vec<_>>()
                .join("\n");
            (args, rules)
        };
        let (args, _) = seen(Storage::Secrets);
        assert!(args.is_empty(), "secret is run's default: {args:?}");
        let (args, rules) = seen(Storage::ConfigMaps);
        assert_eq!(args, ["--release-storage=configmap"]);
        assert!(rules.contains("\"configmaps\""), "{rules}");
        let (args, _) = seen(Storage::None);
        assert_eq!(args, ["--release-storage=none"]);
    }
}
