//! What a render knows of the live cluster, as helm-operator's action configuration gives it
//! to Helm (review H2, H3):
//!
//! * [`ClusterView`]: `.Capabilities` — the API server's version and every served
//!   `group/version` and `group/version/Kind` from discovery, CRDs included, read again once
//!   it is older than [`ClusterView::TTL`] so a CRD installed or removed shows up on the next
//!   reconcile after that (the default reconcile period brings one within a minute);
//! * [`ApiLookup`]: `lookup` reading the cluster with the operator's own credentials (so
//!   only what its RBAC allows), for entries with `dryRunOption: server` — operator-sdk's
//!   documented fix for charts that reuse generated passwords. Other entries keep `lookup`
//!   empty, as `helm template` does.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bosun_helm::chart::capabilities::version_set;
use bosun_helm::render::lookup::Lookup;
use bosun_helm::value::Data;
use bosun_runtime::dynamic::Discovery;
use kube::api::{Api, ListParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::Client;

/// The cluster's version and served APIs, as `.Capabilities` shows them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// `.Capabilities.KubeVersion` (the server's `gitVersion`).
    pub kube_version: Option<String>,
    /// `.Capabilities.APIVersions`: every `g/v` and `g/v/Kind` served.
    pub api_versions: Vec<String>,
}

/// A cached [`Snapshot`] of one cluster, shared by every chart entry.
pub struct ClusterView {
    client: Client,
    held: Mutex<Option<(Instant, Arc<Snapshot>)>>,
}

impl ClusterView {
    /// How long a snapshot is used before discovery runs again.
    pub const TTL: Duration = Duration::from_secs(10);

    pub fn new(client: Client) -> Self {
        ClusterView {
            client,
            held: Mutex::new(None),
        }
    }

    /// The current snapshot; None when the cluster could never be read (the render then
    /// uses Helm's defaults, and the failure is logged). A failed refresh keeps the last
    /// snapshot.
    pub async fn snapshot(&self) -> Option<Arc<Snapshot>> {
        let cached = self.lock().clone();
        if let Some((at, s)) = &cached {
            if at.elapsed() < Self::TTL {
                return Some(s.clone());
            }
        }
        match read(&self.client).await {
            Ok(s) => {
                let s = Arc::new(s);
                *self.lock() = Some((Instant::now(), s.clone()));
                Some(s)
            }
            Err(e) => {
                tracing::warn!(error = %e, "discovery failed: .Capabilities keeps its last known value");
                cached.map(|(_, s)| s)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, Arc<Snapshot>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn read(client: &Client) -> Result<Snapshot, kube::Error> {
    let version = client.apiserver_version().await?;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await?;
    let mut served: Vec<(String, Vec<String>)> = Vec::new();
    for group in discovery.groups() {
        for v in group.versions() {
            let gv = if group.name().is_empty() {
                v.to_string()
            } else {
                format!("{}/{v}", group.name())
            };
            let kinds = group
                .versioned_resources(v)
                .into_iter()
                .map(|(ar, _)| ar.kind)
                .collect();
            served.push((gv, kinds));
        }
    }
    let api_versions = version_set(
        served
            .iter()
            .map(|(gv, ks)| (gv.as_str(), ks.iter().map(String::as_str).collect())),
    );
    Ok(Snapshot {
        kube_version: Some(version.git_version),
        api_versions,
    })
}

/// `lookup` against the API server, blocking on the runtime the render was started from
/// (renders run in `block_in_place`).
pub struct ApiLookup {
    client: Client,
    discovery: Discovery,
    handle: tokio::runtime::Handle,
}

impl ApiLookup {
    pub fn new(client: Client, discovery: Discovery, handle: tokio::runtime::Handle) -> Self {
        ApiLookup {
            client,
            discovery,
            handle,
        }
    }

    async fn read(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, String> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let resolved = match self.discovery.resolve(&gvk).await {
            Ok(r) => r,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(describe(api_version, kind, name, &e)),
        };
        let ar = &resolved.resource;
        let api: Api<DynamicObject> = if resolved.namespaced && !namespace.is_empty() {
            Api::namespaced_with(self.client.clone(), namespace, ar)
        } else {
            Api::all_with(self.client.clone(), ar)
        };
        if !name.is_empty() {
            return match api.get_opt(name).await {
                Ok(o) => o
                    .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
                    .transpose(),
                Err(e) => Err(describe(api_version, kind, name, &e)),
            };
        }
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| describe(api_version, kind, name, &e))?;
        let items = list
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(serde_json::json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": list.metadata.resource_version.unwrap_or_default()},
            "items": items,
        })))
    }
}

/// An API error as a render error: the kind, the name and the API server's reason — never
/// the object (a Secret's data must not reach a condition).
fn describe(api_version: &str, kind: &str, name: &str, e: &kube::Error) -> String {
    let what = if name.is_empty() {
        format!("{kind} ({api_version}) list")
    } else {
        format!("{kind} ({api_version}) {name:?}")
    };
    match e {
        kube::Error::Api(s) => format!("{what}: {} {}", s.code, s.reason),
        other => format!("{what}: {other}"),
    }
}

impl Lookup for ApiLookup {
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Data>, String> {
        let v = self
            .handle
            .block_on(self.read(api_version, kind, namespace, name))?;
        Ok(v.as_ref().map(Data::from))
    }
}
