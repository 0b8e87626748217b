//! Children linked to their widget by operator-sdk's annotations only (no owner reference:
//! a cluster-scoped child, or one in another namespace), created once as a Helm hook that
//! persists or an Ansible task that writes once; and the check that such a child follows
//! its widget from member to member.
use std::collections::BTreeMap;
use std::fmt::Debug;

use bosun_runtime::dynamic::{PRIMARY_RESOURCE_ANNOTATION, PRIMARY_RESOURCE_TYPE_ANNOTATION};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::Widget;

/// The metadata of `w`'s child `name` (in `namespace`; `None` for a cluster-scoped one),
/// naming `w` by operator-sdk's annotations only, labelled `<kind_label>=yes` and with the
/// labels that put it in the sharder's scope.
pub fn annotation_linked(
    w: &Widget,
    name: String,
    namespace: Option<String>,
    kind_label: &str,
) -> ObjectMeta {
    let mut labels = bosun_runtime::shard::labels_in_scope();
    labels.insert(kind_label.to_string(), "yes".to_string());
    let owner = format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any());
    ObjectMeta {
        name: Some(name),
        namespace,
        labels: Some(labels),
        annotations: Some(
            [
                (PRIMARY_RESOURCE_ANNOTATION.to_string(), owner),
                (
                    PRIMARY_RESOURCE_TYPE_ANNOTATION.to_string(),
                    "Widget.test.bosun.dev".to_string(),
                ),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

/// Creates `child` under the field manager `manager`, as a Helm or Ansible write names its
/// own: one that exists already fails with 409.
pub async fn create_as<K>(api: &Api<K>, manager: &str, child: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let pp = PostParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    };
    api.create(&pp, child).await
}

/// The member `labels` name under the shard label `shard`.
pub fn member_of(labels: Option<&BTreeMap<String, String>>, shard: &str) -> Option<String> {
    labels?.get(shard).cloned()
}

/// Whether every widget of `names` in `ns` is labelled (`shard`) with a member, reconciled
/// by it, and its ConfigMap `<widget>-w` and its annotation-linked child `linked_name(widget)`
/// of `linked` labelled with it too; the members, by widget.
pub async fn followed<K>(
    admin: &Client,
    ns: &str,
    shard: &str,
    names: &[String],
    linked: &Api<K>,
    linked_name: impl Fn(&str) -> String,
) -> Option<BTreeMap<String, String>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let widgets: Api<Widget> = Api::namespaced(admin.clone(), ns);
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    let mut on = BTreeMap::new();
    for n in names {
        let member = member_of(widgets.get(n).await.ok()?.metadata.labels.as_ref(), shard)?;
        let cm = cms.get(&format!("{n}-w")).await.ok()?;
        let child = linked.get(&linked_name(n)).await.ok()?;
        let by = cm.data.as_ref()?.get("reconciledBy")?.clone();
        let ok = by == member
            && member_of(cm.metadata.labels.as_ref(), shard).as_ref() == Some(&member)
            && member_of(child.meta().labels.as_ref(), shard).as_ref() == Some(&member);
        if !ok {
            return None;
        }
        on.insert(n.clone(), member);
    }
    Some(on)
}
