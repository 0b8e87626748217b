//! From rendered manifests to the objects a release applies: parsed, placed in the release's
//! namespace when namespaced, and marked as Helm and helm-operator mark them —
//! `app.kubernetes.io/managed-by: Helm` and the `meta.helm.sh/release-name|namespace`
//! annotations (what the Helm CLI checks before it touches an object), the
//! `helm.sdk.operatorframework.io/chart` label, bosun's child label, and an owner reference
//! to the custom resource — or, for a cluster-scoped object, one in another namespace, or one
//! with `helm.sh/resource-policy: keep` (which must outlive the custom resource), operator-sdk's
//! primary-resource annotations instead.
use std::collections::BTreeMap;

use bosun_helm::render::manifest::Manifest;
use bosun_runtime::dynamic::{PRIMARY_RESOURCE_ANNOTATION, PRIMARY_RESOURCE_TYPE_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::{DynamicObject, GroupVersionKind, TypeMeta};

pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
pub const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";
pub const CHART_LABEL: &str = "helm.sdk.operatorframework.io/chart";
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";

/// Who the objects of one release belong to.
#[derive(Clone, Debug)]
pub struct ReleaseOwner {
    pub release: String,
    pub namespace: String,
    pub chart: String,
    /// The custom resource's controller owner reference.
    pub owner: OwnerReference,
    /// `<Kind>.<group>` of the custom resource.
    pub owner_type: String,
    /// bosun's child label (key, value): child watches select on it.
    pub child_label: (String, String),
    /// The custom resource's shard labels while sharded (`bosun_runtime::shard`): the
    /// applier writes them on the release's objects; objects written outside it (hooks) get
    /// them from here, so every child of the release is on its member.
    pub shard_labels: BTreeMap<String, String>,
    /// `helm.sdk.operatorframework.io/upgrade-force`: replace an object whose immutable
    /// fields changed instead of failing.
    pub force: bool,
}

/// One object of a release.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The template it came from (`chart/templates/x.yaml`).
    pub path: String,
    pub gvk: GroupVersionKind,
    pub object: DynamicObject,
    /// `helm.sh/resource-policy: keep`: never deleted by bosun.
    pub keep: bool,
}

impl Desired {
    pub fn name(&self) -> &str {
        self.object.metadata.name.as_deref().unwrap_or("")
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object.metadata.namespace.as_deref()
    }

    /// `Kind/namespace/name`, for messages and inventories.
    pub fn describe(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.gvk.kind, self.name()),
            None => format!("{} {}", self.gvk.kind, self.name()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("{path}: not a Kubernetes object: {message}")]
    Invalid { path: String, message: String },
}

/// The group/version/kind of an `apiVersion` + `kind`.
pub fn gvk_of(api_version: &str, kind: &str) -> GroupVersionKind {
    match api_version.split_once('/') {
        Some((g, v)) => GroupVersionKind::gvk(g, v, kind),
        None => GroupVersionKind::gvk("", api_version, kind),
    }
}

/// Parses one rendered document into an object (no marks yet).
pub fn parse(m: &Manifest) -> Result<(GroupVersionKind, DynamicObject), ObjectError> {
    let invalid = |message: String| ObjectError::Invalid {
        path: m.path.clone(),
        message,
    };
    let json = bosun_yaml::goyaml::yaml_to_json(&m.content).map_err(|e| invalid(e.to_string()))?;
    let obj: DynamicObject = serde_json::from_str(&json).map_err(|e| invalid(e.to_string()))?;
    let types = obj
        .types
        .clone()
        .ok_or_else(|| invalid("apiVersion and kind are required".into()))?;
    if types.kind.is_empty() || types.api_version.is_empty() {
        return Err(invalid("apiVersion and kind are required".into()));
    }
    if obj.metadata.name.as_deref().is_none_or(str::is_empty) {
        return Err(invalid(format!("{} without metadata.name", types.kind)));
    }
    Ok((gvk_of(&types.api_version, &types.kind), obj))
}

/// Marks `obj` as part of the release (see the module doc); `namespaced` says whether its
/// kind is. Returns whether it carries the keep policy.
pub fn mark(obj: &mut DynamicObject, namespaced: bool, owner: &ReleaseOwner) -> bool {
    mark_as(obj, namespaced, owner, true)
}

/// [`mark`] for a hook: Helm gives hooks no release metadata (`managed-by`, `meta.helm.sh/*`)
/// — they are not the release's objects, and `helm upgrade` must not adopt one as such. A
/// hook is created directly, not through the applier, so it gets the custom resource's shard
/// labels here.
pub fn mark_hook(obj: &mut DynamicObject, namespaced: bool, owner: &ReleaseOwner) -> bool {
    let keep = mark_as(obj, namespaced, owner, false);
    if !owner.shard_labels.is_empty() {
        let labels = obj.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.extend(owner.shard_labels.clone());
    }
    keep
}

