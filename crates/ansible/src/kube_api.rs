//! The Kubernetes side of the engine: a discovery cache shared by every run (apiVersion +
//! kind → resource and scope, looked up once per group-version), the owner of a run's
//! objects, and ansible-operator's owner-reference injection on create.
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use kube::api::{Api, ApiResource, DynamicObject};
use kube::Client;
use serde_json::{json, Value as Json};

use crate::engine::RunContext;

/// A resolved kind.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub subresources: Vec<String>,
}

/// apiVersion/kind → resource, cached per group-version.
#[derive(Debug, Default)]
pub struct Discovery {
    cache: RwLock<HashMap<String, Arc<HashMap<String, Resolved>>>>,
}

impl Discovery {
    pub fn new() -> Discovery {
        Discovery::default()
    }

    /// The resource for `api_version`/`kind`; one discovery request per group-version, the
    /// first time (or again when a kind is missing: a CRD may have been added since).
    pub async fn resolve(
        &self,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Resolved, String> {
        self.resolve_opt(client, api_version, kind)
            .await?
            .ok_or_else(|| format!("Failed to find exact match for {api_version}.{kind} by [kind, name, singularName, shortNames]"))
    }

    /// [`Discovery::resolve`], with `None` when the API server does not serve the kind (its
    /// group-version is unknown, or does not have it); `Err` for other failures.
    pub async fn resolve_opt(
        &self,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Resolved>, String> {
        if let Some(r) = self
            .cache
            .read()
            .ok()
            .and_then(|c| c.get(api_version).and_then(|m| m.get(kind).cloned()))
        {
            return Ok(Some(r));
        }
        let list = match if api_version.contains('/') {
            client.list_api_group_resources(api_version).await
        } else {
            client.list_core_api_resources(api_version).await
        } {
            Ok(list) => list,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(format!("Failed to find exact match for {api_version}.{kind} by [kind, name, singularName, shortNames]: {e}")),
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let mut kinds: HashMap<String, Resolved> = HashMap::new();
        for r in &list.resources {
            let (plural, sub) = match r.name.split_once('/') {
                Some((p, s)) => (p, Some(s)),
                None => (r.name.as_str(), None),
            };
            if let Some(s) = sub {
                if let Some(k) = kinds.values_mut().find(|k| k.resource.plural == plural) {
                    k.subresources.push(s.to_string());
                }
                continue;
            }
            kinds.insert(
                r.kind.clone(),
                Resolved {
                    resource: ApiResource {
                        group: group.into(),
                        version: version.into(),
                        api_version: api_version.into(),
                        kind: r.kind.clone(),
                        plural: plural.into(),
                    },
                    namespaced: r.namespaced,
                    subresources: Vec::new(),
                },
            );
        }
        // Subresources may be listed before their parent.
        for r in &list.resources {
            if let Some((plural, s)) = r.name.split_once('/') {
                if let Some(k) = kinds.values_mut().find(|k| k.resource.plural == plural) {
                    if !k.subresources.iter().any(|x| x == s) {
                        k.subresources.push(s.to_string());
                    }
                }
            }
        }
        let found = kinds.get(kind).cloned();
        if let Ok(mut c) = self.cache.write() {
            c.insert(api_version.to_string(), Arc::new(kinds));
        }
        Ok(found)
    }

    /// `lookup('k8s', cluster_info='api_groups')` as kubernetes.core answers it: the
    /// discovery client's group names under `/apis`, the empty group first.
    pub async fn api_groups(client: &Client) -> Result<Vec<String>, String> {
        let groups = client
            .list_api_groups()
            .await
            .map_err(|e| format!("Failed to list the API groups: {e}"))?;
        Ok(std::iter::once(String::new())
            .chain(groups.groups.into_iter().map(|g| g.name))
            .collect())
    }

    /// `lookup('k8s', cluster_info='version')` as kubernetes.core answers it:
    /// `{kubernetes: <the server's /version>}`.
    pub async fn version(client: &Client) -> Result<Json, String> {
        let v = client
            .apiserver_version()
            .await
            .map_err(|e| format!("Failed to read the server version: {e}"))?;
        Ok(json!({"kubernetes": v}))
    }

    pub fn api(client: &Client, r: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match (r.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &r.resource),
            _ => Api::all_with(client.clone(), &r.resource),
        }
    }
}

/// The custom resource a run reconciles.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// None for a cluster-scoped CR.
    pub namespace: Option<String>,
    pub uid: String,
    /// Its status when the run started (to tell whether `k8s_status` changes anything).
    pub status: Option<Json>,
    /// The whole object as the run started.
    pub object: Json,
    /// The labels every object the run creates gets, and every update of one of the CR's
    /// children ([`Owner::label_update`]): the CR's shard label when sharding is on (the
    /// runtime decides them, `bosun_runtime::shard::child_labels`), so its member's child
    /// caches see the object from its create on, and a child follows a CR that moved.
    pub child_labels: BTreeMap<String, String>,
}

impl Owner {
    pub fn from_object(obj: &Json) -> Option<Owner> {
        let m = obj.get("metadata")?;
        Some(Owner {
            api_version: obj.get("apiVersion")?.as_str()?.to_string(),
            kind: obj.get("kind")?.as_str()?.to_string(),
            name: m.get("name")?.as_str()?.to_string(),
            namespace: m
                .get("namespace")
                .and_then(Json::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from),
            uid: m
                .get("uid")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string(),
            status: obj.get("status").cloned(),
            object: obj.clone(),
            child_labels: BTreeMap::new(),
        })
    }

