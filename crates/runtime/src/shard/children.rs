//! The child caches of one controller, as its hand-off and its sharder round see them: a
//! registry that grows while the controller runs. Coded operators wire their child caches
//! before the controller starts; the Helm and Ansible flavours start one per kind at run time
//! ([`crate::dynamic::DynamicChildren`]: warm kinds with the controller, others on a
//! reconcile's first use). Either way a cache joins the registry through [`ChildRegistry::join`]
//! before its watches start, which is where the one decision is taken: counted in
//! `bosun_cached_children`, and, sharded, given the selectors of [`super::child_selectors`].
//! A hand-off or a takeover then reads the kinds started so far, not a list fixed at start.
//!
//! Each kind that joins is also noted in the process's [`super::record::Record`], which its
//! Leases carry to the other replicas: the kinds recorded for this controller and not joined
//! here ([`ChildRegistry::unstarted`]) are warmed by the flavours' caches and listed once by
//! a move ([`ChildRegistry::listed_children_of`]), so a kind met only on another replica
//! still follows its owner.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::api::{Api, ListParams};
use kube::core::{DynamicObject, GroupVersionKind, ObjectMeta, PartialObjectMeta};

use tokio::sync::watch;

use super::kind::ChildKind;
use crate::cache::ChildWatch;

/// One controller's child caches (cheap to clone: shared).
#[derive(Clone)]
pub struct ChildRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    controller: String,
    /// Sharded: this replica's member name.
    member: Option<String>,
    watches: Mutex<Vec<Arc<ChildWatch>>>,
    /// The process's record of child kinds (see [`super::record`]).
    record: super::record::Record,
}

impl ChildRegistry {
    pub(crate) fn new(
        controller: &str,
        member: Option<&str>,
        record: &super::record::Record,
    ) -> Self {
        ChildRegistry {
            inner: Arc::new(Inner {
                controller: controller.to_string(),
                member: member.map(str::to_string),
                watches: Mutex::default(),
                record: record.clone(),
            }),
        }
    }

    /// The controller these caches serve.
    pub fn controller(&self) -> &str {
        &self.inner.controller
    }

    /// The process's record of child kinds.
    pub fn record(&self) -> &super::record::Record {
        &self.inner.record
    }

    /// The kinds recorded for this controller (here or on another replica) whose cache has
    /// not joined here.
    pub fn unstarted(&self) -> Vec<GroupVersionKind> {
        let joined: Vec<GroupVersionKind> = self.lock().iter().map(|w| gvk_of(w)).collect();
        self.inner
            .record
            .kinds_of(&self.inner.controller)
            .into_iter()
            .filter(|k| !joined.contains(k))
            .collect()
    }

    /// Adds a child cache whose watches have not started: counted, and, sharded, selecting
    /// this member's children and the unlabelled ones. False when it was given selectors
    /// already (wired twice): it then keeps those, and is not added again.
    pub(crate) fn join(&self, watch: &Arc<ChildWatch>) -> bool {
        let mut all = self.lock();
        if all.iter().any(|w| Arc::ptr_eq(w, watch)) {
            return false;
        }
        if let Some(member) = &self.inner.member {
            let selectors =
                super::child_selectors(&self.inner.controller, member, &watch.own_selector);
            if !watch.select(selectors) {
                return false;
            }
        }
        crate::cache::count_children(&self.inner.controller, watch);
        all.push(watch.clone());
        drop(all);
        self.inner
            .record
            .note(&self.inner.controller, &gvk_of(watch));
        true
    }

    /// The child caches joined so far.
    pub(crate) fn watches(&self) -> Vec<Arc<ChildWatch>> {
        self.lock().clone()
    }