fn mark_as(
    obj: &mut DynamicObject,
    namespaced: bool,
    owner: &ReleaseOwner,
    release_metadata: bool,
) -> bool {
    let meta: &mut ObjectMeta = &mut obj.metadata;
    if namespaced {
        if meta.namespace.as_deref().is_none_or(str::is_empty) {
            meta.namespace = Some(owner.namespace.clone());
        }
    } else {
        meta.namespace = None;
    }
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    if release_metadata {
        labels.insert(MANAGED_BY_LABEL.into(), "Helm".into());
    }
    labels.insert(CHART_LABEL.into(), owner.chart.clone());
    labels.insert(owner.child_label.0.clone(), owner.child_label.1.clone());
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    if release_metadata {
        annotations.insert(RELEASE_NAME_ANNOTATION.into(), owner.release.clone());
        annotations.insert(RELEASE_NAMESPACE_ANNOTATION.into(), owner.namespace.clone());
    }
    let keep = annotations
        .get(RESOURCE_POLICY_ANNOTATION)
        .is_some_and(|p| p == "keep");
    let same_namespace = meta.namespace.as_deref() == Some(owner.namespace.as_str());
    if namespaced && same_namespace && !keep {
        meta.owner_references = Some(vec![owner.owner.clone()]);
    } else {
        annotations.insert(
            PRIMARY_RESOURCE_ANNOTATION.into(),
            format!("{}/{}", owner.namespace, owner.owner.name),
        );
        annotations.insert(
            PRIMARY_RESOURCE_TYPE_ANNOTATION.into(),
            owner.owner_type.clone(),
        );
    }
    keep
}

/// Why an existing object may not be written by a release.
pub fn ownership_conflict(
    existing: &ObjectMeta,
    owner: &ReleaseOwner,
    describe: &str,
) -> Option<String> {
    let controller = existing
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    if let Some(c) = controller {
        if c.uid == owner.owner.uid {
            return None;
        }
        return Some(format!(
            "{describe} exists and is owned by {} {}; it cannot be imported into release {}",
            c.kind, c.name, owner.release
        ));
    }
    let ann = existing.annotations.clone().unwrap_or_default();
    let rel = ann.get(RELEASE_NAME_ANNOTATION);
    let rel_ns = ann.get(RELEASE_NAMESPACE_ANNOTATION);
    if rel == Some(&owner.release) && rel_ns == Some(&owner.namespace) {
        return None;
    }
    Some(format!(
        "{describe} exists and cannot be imported into the current release: invalid ownership metadata; annotation {RELEASE_NAME_ANNOTATION} must be {:?} (is {:?}) and {RELEASE_NAMESPACE_ANNOTATION} must be {:?} (is {:?})",
        owner.release, rel, owner.namespace, rel_ns
    ))
}

/// What the child caches keep of a child's metadata: what [`ownership_conflict`], the owner
/// mapping and the applier read. Identity, owner references, generation, deletion and
/// finalizers stay. Labels go: the watch selects by them and nothing reads them back (an edit
/// of one bosun wrote still triggers the owner, through the owned-field fingerprint the cache
/// keeps beside the object), and a label map costs a whole B-tree node (≈0.6 KB per child;
/// the child caches' label and annotation maps were over half their memory, massif at 200
/// custom resources). Annotations go too when a controller is named; without one they
/// name the owner, so Helm's release annotations and the primary-resource ones stay.
pub fn slim_meta(m: &mut ObjectMeta) {
    m.labels = None;
    m.creation_timestamp = None;
    m.managed_fields = None;
    if bosun_runtime::owner::controller(m).is_some() {
        m.annotations = None;
    } else if let Some(a) = m.annotations.as_mut() {
        a.retain(|k, _| {
            [
                RELEASE_NAME_ANNOTATION,
                RELEASE_NAMESPACE_ANNOTATION,
                PRIMARY_RESOURCE_ANNOTATION,
                PRIMARY_RESOURCE_TYPE_ANNOTATION,
            ]
            .contains(&k.as_str())
        });
        if a.is_empty() {
            m.annotations = None;
        }
    }
}

