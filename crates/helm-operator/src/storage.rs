//! Where releases are recorded.
//!
//! * [`Storage::Secrets`] (default): Helm's own format in the release's namespace (see
//!   [`crate::release`]), each Secret owned by the custom resource so history goes with it,
//!   history bounded (10 revisions by default, as helm-operator-plugins does). Needs
//!   `get,list,create,update,delete` on Secrets where CRs are watched.
//! * [`Storage::ConfigMaps`]: the same records as ConfigMaps (Helm's `configmap` driver,
//!   `HELM_DRIVER=configmap`), for clusters where the operator may not hold Secrets. A
//!   release's values are then readable by whoever reads ConfigMaps.
//! * [`Storage::None`]: no Secrets at all. The inventory of what the release created
//!   (apiVersion/kind/namespace/name, never the manifest) is kept in the custom resource's
//!   status; the Helm CLI then does not see the release.
use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};

use crate::release::{self, Release};

/// Label values Helm sets on release Secrets.
pub const OWNER_LABEL: &str = "owner";
pub const OWNER_HELM: &str = "helm";
pub const RELEASE_TYPE: &str = "helm.sh/release.v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Storage {
    #[default]
    Secrets,
    ConfigMaps,
    None,
}

impl std::str::FromStr for Storage {
    type Err = String;
    fn from_str(s: &str) -> Result<Storage, String> {
        match s {
            "secret" | "secrets" => Ok(Storage::Secrets),
            "configmap" | "configmaps" => Ok(Storage::ConfigMaps),
            "none" => Ok(Storage::None),
            other => Err(format!(
                "unknown release storage {other:?} (secret, configmap or none)"
            )),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("release storage: {0}")]
    Kube(#[from] kube::Error),
    #[error("release record {key}: {source}")]
    Codec {
        key: String,
        source: release::CodecError,
    },
}

/// What [`Secrets::lookup`] found of one release name.
#[derive(Debug, Default)]
pub struct Lookup {
    /// The owner's revisions, oldest first.
    pub history: Vec<Release>,
    /// `<Kind> <name>` of another custom resource holding records of that name: the release
    /// name is taken by another custom resource of the same chart.
    pub foreign_owner: Option<String>,
}

/// What a release record is kept in: a Secret or a ConfigMap, `release` in its data.
pub trait RecordObject:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The encoded release it holds.
    fn release(&self) -> Option<String>;
    /// A record object holding the encoded release `data`.
    fn holding(metadata: ObjectMeta, data: String) -> Self;
}

impl RecordObject for Secret {
    fn release(&self) -> Option<String> {
        self.data
            .as_ref()
            .and_then(|d| d.get("release"))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
    }
    fn holding(metadata: ObjectMeta, data: String) -> Secret {
        Secret {
            metadata,
            type_: Some(RELEASE_TYPE.to_string()),
            data: Some(BTreeMap::from([(
                "release".to_string(),
                ByteString(data.into_bytes()),
            )])),
            ..Default::default()
        }
    }
}

impl RecordObject for ConfigMap {
    fn release(&self) -> Option<String> {
        self.data.as_ref().and_then(|d| d.get("release")).cloned()
    }
    fn holding(metadata: ObjectMeta, data: String) -> ConfigMap {
        ConfigMap {
            metadata,
            data: Some(BTreeMap::from([("release".to_string(), data)])),
            ..Default::default()
        }
    }
}

/// The release records of one namespace, as Helm's Secrets or ConfigMaps driver keeps them.
pub struct KubeRecords<K> {
    api: Api<K>,
}

/// Helm's Secrets driver (the default).
pub type Secrets = KubeRecords<Secret>;
/// Helm's ConfigMaps driver.
pub type ConfigMaps = KubeRecords<ConfigMap>;

impl<K: RecordObject> KubeRecords<K> {
    pub fn new(client: Client, namespace: &str) -> KubeRecords<K> {
        KubeRecords {
            api: Api::namespaced(client, namespace),
        }
    }

    /// Every recorded revision of `name` that belongs to `owner`, oldest first: records it
    /// owns, and records owned by nothing (written by the helm CLI, taken over). Records of
    /// another owner are another custom resource's release of the same name (review L10): see
    /// [`Secrets::lookup`]. Records that do not decode are skipped with a warning (Helm
    /// does the same).
    pub async fn history(
        &self,
        name: &str,
        owner: &OwnerReference,
    ) -> Result<Vec<Release>, StorageError> {
        Ok(self.lookup(name, owner).await?.history)
    }

