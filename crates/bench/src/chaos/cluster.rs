//! The chaos suite's cluster: one audited control plane with kube-controller-manager and the
//! node agent, the BookStore CRD, a default expandable StorageClass, and the operator's
//! generated RBAC bound to a group every bosun identity of the suite belongs to (each bosun
//! runs with a kubeconfig impersonating its own identity, so the audit log tells who wrote).
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bosun_bookstore::{BookStore, BookStoreOperator};
use bosun_runtime::manager::Operator as _;
use bosun_testenv::{test_namespace, ControlPlane, NodeAgent, NodeAgentConfig, Options};
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use super::Args;

/// The group every bosun of the suite is in, bound to the operator's ClusterRole.
pub const GROUP: &str = "bosun-chaos";

pub struct Env {
    pub args: Args,
    pub cp: ControlPlane,
    pub admin: Client,
    _agent: NodeAgent,
}

impl Env {
    pub async fn start(args: &Args) -> anyhow::Result<Env> {
        let cp = ControlPlane::start_audited(Options {
            controller_manager: true,
        })
        .await?;
        let admin = cp.client().await?;
        let pp = PatchParams::apply("bosun-chaos").force();
        bosun_testenv::kit::install_crds(&admin, [bosun_bookstore::api::crd()]).await?;
        bosun_verify::simulated_storage_class(&admin).await?;
        // What the install manifests grant (the operator's rules, the runtime's with metrics
        // auth, and leases; leases cluster-wide here, since each scenario elects in its own
        // namespace).
        let need = BookStoreOperator
            .rbac()
            .merge(bosun_runtime::rbac::runtime_rules(true));
        let mut rules = need.namespaced;
        rules.extend(need.cluster);
        rules.push(bosun_runtime::rbac::rule(
            "coordination.k8s.io",
            &["leases"],
            &["create", "get", "update"],
        ));
        let role = ClusterRole {
            metadata: ObjectMeta {
                name: Some(GROUP.into()),
                ..Default::default()
            },
            rules: Some(rules),
            ..Default::default()
        };
        Api::<ClusterRole>::all(admin.clone())
            .patch(GROUP, &pp, &Patch::Apply(&role))
            .await?;
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(GROUP.into()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: GROUP.into(),
            },
            subjects: Some(vec![Subject {
                kind: "Group".into(),
                name: GROUP.into(),
                api_group: Some("rbac.authorization.k8s.io".into()),
                ..Default::default()
            }]),
        };
        Api::<ClusterRoleBinding>::all(admin.clone())
            .patch(GROUP, &pp, &Patch::Apply(&binding))
            .await?;
        // Discovery needs a moment after Established.
        let bss: Api<BookStore> = Api::all(admin.clone());
        for _ in 0..50 {
            if bss.list(&ListParams::default()).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let agent = NodeAgent::start(admin.clone(), NodeAgentConfig::default());
        Ok(Env {
            args: args.clone(),
            cp,
            admin,
            _agent: agent,
        })
    }

    /// The user a bosun `identity` acts as.
    pub fn user(identity: &str) -> String {
        format!("system:serviceaccount:bosun-system:{identity}")
    }

    /// A kubeconfig acting as `identity` (the admin credentials, impersonating).
    pub fn kubeconfig_as(&self, identity: &str) -> anyhow::Result<PathBuf> {
        let admin = std::fs::read_to_string(self.cp.kubeconfig())?;
        let user = Env::user(identity);
        let yaml = admin.replacen(
            "  user:\n",
            &format!("  user:\n    as: {user}\n    as-groups: [{GROUP}, system:authenticated]\n"),
            1,
        );
        let path = self.cp.dir().join(format!("kubeconfig-{identity}"));
        std::fs::write(&path, yaml)?;
        Ok(path)
    }

    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<String> {
        Ok(test_namespace(&self.admin, prefix).await?)
    }

    pub fn bookstores(&self, ns: &str) -> Api<BookStore> {
        Api::namespaced(self.admin.clone(), ns)
    }