    /// This owner, its children labelled with `labels` when created.
    pub fn labelling(mut self, labels: BTreeMap<String, String>) -> Owner {
        self.child_labels = labels;
        self
    }

    /// Whether `live` is a child of this CR: it names it in an owner reference (by uid), or
    /// in the `operator-sdk/primary-resource` annotations [`Owner::inject`] writes where an
    /// owner reference cannot go.
    pub fn owns(&self, live: &Json) -> bool {
        let by_ref = live
            .pointer("/metadata/ownerReferences")
            .and_then(Json::as_array)
            .is_some_and(|refs| {
                !self.uid.is_empty()
                    && refs
                        .iter()
                        .any(|r| r.get("uid").and_then(Json::as_str) == Some(self.uid.as_str()))
            });
        let ann = |k: &str| {
            live.pointer("/metadata/annotations")
                .and_then(|a| a.get(k))
                .and_then(Json::as_str)
        };
        let primary = format!(
            "{}/{}",
            self.namespace.clone().unwrap_or_default(),
            self.name
        );
        let kind = format!("{}.{}", self.kind, self.group());
        by_ref
            || (ann("operator-sdk/primary-resource") == Some(primary.as_str())
                && ann("operator-sdk/primary-resource-type") == Some(kind.as_str()))
    }

    /// The labels an update of `live` must carry so it keeps its owner's current shard: the
    /// child labels it lacks or holds with another value (a child created on the member its
    /// CR was moved away from), when it is a child of this CR ([`Owner::owns`]). None when
    /// nothing is missing, unsharded, or not a child: an object the role merely updates is
    /// not this CR's to place.
    pub fn missing_labels(&self, live: &Json) -> Option<BTreeMap<String, String>> {
        if self.child_labels.is_empty() || !self.owns(live) {
            return None;
        }
        let have = live.pointer("/metadata/labels");
        let missing = self
            .child_labels
            .iter()
            .any(|(k, v)| have.and_then(|l| l.get(k)).and_then(Json::as_str) != Some(v));
        missing.then(|| self.child_labels.clone())
    }

    /// Puts the child labels in `obj`'s metadata when `live` lacks them
    /// ([`Owner::missing_labels`]); whether it did.
    pub fn label_update(&self, obj: &mut Json, live: &Json) -> bool {
        let Some(labels) = self.missing_labels(live) else {
            return false;
        };
        let Some(o) = obj.as_object_mut() else {
            return false;
        };
        let meta = o.entry("metadata").or_insert_with(|| json!({}));
        if !meta.is_object() {
            *meta = json!({});
        }
        match meta.as_object_mut() {
            Some(m) => {
                put_labels(m, &labels);
                true
            }
            None => false,
        }
    }