/// Checks a rendered object of a built-in kind against its Kubernetes type before it is
/// sent: the API server of Kubernetes 1.20 accepts some values its types cannot hold and
/// wraps them (`replicas: 9999999999` became 1410065407 pods), so bosun refuses them here
/// with the field named.
pub fn check_builtin(gvk: &GroupVersionKind, obj: &DynamicObject) -> Result<(), String> {
    use k8s_openapi::api::{apps, autoscaling, batch, core, networking, policy, rbac};
    fn check<T: serde::de::DeserializeOwned>(obj: &DynamicObject) -> Result<(), String> {
        let value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
        serde_json::from_value::<T>(value)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    match (gvk.group.as_str(), gvk.kind.as_str()) {
        ("apps", "Deployment") => check::<apps::v1::Deployment>(obj),
        ("apps", "StatefulSet") => check::<apps::v1::StatefulSet>(obj),
        ("apps", "DaemonSet") => check::<apps::v1::DaemonSet>(obj),
        ("apps", "ReplicaSet") => check::<apps::v1::ReplicaSet>(obj),
        ("batch", "Job") => check::<batch::v1::Job>(obj),
        ("batch", "CronJob") => check::<batch::v1::CronJob>(obj),
        ("", "Pod") => check::<core::v1::Pod>(obj),
        ("", "Service") => check::<core::v1::Service>(obj),
        ("", "ConfigMap") => check::<core::v1::ConfigMap>(obj),
        ("", "Secret") => check::<core::v1::Secret>(obj),
        ("", "ServiceAccount") => check::<core::v1::ServiceAccount>(obj),
        ("", "PersistentVolumeClaim") => check::<core::v1::PersistentVolumeClaim>(obj),
        ("networking.k8s.io", "Ingress") => check::<networking::v1::Ingress>(obj),
        ("networking.k8s.io", "NetworkPolicy") => check::<networking::v1::NetworkPolicy>(obj),
        ("policy", "PodDisruptionBudget") => check::<policy::v1::PodDisruptionBudget>(obj),
        ("autoscaling", "HorizontalPodAutoscaler") if gvk.version == "v2" => {
            check::<autoscaling::v2::HorizontalPodAutoscaler>(obj)
        }
        ("rbac.authorization.k8s.io", "Role") => check::<rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => check::<rbac::v1::RoleBinding>(obj),
        ("rbac.authorization.k8s.io", "ClusterRole") => check::<rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            check::<rbac::v1::ClusterRoleBinding>(obj)
        }
        _ => Ok(()),
    }
}