    /// [`Secrets::history`] and the owner of a record of `name` that is not `owner`, from
    /// one LIST.
    pub async fn lookup(&self, name: &str, owner: &OwnerReference) -> Result<Lookup, StorageError> {
        let mut out = Lookup::default();
        for (r, o) in self.records(name).await? {
            match o {
                Some(o) if !same_owner(&o, owner) => {
                    if out.foreign_owner.is_none() {
                        out.foreign_owner = Some(format!("{} {}", o.kind, o.name));
                    }
                }
                _ => out.history.push(r),
            }
        }
        Ok(out)
    }

    async fn records(
        &self,
        name: &str,
    ) -> Result<Vec<(Release, Option<OwnerReference>)>, StorageError> {
        let lp = ListParams::default().labels(&format!("{OWNER_LABEL}={OWNER_HELM},name={name}"));
        let mut out = Vec::new();
        for s in self.api.list(&lp).await?.items {
            let Some(data) = s.release() else {
                continue;
            };
            match release::decode(&data) {
                Ok(r) if r.name == name => {
                    let owner = s
                        .meta()
                        .owner_references
                        .as_ref()
                        .and_then(|o| o.iter().find(|o| o.controller == Some(true)).or(o.first()))
                        .cloned();
                    out.push((r, owner))
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(secret = %s.name_any(), error = %e, "release record does not decode; skipped")
                }
            }
        }
        out.sort_by_key(|(r, _)| r.version);
        Ok(out)
    }

    fn object(
        &self,
        r: &Release,
        owner: Option<&OwnerReference>,
        time_label: (&str, String),
    ) -> Result<K, StorageError> {
        let key = r.key();
        let data = release::encode(r).map_err(|source| StorageError::Codec {
            key: key.clone(),
            source,
        })?;
        let labels = BTreeMap::from([
            ("name".to_string(), r.name.clone()),
            (OWNER_LABEL.to_string(), OWNER_HELM.to_string()),
            ("status".to_string(), r.info.status.clone()),
            ("version".to_string(), r.version.to_string()),
            (time_label.0.to_string(), time_label.1),
        ]);
        Ok(K::holding(
            ObjectMeta {
                name: Some(key),
                labels: Some(labels),
                owner_references: owner.map(|o| vec![o.clone()]),
                ..Default::default()
            },
            data,
        ))
    }

    /// Records a new revision (Helm's `Create`).
    pub async fn create(
        &self,
        r: &Release,
        owner: Option<&OwnerReference>,
    ) -> Result<(), StorageError> {
        let s = self.object(r, owner, ("createdAt", now_unix()))?;
        self.api.create(&PostParams::default(), &s).await?;
        Ok(())
    }

    /// Rewrites a revision (Helm's `Update`: a new status, say), keeping its owner.
    pub async fn update(
        &self,
        r: &Release,
        owner: Option<&OwnerReference>,
    ) -> Result<(), StorageError> {
        let s = self.object(r, owner, ("modifiedAt", now_unix()))?;
        self.api
            .replace(&r.key(), &PostParams::default(), &s)
            .await?;
        Ok(())
    }

    /// Deletes one revision; gone already is fine.
    pub async fn delete(&self, r: &Release) -> Result<(), StorageError> {
        match self.api.delete(&r.key(), &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Where one namespace's release revisions are kept: the one interface the reconcile writes
/// records through, whatever `--release-storage` says.
pub trait Records: Send + Sync {
    /// The revisions of `name` that belong to `owner` (oldest first), and the owner of a
    /// record of that name that is not `owner`, if any.
    fn lookup<'a>(
        &'a self,
        name: &'a str,
        owner: &'a OwnerReference,
    ) -> BoxFuture<'a, Result<Lookup, StorageError>>;
    /// Records a new revision.
    fn create<'a>(
        &'a self,
        r: &'a Release,
        owner: Option<&'a OwnerReference>,
    ) -> BoxFuture<'a, Result<(), StorageError>>;
    /// Rewrites a revision (a new status).
    fn update<'a>(
        &'a self,
        r: &'a Release,
        owner: Option<&'a OwnerReference>,
    ) -> BoxFuture<'a, Result<(), StorageError>>;
    /// Deletes a revision; gone already is fine.
    fn delete<'a>(&'a self, r: &'a Release) -> BoxFuture<'a, Result<(), StorageError>>;
}

impl<K: RecordObject> Records for KubeRecords<K> {
    fn lookup<'a>(
        &'a self,
        name: &'a str,
        owner: &'a OwnerReference,
    ) -> BoxFuture<'a, Result<Lookup, StorageError>> {
        Box::pin(KubeRecords::lookup(self, name, owner))
    }
    fn create<'a>(
        &'a self,
        r: &'a Release,
        owner: Option<&'a OwnerReference>,
    ) -> BoxFuture<'a, Result<(), StorageError>> {
        Box::pin(KubeRecords::create(self, r, owner))
    }
    fn update<'a>(
        &'a self,
        r: &'a Release,
        owner: Option<&'a OwnerReference>,
    ) -> BoxFuture<'a, Result<(), StorageError>> {
        Box::pin(KubeRecords::update(self, r, owner))
    }
    fn delete<'a>(&'a self, r: &'a Release) -> BoxFuture<'a, Result<(), StorageError>> {
        Box::pin(KubeRecords::delete(self, r))
    }
}