    /// JSON-patch operations that set the child labels `live` lacks (a `json` merge type
    /// cannot take them as fields).
    pub fn label_ops(&self, live: &Json) -> Vec<Json> {
        let Some(labels) = self.missing_labels(live) else {
            return Vec::new();
        };
        if live
            .pointer("/metadata/labels")
            .is_some_and(Json::is_object)
        {
            labels
                .iter()
                .map(|(k, v)| {
                    let key = k.replace('~', "~0").replace('/', "~1");
                    json!({"op": "add", "path": format!("/metadata/labels/{key}"), "value": v})
                })
                .collect()
        } else {
            vec![json!({"op": "add", "path": "/metadata/labels", "value": labels})]
        }
    }

    fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(g, _)| g)
    }

    /// Whether the object `api_version`/`kind`/`name`/`namespace` is this CR.
    pub fn is(&self, api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> bool {
        self.api_version == api_version
            && self.kind == kind
            && self.name == name
            && self.namespace.as_deref() == namespace.filter(|n| !n.is_empty())
    }

    /// What ansible-operator's proxy adds to an object it creates: an owner reference when
    /// the owner is cluster-scoped or in the object's namespace, otherwise the
    /// `operator-sdk/primary-resource` annotations (such objects are not garbage-collected).
    pub fn inject(&self, obj: &mut Json, dependent_namespaced: bool) {
        let dep_ns = obj
            .pointer("/metadata/namespace")
            .and_then(Json::as_str)
            .map(String::from);
        let supports = match &self.namespace {
            None => true,
            Some(ns) => dependent_namespaced && dep_ns.as_deref() == Some(ns.as_str()),
        };
        let Some(meta) = obj.get_mut("metadata").and_then(Json::as_object_mut) else {
            return;
        };
        put_labels(meta, &self.child_labels);
        if supports {
            let refs = meta.entry("ownerReferences").or_insert_with(|| json!([]));
            if let Some(a) = refs.as_array_mut() {
                a.push(json!({"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}));
            }
        } else {
            let ann = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = ann.as_object_mut() {
                a.insert(
                    "operator-sdk/primary-resource".into(),
                    json!(format!(
                        "{}/{}",
                        self.namespace.clone().unwrap_or_default(),
                        self.name
                    )),
                );
                a.insert(
                    "operator-sdk/primary-resource-type".into(),
                    json!(format!("{}.{}", self.kind, self.group())),
                );
            }
        }
    }
}

/// Sets `labels` in an object's metadata (a `labels` that is not a mapping is replaced).
fn put_labels(meta: &mut serde_json::Map<String, Json>, labels: &BTreeMap<String, String>) {
    if labels.is_empty() {
        return;
    }
    let l = meta.entry("labels").or_insert_with(|| json!({}));
    if !l.is_object() {
        *l = json!({});
    }
    if let Some(l) = l.as_object_mut() {
        for (k, v) in labels {
            l.insert(k.clone(), json!(v));
        }
    }
}

/// `lookup('k8s')` on the run's client, blocking the (multi-threaded) runtime's worker while
/// it waits, as templates are evaluated synchronously.
pub struct LookupRuntime {
    client: Option<Client>,
    discovery: Arc<Discovery>,
    /// The run's own CR (its uid) and what `k8s_status` asked for it so far.
    owner_uid: String,
    own_status: Arc<std::sync::Mutex<Option<crate::engine::StatusRequest>>>,
}

impl std::fmt::Debug for LookupRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LookupRuntime")
    }
}

impl LookupRuntime {
    pub fn new(ctx: &RunContext) -> LookupRuntime {
        LookupRuntime {
            client: ctx.client.clone(),
            discovery: ctx.discovery.clone(),
            owner_uid: ctx
                .owner
                .as_ref()
                .map(|o| o.uid.clone())
                .unwrap_or_default(),
            own_status: ctx.own_status.clone(),
        }
    }
}

impl crate::template::lookups::Runtime for LookupRuntime {
    fn k8s(&self, params: &serde_json::Map<String, Json>) -> Result<Vec<Json>, String> {
        let client = self
            .client
            .clone()
            .ok_or("lookup('k8s') needs a Kubernetes client")?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| "lookup('k8s') outside a tokio runtime".to_string())?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err("lookup('k8s') needs a multi-threaded tokio runtime".into());
        }
        let discovery = self.discovery.clone();
        let params = params.clone();
        let mut found = tokio::task::block_in_place(|| {
            handle.block_on(async move {
                match params.get("cluster_info").and_then(Json::as_str) {
                    Some("version") => Ok(vec![Discovery::version(&client).await?]),
                    Some("api_groups") => Ok(vec![json!(Discovery::api_groups(&client).await?)]),
                    _ => crate::modules::k8s_info::find(&client, &discovery, &params).await,
                }
            })
        })?;
        crate::engine::overlay(&self.owner_uid, &self.own_status, &mut found);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(member: &str) -> Owner {
        Owner::from_object(&json!({"apiVersion": "test.bosun.dev/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "a", "uid": "u-1"}}))
        .expect("owner")
        .labelling(BTreeMap::from([(
            "shard.bosun.dev/widgets".to_string(),
            member.to_string(),
        )]))
    }

    fn child(labels: Json) -> Json {
        json!({"metadata": {"name": "c", "labels": labels,
            "ownerReferences": [{"apiVersion": "test.bosun.dev/v1", "kind": "Widget", "name": "w", "uid": "u-1"}]}})
    }

    #[test]
    fn children_are_known_by_owner_reference_or_annotations() {
        let o = owner("r1");
        assert!(o.owns(&child(json!({}))));
        let annotated = json!({"metadata": {"annotations": {
            "operator-sdk/primary-resource": "a/w",
            "operator-sdk/primary-resource-type": "Widget.test.bosun.dev"}}});
        assert!(o.owns(&annotated));
        let elsewhere = json!({"metadata": {"annotations": {
            "operator-sdk/primary-resource": "b/w",
            "operator-sdk/primary-resource-type": "Widget.test.bosun.dev"}}});
        assert!(!o.owns(&elsewhere));
        assert!(!o.owns(&json!({"metadata": {"ownerReferences": [{"uid": "u-2"}]}})));
    }

    #[test]
    fn an_update_sets_only_the_labels_a_child_lacks() {
        let o = owner("r2");
        let mut patch = json!({"data": {"k": "v"}});
        assert!(o.label_update(&mut patch, &child(json!({"shard.bosun.dev/widgets": "r1"}))));
        assert_eq!(
            patch,
            json!({"data": {"k": "v"}, "metadata": {"labels": {"shard.bosun.dev/widgets": "r2"}}})
        );
        // Already on its member, not a child, or unsharded: nothing added.
        let mut p = json!({});
        assert!(!o.label_update(&mut p, &child(json!({"shard.bosun.dev/widgets": "r2"}))));
        assert!(!o.label_update(&mut p, &json!({"metadata": {"name": "c"}})));
        let unsharded = owner("r2").labelling(BTreeMap::new());
        assert!(!unsharded.label_update(&mut p, &child(json!({}))));
        assert_eq!(p, json!({}));
    }

    #[test]
    fn a_json_patch_gets_operations_for_the_missing_labels() {
        let o = owner("r2");
        assert_eq!(
            o.label_ops(&child(json!({"app": "x"}))),
            vec![
                json!({"op": "add", "path": "/metadata/labels/shard.bosun.dev~1widgets", "value": "r2"})
            ]
        );
        let mut bare = child(Json::Null);
        if let Some(m) = bare["metadata"].as_object_mut() {
            m.remove("labels");
        }
        assert_eq!(
            o.label_ops(&bare),
            vec![
                json!({"op": "add", "path": "/metadata/labels", "value": {"shard.bosun.dev/widgets": "r2"}})
            ]
        );
        assert!(o
            .label_ops(&child(json!({"shard.bosun.dev/widgets": "r2"})))
            .is_empty());
    }
}