    /// Creates BookStores (`spec: {}`) named `names`, 16 at a time.
    pub async fn create(&self, ns: &str, names: &[String]) -> anyhow::Result<()> {
        let api = self.bookstores(ns);
        stream::iter(names.iter().cloned())
            .map(|name| {
                let api = api.clone();
                async move {
                    let bs = BookStore::new(&name, Default::default());
                    api.create(&PostParams::default(), &bs).await.map(|_| ())
                }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }

    /// BookStores of `names` that are Ready for their current generation.
    pub async fn ready(&self, ns: &str, names: &[String]) -> anyhow::Result<usize> {
        let list = self.bookstores(ns).list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .filter(|b| names.contains(&b.name_any()))
            .filter(|b| {
                b.status.as_ref().is_some_and(|s| {
                    s.observed_generation == b.metadata.generation
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count())
    }

    /// Waits until every BookStore of `names` is Ready; the time it took.
    pub async fn wait_ready(
        &self,
        ns: &str,
        names: &[String],
        limit: Duration,
    ) -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        loop {
            let n = self.ready(ns, names).await.unwrap_or(0);
            if n == names.len() {
                return Ok(t0.elapsed());
            }
            anyhow::ensure!(
                t0.elapsed() < limit,
                "{n} of {} BookStores Ready in {ns} after {limit:?}",
                names.len()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Every child of every BookStore exists exactly once, controlled by its BookStore, and
    /// each has its one claim, labelled with its UID; nothing else. The problems found.
    pub async fn check_children(&self, ns: &str, names: &[String]) -> anyhow::Result<Vec<String>> {
        let mut problems = Vec::new();
        let uids: BTreeMap<String, String> = self
            .bookstores(ns)
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|b| (b.name_any(), b.uid().unwrap_or_default()))
            .collect();
        let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut count = |kind: &str, items: Vec<(String, Option<String>)>| {
            for (name, owner) in items {
                owners
                    .entry(format!("{kind}/{name}"))
                    .or_default()
                    .push(owner.unwrap_or_default());
            }
        };
        let controller = |m: &ObjectMeta| {
            m.owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone())
        };
        let lp = ListParams::default();
        count(
            "deployment",
            Api::<Deployment>::namespaced(self.admin.clone(), ns)
                .list_metadata(&lp)
                .await?
                .items
                .iter()
                .map(|d| (d.name_any(), controller(&d.metadata)))
                .collect(),
        );
        count(
            "statefulset",
            Api::<StatefulSet>::namespaced(self.admin.clone(), ns)
                .list_metadata(&lp)
                .await?
                .items
                .iter()
                .map(|d| (d.name_any(), controller(&d.metadata)))
                .collect(),
        );
        count(
            "service",
            Api::<Service>::namespaced(self.admin.clone(), ns)
                .list_metadata(&lp)
                .await?
                .items
                .iter()
                .map(|d| (d.name_any(), controller(&d.metadata)))
                .collect(),
        );
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.admin.clone(), ns)
            .list_metadata(&lp)
            .await?
            .items;
        for name in names {
            let uid = uids.get(name).cloned().unwrap_or_default();
            for child in [
                format!("deployment/{name}-app"),
                format!("statefulset/{name}-mongodb"),
                format!("service/{name}-app"),
                format!("service/{name}-mongodb"),
                format!("service/{name}-mongodb-headless"),
            ] {
                match owners.remove(&child) {
                    Some(o) if o == vec![uid.clone()] => {}
                    Some(o) => problems.push(format!("{child}: controllers {o:?}, want {uid}")),
                    None => problems.push(format!("{child}: missing")),
                }
            }
            let claim = format!("data-{name}-mongodb-0");
            match claims.iter().find(|c| c.name_any() == claim) {
                Some(c) if c.labels().get("bookstore.bosun.dev/owner-uid") == Some(&uid) => {}
                Some(_) => problems.push(format!("{claim}: not labelled with {uid}")),
                None => problems.push(format!("{claim}: lost")),
            }
        }
        for extra in owners.keys() {
            problems.push(format!("{extra}: not a child of any BookStore"));
        }
        if claims.len() != names.len() {
            problems.push(format!(
                "{} claims for {} BookStores",
                claims.len(),
                names.len()
            ));
        }
        Ok(problems)
    }

    /// Mutating requests in the audit log (completed ones) since `since`, as (user, verb,
    /// resource, time in microseconds since the epoch, response code).
    pub fn writes_since(&self, since: i64) -> anyhow::Result<Vec<Write>> {
        let Some(path) = self.cp.audit_log() else {
            return Ok(Vec::new());
        };
        let text = std::fs::read_to_string(path)?;
        let mut out = Vec::new();
        for line in text.lines() {
            let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if ev["stage"] != "ResponseComplete" {
                continue;
            }
            let at = ev["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|t| t.as_microsecond())
                .unwrap_or(0);
            if at < since {
                continue;
            }
            let user = ev["impersonatedUser"]["username"]
                .as_str()
                .or(ev["user"]["username"].as_str())
                .unwrap_or("")
                .to_string();
            let mut resource = ev["objectRef"]["resource"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if let Some(sub) = ev["objectRef"]["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            out.push(Write {
                user,
                verb: ev["verb"].as_str().unwrap_or("").to_string(),
                resource,
                at,
                code: ev["responseStatus"]["code"].as_u64().unwrap_or(0),
            });
        }
        out.sort_by_key(|w| w.at);
        Ok(out)
    }
}

/// One mutating request, from the audit log.
#[derive(Clone, Debug)]
pub struct Write {
    pub user: String,
    pub verb: String,
    pub resource: String,
    pub at: i64,
    pub code: u64,
}

/// Now, in microseconds since the epoch (the audit log's clock: the same machine).
pub fn now_us() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_microsecond()
}

/// The writes of one user, leases left out (a leader renews its lease whatever it does).
pub fn writes_by<'a>(writes: &'a [Write], user: &str) -> Vec<&'a Write> {
    writes
        .iter()
        .filter(|w| w.user == user && !w.resource.starts_with("leases"))
        .collect()
}

/// `n` names `prefix-0` ...
pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}