/// `--release-storage=none`: nothing is recorded and nothing is found (the custom resource's
/// status holds the inventory instead).
pub struct NoRecords;

impl Records for NoRecords {
    fn lookup<'a>(
        &'a self,
        _name: &'a str,
        _owner: &'a OwnerReference,
    ) -> BoxFuture<'a, Result<Lookup, StorageError>> {
        Box::pin(async { Ok(Lookup::default()) })
    }
    fn create<'a>(
        &'a self,
        _r: &'a Release,
        _owner: Option<&'a OwnerReference>,
    ) -> BoxFuture<'a, Result<(), StorageError>> {
        Box::pin(async { Ok(()) })
    }
    fn update<'a>(
        &'a self,
        _r: &'a Release,
        _owner: Option<&'a OwnerReference>,
    ) -> BoxFuture<'a, Result<(), StorageError>> {
        Box::pin(async { Ok(()) })
    }
    fn delete<'a>(&'a self, _r: &'a Release) -> BoxFuture<'a, Result<(), StorageError>> {
        Box::pin(async { Ok(()) })
    }
}

/// The records of `namespace` as `storage` keeps them.
pub fn records(storage: Storage, client: Client, namespace: &str) -> Box<dyn Records> {
    match storage {
        Storage::Secrets => Box::new(Secrets::new(client, namespace)),
        Storage::ConfigMaps => Box::new(ConfigMaps::new(client, namespace)),
        Storage::None => Box::new(NoRecords),
    }
}

/// The same custom resource: kind, API group (any version: the watches entry may move
/// between versions) and name. A UID differing is the same name recreated; its records are
/// its predecessor's, whose garbage collection may lag, and are taken over as Helm would.
fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    let group = |v: &str| {
        v.rsplit_once('/')
            .map(|(g, _)| g.to_string())
            .unwrap_or_default()
    };
    a.kind == b.kind && a.name == b.name && group(&a.api_version) == group(&b.api_version)
}

fn now_unix() -> String {
    k8s_openapi::jiff::Timestamp::now().as_second().to_string()
}

/// The revisions to delete so that at most `max` remain, oldest first; the deployed one is
/// never among them.
pub fn beyond_history(history: &[Release], max: usize) -> Vec<&Release> {
    if history.len() <= max {
        return Vec::new();
    }
    let excess = history.len() - max;
    history
        .iter()
        .filter(|r| r.info.status != release::status::DEPLOYED)
        .take(excess)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(v: i64, status: &str) -> Release {
        Release {
            name: "a".into(),
            version: v,
            info: release::Info {
                status: status.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn history_is_bounded_without_losing_the_deployed_revision() {
        let h: Vec<Release> = (1..=12)
            .map(|v| rev(v, if v == 12 { "deployed" } else { "superseded" }))
            .collect();
        let gone: Vec<i64> = beyond_history(&h, 10).iter().map(|r| r.version).collect();
        assert_eq!(gone, vec![1, 2]);
        assert!(beyond_history(&h[..5], 10).is_empty());
        let odd = vec![rev(1, "deployed"), rev(2, "failed"), rev(3, "failed")];
        let gone: Vec<i64> = beyond_history(&odd, 1).iter().map(|r| r.version).collect();
        assert_eq!(gone, vec![2, 3]);
    }

    #[test]
    fn storage_names() {
        assert_eq!("none".parse::<Storage>(), Ok(Storage::None));
        assert_eq!("secret".parse::<Storage>(), Ok(Storage::Secrets));
        assert_eq!("configmap".parse::<Storage>(), Ok(Storage::ConfigMaps));
        assert!("sql".parse::<Storage>().is_err());
    }
}