/// The `TypeMeta` of a kind.
pub fn type_meta(gvk: &GroupVersionKind) -> TypeMeta {
    TypeMeta {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Release "shop" of chart book-store in namespace "ns", owned by BookStore "shop".
    pub(crate) fn owner() -> ReleaseOwner {
        ReleaseOwner {
            release: "shop".into(),
            namespace: "ns".into(),
            chart: "book-store".into(),
            owner: OwnerReference {
                api_version: "charts.example.com/v1alpha1".into(),
                kind: "BookStore".into(),
                name: "shop".into(),
                uid: "u1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            owner_type: "BookStore.charts.example.com".into(),
            child_label: (
                "bosun.dev/owner-kind".into(),
                "bookstore.charts.example.com".into(),
            ),
            shard_labels: BTreeMap::new(),
            force: false,
        }
    }

    fn manifest(content: &str) -> Manifest {
        Manifest {
            path: "book-store/templates/x.yaml".into(),
            content: content.into(),
            api_version: String::new(),
            kind: String::new(),
            name: String::new(),
            hook: None,
        }
    }

    #[test]
    fn cached_metadata_keeps_what_ownership_and_owner_mapping_read() {
        let (_, mut obj) = parse(&manifest(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  labels: {tier: web}\n  annotations: {note: x}\nspec: {}\n",
        ))
        .expect("parses");
        mark(&mut obj, true, &owner());
        let mut m = obj.metadata.clone();
        m.uid = Some("child".into());
        m.generation = Some(3);
        slim_meta(&mut m);
        assert_eq!((m.labels.as_ref(), m.annotations.as_ref()), (None, None));
        assert_eq!((m.uid.as_deref(), m.generation), (Some("child"), Some(3)));
        assert_eq!(ownership_conflict(&m, &owner(), "s"), None);
        let mut other = owner();
        other.owner.uid = "someone".into();
        assert!(ownership_conflict(&m, &other, "s").is_some());

        // Without a controller, the annotations naming the owner are what is kept.
        let (_, mut role) = parse(&manifest(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n  annotations: {note: x}\n",
        ))
        .expect("parses");
        mark(&mut role, false, &owner());
        let mut m = role.metadata.clone();
        slim_meta(&mut m);
        let mut kept: Vec<&str> = m
            .annotations
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        kept.sort();
        let mut want = vec![
            RELEASE_NAME_ANNOTATION,
            RELEASE_NAMESPACE_ANNOTATION,
            PRIMARY_RESOURCE_ANNOTATION,
            PRIMARY_RESOURCE_TYPE_ANNOTATION,
        ];
        want.sort();
        assert_eq!(kept, want);
        assert_eq!(m.labels, None);
        assert_eq!(ownership_conflict(&m, &owner(), "r"), None);
    }

    #[test]
    fn namespaced_objects_get_an_owner_reference_and_helm_metadata() {
        let (gvk, mut obj) = parse(&manifest(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports: [{port: 80}]\n",
        ))
        .expect("parses");
        assert_eq!(gvk, GroupVersionKind::gvk("", "v1", "Service"));
        assert!(!mark(&mut obj, true, &owner()));
        let m = &obj.metadata;
        assert_eq!(m.namespace.as_deref(), Some("ns"));
        assert_eq!(
            m.owner_references.as_ref().map(|o| o[0].uid.as_str()),
            Some("u1")
        );
        assert_eq!(
            m.labels.as_ref().map(|l| l[MANAGED_BY_LABEL].as_str()),
            Some("Helm")
        );
        assert_eq!(
            m.annotations
                .as_ref()
                .map(|a| a[RELEASE_NAME_ANNOTATION].as_str()),
            Some("shop")
        );
        assert_eq!(obj.data["spec"]["ports"][0]["port"], 80);
    }

    #[test]
    fn cluster_scoped_cross_namespace_and_kept_objects_are_annotated_instead() {
        for (doc, namespaced) in [
            ("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n", false),
            ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: other\n", true),
            ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: p\n  annotations:\n    helm.sh/resource-policy: keep\n", true),
        ] {
            let (_, mut obj) = parse(&manifest(doc)).expect("parses");
            let keep = mark(&mut obj, namespaced, &owner());
            assert!(obj.metadata.owner_references.is_none(), "{doc}");
            let a = obj.metadata.annotations.clone().expect("annotations");
            assert_eq!(a[PRIMARY_RESOURCE_ANNOTATION], "ns/shop");
            assert_eq!(a[PRIMARY_RESOURCE_TYPE_ANNOTATION], "BookStore.charts.example.com");
            assert_eq!(keep, doc.contains("keep"));
        }
    }

    #[test]
    fn a_hook_gets_the_custom_resources_shard_labels_and_no_release_metadata() {
        let (_, mut obj) = parse(&manifest(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {app: x}\nspec: {}\n",
        ))
        .expect("parse");
        let mut o = owner();
        o.shard_labels = BTreeMap::from([("shard.bosun.dev/bookstore".into(), "m1".into())]);
        mark_hook(&mut obj, true, &o);
        let labels = obj.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("shard.bosun.dev/bookstore").map(String::as_str),
            Some("m1")
        );
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
        assert!(!labels.contains_key(MANAGED_BY_LABEL));
        // Unsharded: nothing of the kind.
        let (_, mut plain) = parse(&manifest(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec: {}\n",
        ))
        .expect("parse");
        mark_hook(&mut plain, true, &owner());
        assert!(!plain
            .metadata
            .labels
            .unwrap_or_default()
            .keys()
            .any(|k| k.starts_with("shard.bosun.dev/")));
    }

    #[test]
    fn bad_documents_name_their_template() {
        for doc in [
            "kind: Service\nmetadata: {name: a}\n",
            "apiVersion: v1\nkind: Service\n",
            "[1, 2]\n",
            "a: [\n",
        ] {
            let e = parse(&manifest(doc))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with("book-store/templates/x.yaml: "), "{doc}: {e}");
        }
    }

    #[test]
    fn built_in_kinds_are_checked_against_their_types() {
        let (gvk, obj) = parse(&manifest("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 9999999999\n  selector: {}\n  template: {}\n")).expect("parses");
        let e = check_builtin(&gvk, &obj).err().unwrap_or_default();
        assert!(e.contains("9999999999"), "{e}");
        let (gvk, obj) = parse(&manifest("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 2\n  selector: {}\n  template: {}\n")).expect("parses");
        assert_eq!(check_builtin(&gvk, &obj), Ok(()));
        let (gvk, obj) = parse(&manifest("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {replicas: 9999999999}\n")).expect("parses");
        assert_eq!(
            check_builtin(&gvk, &obj),
            Ok(()),
            "other kinds are the API server's to check"
        );
    }

    #[test]
    fn ownership_follows_helm_rules() {
        let o = owner();
        let mut meta = ObjectMeta::default();
        assert!(
            ownership_conflict(&meta, &o, "Service ns/s").is_some(),
            "a stranger's object"
        );
        meta.annotations = Some(BTreeMap::from([
            (RELEASE_NAME_ANNOTATION.to_string(), "shop".to_string()),
            (RELEASE_NAMESPACE_ANNOTATION.to_string(), "ns".to_string()),
        ]));
        assert!(
            ownership_conflict(&meta, &o, "Service ns/s").is_none(),
            "the release's own (a takeover)"
        );
        let mut other = o.owner.clone();
        other.uid = "u2".into();
        meta.owner_references = Some(vec![other]);
        assert!(
            ownership_conflict(&meta, &o, "Service ns/s").is_some(),
            "another CR controls it"
        );
    }
}