    /// Where the sharder looks for a taken-over member's children: each cache's kind,
    /// namespace and own selector, as joined so far.
    pub(crate) fn kinds(&self) -> Vec<ChildKind> {
        self.lock()
            .iter()
            .map(|c| ChildKind {
                resource: c.resource.clone(),
                namespace: c.namespace.clone(),
                selector: c.own_selector.clone(),
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<ChildWatch>>> {
        self.inner.watches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a move finds beyond the cached children of `owner` (a `primary_type` object,
    /// `<Kind>.<group>`): the children of kinds recorded but not started here, by a one-off
    /// list of each kind with `member`'s shard label; and those linked to `owner` by
    /// operator-sdk's annotations only (a cluster-scoped child, where no owner reference can
    /// name a namespaced owner, or a Helm or Ansible role's Secret in a shared namespace),
    /// found by scanning the cache of their kind when it watches every namespace (a
    /// cluster-scoped kind's always does): no list of a started kind. Each is relabelled
    /// under the field manager of its label: its cache's applier's where the cache's
    /// fingerprints show the applier holds fields of it, else read from the child.
    pub(crate) async fn listed_children_of(
        &self,
        client: &kube::Client,
        discovery: &crate::dynamic::Discovery,
        member: &str,
        owner: &ObjectMeta,
        primary_type: &str,
    ) -> Result<Vec<Listed>, kube::Error> {
        let key = super::Labels::for_operator(&self.inner.controller).shard;
        let label = format!("{key}={member}");
        let owner_uid = owner.uid.as_deref().unwrap_or_default();
        let owner_key = annotation_key(owner);
        let mut found = Vec::new();
        for gvk in self.unstarted() {
            let r = match discovery.resolve(&gvk).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(kind = %gvk.kind, error = %e, "a recorded child kind is not served: skipped");
                    continue;
                }
            };
            let api: Api<PartialObjectMeta<DynamicObject>> =
                match (r.namespaced, owner.namespace.as_deref()) {
                    // Owner-referenced children live in their owner's namespace.
                    (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &r.resource),
                    _ => Api::all_with(client.clone(), &r.resource),
                };
            let list = api
                .list_metadata(&ListParams::default().labels(&label))
                .await?;
            for c in list.items {
                let by_ref = c
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == owner_uid);
                let by_annotation =
                    annotated_owner(&c.metadata, primary_type).is_some_and(|k| k == owner_key);
                if by_ref || by_annotation {
                    let manager = c
                        .metadata
                        .managed_fields
                        .as_deref()
                        .and_then(|e| crate::owned::label_owner(e, &key))
                        .map(str::to_string);
                    found.push(Listed {
                        resource: r.resource.clone(),
                        namespace: c.metadata.namespace.clone(),
                        name: c.metadata.name.clone().unwrap_or_default(),
                        manager,
                    });
                }
            }
        }
        found.extend(
            self.annotated_in_caches(client, owner, (&owner_key, primary_type), &key)
                .await?,
        );
        Ok(found)
    }

    /// The children `owner` (by `key`, of `primary_type`) has by operator-sdk's annotations
    /// only, from each started cache that watches every namespace (of a namespaced or a
    /// cluster-scoped kind), each with the field manager of its `shard_label`: the cache's
    /// applier's where its fingerprints tell, else read from the child (one metadata GET).
    async fn annotated_in_caches(
        &self,
        client: &kube::Client,
        owner: &ObjectMeta,
        (key, primary_type): (&str, &str),
        shard_label: &str,
    ) -> Result<Vec<Listed>, kube::Error> {
        let uid = owner.uid.as_deref().unwrap_or_default();
        let mut found = Vec::new();
        for w in self.watches() {
            if w.namespace.is_some() {
                continue;
            }
            for named in w.annotated_to(uid, key, primary_type) {
                let manager = match w.cached_label_manager(&named) {
                    Some(m) => Some(m),
                    None => {
                        let api = super::kind::api(client.clone(), &w.resource, named.0.as_deref());
                        let Some(c) = api.get_metadata_opt(&named.1).await? else {
                            continue;
                        };
                        c.metadata
                            .managed_fields
                            .as_deref()
                            .and_then(|e| crate::owned::label_owner(e, shard_label))
                            .map(str::to_string)
                    }
                };
                let (namespace, name) = named;
                found.push(Listed {
                    resource: w.resource.clone(),
                    namespace,
                    name,
                    manager,
                });
            }
        }
        Ok(found)
    }
}

impl ChildRegistry {
    /// A hand-off's relabel of the children its caches do not index by owner
    /// ([`ChildRegistry::listed_children_of`]: of kinds not started here, or linked by
    /// annotations only): `target` written as their shard label (None: removed). True when
    /// every one was written (or had gone); false (retried) when a list, a read or a write
    /// failed.
    pub(crate) async fn relabel_listed(
        &self,
        client: &kube::Client,
        discovery: &crate::dynamic::Discovery,
        member: &str,
        owner: &ObjectMeta,
        primary_type: &str,
        target: Option<&str>,
    ) -> bool {
        let listed = match self
            .listed_children_of(client, discovery, member, owner, primary_type)
            .await
        {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "could not list the children a hand-off's caches do not show; retrying");
                return false;
            }
        };
        let key = super::Labels::for_operator(&self.inner.controller).shard;
        let body = serde_json::json!({ "metadata": { "labels": { key: target } } });
        let results = futures::future::join_all(listed.iter().map(|c| {
            let api: Api<PartialObjectMeta<DynamicObject>> = match &c.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &c.resource),
                None => Api::all_with(client.clone(), &c.resource),
            };
            let body = &body;
            async move {
                match api
                    .patch_metadata(
                        &c.name,
                        &kube::api::PatchParams {
                            field_manager: c.manager.clone(),
                            ..Default::default()
                        },
                        &kube::api::Patch::Merge(body),
                    )
                    .await
                {
                    Ok(_) => true,
                    Err(kube::Error::Api(s)) if s.code == 404 => true,
                    Err(e) => {
                        tracing::warn!(error = %e, kind = %c.resource.kind, child = %c.name, "could not relabel a listed child on a hand-off; retrying");
                        false
                    }
                }
            }
        }))
        .await;
        results.into_iter().all(|ok| ok)
    }
}

/// A child a move found by listing (see [`ChildRegistry::listed_children_of`]).
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    pub resource: kube::core::ApiResource,
    pub namespace: Option<String>,
    pub name: String,
    /// The field manager that owns its shard label: relabelled under that name, the label
    /// stays the applier's, and the new member finds the child in place.
    pub manager: Option<String>,
}

fn gvk_of(w: &ChildWatch) -> GroupVersionKind {
    GroupVersionKind::gvk(&w.resource.group, &w.resource.version, &w.resource.kind)
}

/// An object's key as operator-sdk's `operator-sdk/primary-resource` names it:
/// `<namespace>/<name>`, or `<name>` for a cluster-scoped one.
pub(crate) fn annotation_key(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// The owner a child names through operator-sdk's annotations, as [`annotation_key`] writes
/// it (a leading `/` of a cluster-scoped owner dropped), when they name a `primary_type`
/// (`<Kind>.<group>`) object.
pub(crate) fn annotated_owner(meta: &ObjectMeta, primary_type: &str) -> Option<String> {
    let ann: &BTreeMap<String, String> = meta.annotations.as_ref()?;
    if ann.get(crate::dynamic::PRIMARY_RESOURCE_TYPE_ANNOTATION)? != primary_type {
        return None;
    }
    let primary = ann.get(crate::dynamic::PRIMARY_RESOURCE_ANNOTATION)?;
    Some(primary.strip_prefix('/').unwrap_or(primary).to_string())
}

/// `<Kind>.<group>` of a kind, as operator-sdk's `operator-sdk/primary-resource-type`.
pub(crate) fn primary_type(resource: &kube::core::ApiResource) -> String {
    format!("{}.{}", resource.kind, resource.group)
}

/// The link between child caches started at run time and the controller they serve: the
/// operator hands [`LateChildren::wiring`]'s end to its [`crate::Wiring`], keeps the other,
/// and each cache it starts waits for the controller's registry before it joins it.
#[derive(Clone)]
pub struct LateChildren {
    rx: watch::Receiver<Option<ChildRegistry>>,
}

/// The controller's end of [`LateChildren`]: given the registry when the controller starts.
pub struct LateJoin {
    tx: watch::Sender<Option<ChildRegistry>>,
}

impl LateChildren {
    /// A pair: the caches' end and the wiring's.
    pub fn new() -> (LateChildren, LateJoin) {
        let (tx, rx) = watch::channel(None);
        (LateChildren { rx }, LateJoin { tx })
    }

    /// The registry of the controller these caches serve, once it started; None when the
    /// wiring was dropped without a controller (a cache then runs as an unwired one: its
    /// own selector, uncounted).
    pub async fn registry(&self) -> Option<ChildRegistry> {
        let mut rx = self.rx.clone();
        let r = rx.wait_for(Option::is_some).await.ok()?.clone();
        r
    }
}

impl LateJoin {
    pub(crate) fn attach(&self, registry: &ChildRegistry) {
        self.tx.send_replace(Some(registry.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::ChildWatch;
    use kube::core::{ApiResource, GroupVersionKind};

    fn watch(kind: &str, own: &str) -> Arc<ChildWatch> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", kind));
        Arc::new(ChildWatch::unstarted(ar, Some("ns".into()), own))
    }

    #[test]
    fn unsharded_a_cache_joins_once_with_its_own_selector() {
        let r = ChildRegistry::new("op", None, &Default::default());
        let cm = watch("ConfigMap", "app=x");
        assert!(r.join(&cm));
        assert!(!r.join(&cm), "wired twice: joined once");
        assert_eq!(cm.watches(), ["app=x"]);
        let kinds = r.kinds();
        assert_eq!(kinds.len(), 1);
        assert_eq!(
            (kinds[0].resource.kind.as_str(), kinds[0].selector.as_str()),
            ("ConfigMap", "app=x")
        );
    }

    #[test]
    fn sharded_a_cache_selects_its_members_share_and_the_unlabelled_ones() {
        let r = ChildRegistry::new("op", Some("bosun-1"), &Default::default());
        let cm = watch("ConfigMap", "app=x");
        assert!(r.join(&cm));
        assert_eq!(
            cm.watches(),
            [
                "app=x,shard.bosun.dev/op=bosun-1",
                "app=x,!shard.bosun.dev/op"
            ]
        );
        // The sharder lists a member's children with the cache's own selector.
        assert_eq!(r.kinds()[0].selector, "app=x");
        // Selected elsewhere first (wired into another controller): not joined here.
        let other = watch("Secret", "");
        assert!(ChildRegistry::new("other", Some("bosun-1"), &Default::default()).join(&other));
        assert!(!r.join(&other));
        assert_eq!(r.watches().len(), 1);
    }

    #[test]
    fn the_registry_grows_and_every_clone_sees_the_kinds_joined_later() {
        let r = ChildRegistry::new("op", None, &Default::default());
        let handoff = r.clone();
        assert!(handoff.kinds().is_empty());
        r.join(&watch("ConfigMap", ""));
        r.join(&watch("Secret", ""));
        let kinds: Vec<String> = handoff
            .kinds()
            .into_iter()
            .map(|k| k.resource.kind)
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
        assert_eq!(handoff.watches().len(), 2);
    }

    #[test]
    fn kinds_recorded_elsewhere_and_not_joined_here_are_unstarted() {
        let record = crate::shard::record::Record::default();
        let r = ChildRegistry::new("op", None, &record);
        record.note("op", &GroupVersionKind::gvk("", "v1", "Secret"));
        record.note("other", &GroupVersionKind::gvk("", "v1", "Service"));
        assert!(r.join(&watch("ConfigMap", "")));
        let unstarted: Vec<String> = r.unstarted().into_iter().map(|g| g.kind).collect();
        assert_eq!(
            unstarted,
            ["Secret"],
            "the joined ConfigMap is recorded too"
        );
        assert_eq!(record.kinds_of("op").len(), 2);
    }

    #[test]
    fn an_annotation_names_its_owner_by_key() {
        let ann = |primary: &str, type_: &str| ObjectMeta {
            annotations: Some(BTreeMap::from([
                (
                    crate::dynamic::PRIMARY_RESOURCE_ANNOTATION.to_string(),
                    primary.to_string(),
                ),
                (
                    crate::dynamic::PRIMARY_RESOURCE_TYPE_ANNOTATION.to_string(),
                    type_.to_string(),
                ),
            ])),
            ..Default::default()
        };
        let owner = ObjectMeta {
            name: Some("store".into()),
            namespace: Some("shop".into()),
            ..Default::default()
        };
        let t = "BookStore.charts.example.com";
        assert_eq!(
            annotated_owner(&ann("shop/store", t), t),
            Some(annotation_key(&owner))
        );
        assert_eq!(annotated_owner(&ann("shop/store", "Other.x"), t), None);
        let cluster = ObjectMeta {
            name: Some("wide".into()),
            ..Default::default()
        };
        assert_eq!(
            annotated_owner(&ann("/wide", t), t),
            Some(annotation_key(&cluster))
        );
        let ar = kube::core::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "charts.example.com",
            "v1",
            "BookStore",
        ));
        assert_eq!(primary_type(&ar), t);
    }

    /// An API server stand-in for a hand-off: answers discovery of ClusterRoles and Secrets,
    /// a list of ClusterRoles (one annotated to the owner), a metadata read of any object
    /// (its shard label owned by `hook-writer`) and any patch; records every request as
    /// `METHOD path?query`.
    fn handoff_server() -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        use kube::client::Body;
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        let svc = tower::service_fn(move |req: http::Request<Body>| {
            let line = format!(
                "{} {}",
                req.method(),
                req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("")
            );
            log.lock().expect("log").push(line);
            let path = req.uri().path().to_string();
            let meta = |name: &str, manager: &str| {
                serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": {
                        "name": name, "uid": format!("uid-{name}"),
                        "labels": { "shard.bosun.dev/op": "m1" },
                        "annotations": {
                            crate::dynamic::PRIMARY_RESOURCE_ANNOTATION: "shop/w",
                            crate::dynamic::PRIMARY_RESOURCE_TYPE_ANNOTATION: "Widget.example.com",
                        },
                        "managedFields": [{
                            "manager": manager, "operation": "Update", "apiVersion": "v1",
                            "fieldsType": "FieldsV1",
                            "fieldsV1": { "f:metadata": { "f:labels": { "f:shard.bosun.dev/op": {} } } }
                        }]
                    }
                })
            };
            let resources = |gv: &str, name: &str, kind: &str, namespaced: bool| {
                serde_json::json!({
                    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                    "resources": [{ "name": name, "singularName": "", "namespaced": namespaced,
                        "kind": kind, "verbs": ["get", "list", "watch", "patch"] }]
                })
            };
            let body = match path.as_str() {
                "/apis/rbac.authorization.k8s.io/v1" => resources(
                    "rbac.authorization.k8s.io/v1",
                    "clusterroles",
                    "ClusterRole",
                    false,
                ),
                "/api/v1" => resources("v1", "secrets", "Secret", true),
                "/apis/rbac.authorization.k8s.io/v1/clusterroles" => serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                    "metadata": { "resourceVersion": "1" },
                    "items": [{ "metadata": meta("cr-1", "bosun-op")["metadata"].clone() }]
                }),
                p => meta(p.rsplit('/').next().unwrap_or_default(), "hook-writer"),
            };
            async move {
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::from(
                    serde_json::to_vec(&body).expect("json"),
                )))
            }
        });
        (kube::Client::new(svc, "default"), seen)
    }

    /// A hand-off of an owner with annotation-linked children in started caches that watch
    /// every namespace: a cluster-scoped ClusterRole and two Secrets in another namespace, the
    /// ClusterRole and one Secret held by the fingerprinting applier `bosun-op`, the other
    /// Secret written by someone else (a Helm hook). The caches are scanned, not the kind
    /// listed, and only the Secret the cache cannot tell the label's manager of is read.
    #[tokio::test]
    async fn a_handoff_lists_no_started_kind_and_reads_only_what_its_caches_cannot_tell() {
        let (client, seen) = handoff_server();
        let applier = crate::apply::Applier::new("bosun-op");
        let registry = ChildRegistry::new("op", Some("m1"), &Default::default());
        let cr = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
        ));
        let secret = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Secret"));
        assert!(registry.join(&Arc::new(ChildWatch::cached(
            cr,
            None,
            vec![((None, "cr-1".into()), "uid-cr-1".into())],
            Some((&applier, &["uid-cr-1"])),
        ))));
        assert!(registry.join(&Arc::new(ChildWatch::cached(
            secret,
            None,
            vec![
                ((Some("other".into()), "s-1".into()), "uid-s-1".into()),
                ((Some("other".into()), "s-2".into()), "uid-s-2".into()),
            ],
            Some((&applier, &["uid-s-1"])),
        ))));
        let owner = ObjectMeta {
            name: Some("w".into()),
            namespace: Some("shop".into()),
            uid: Some("uid-w".into()),
            ..Default::default()
        };
        let discovery = crate::dynamic::Discovery::new(client.clone());
        assert!(
            registry
                .relabel_listed(
                    &client,
                    &discovery,
                    "m1",
                    &owner,
                    "Widget.example.com",
                    Some("m2")
                )
                .await
        );
        let mut seen = seen.lock().expect("log").clone();
        seen.sort();
        // Discovery aside: the reads and writes of children.
        let of_children = |s: &&String| s.contains("/clusterroles") || s.contains("/secrets");
        let reads_and_writes: Vec<&String> = seen.iter().filter(of_children).collect();
        assert_eq!(
            reads_and_writes,
            [
                "GET /api/v1/namespaces/other/secrets/s-2",
                "PATCH /api/v1/namespaces/other/secrets/s-1?&fieldManager=bosun-op",
                "PATCH /api/v1/namespaces/other/secrets/s-2?&fieldManager=hook-writer",
                "PATCH /apis/rbac.authorization.k8s.io/v1/clusterroles/cr-1?&fieldManager=bosun-op",
            ],
            "every request: {seen:?}"
        );
    }

    #[tokio::test]
    async fn a_late_cache_waits_for_its_controllers_registry() {
        let (late, join) = LateChildren::new();
        let waiting = tokio::spawn(async move { late.registry().await.is_some() });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no controller yet: it waits");
        join.attach(&ChildRegistry::new("op", None, &Default::default()));
        assert!(waiting.await.expect("task"), "given the registry");

        // A wiring dropped without a controller: the cache runs unwired, it never hangs.
        let (late, join) = LateChildren::new();
        drop(join);
        assert!(late.registry().await.is_none());
    }
}
