//! The child ConfigMaps of the multi-replica tests' widgets: one per widget, labelled
//! `<label>=yes`, controlled by its widget. Either cached from the controller's start (a
//! fingerprinting child cache, [`owning_configmaps`]) or from a cache the first reconcile
//! starts, as the Helm and Ansible flavours start theirs ([`run_time_children`]).
use std::future::Future;
use std::sync::Arc;

use bosun_runtime::apply::{Applier, Outcome};
use bosun_runtime::cache::ChildCache;
use bosun_runtime::dynamic::{ChildCacheError, Discovery, DynamicChildren};
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_runtime::manager::Operator;
use bosun_runtime::Wiring;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta};
use kube::core::GroupVersionKind;
use kube::runtime::controller::Action;
use kube::{Client, Resource, ResourceExt};

use super::{apply_child, widget_controller, widget_primary, Widget};

/// `w`'s child `<widget><suffix>`, labelled `<label>=yes`, controlled by `w`, holding `data`.
pub fn owned_configmap(w: &Widget, suffix: &str, label: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}{suffix}", w.name_any())),
            namespace: w.namespace(),
            labels: Some([(label.to_string(), "yes".to_string())].into()),
            owner_references: w.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

/// A controller's child ConfigMaps, cached from its start by a fingerprinting child cache and
/// applied under one field manager.
pub struct OwnedConfigMaps {
    pub client: Client,
    pub applier: Applier,
    pub cache: ChildCache<ConfigMap>,
}

impl OwnedConfigMaps {
    /// Applies `cm` as a coded operator does (see [`apply_child`]).
    pub async fn apply(&self, cm: &ConfigMap) -> Result<Outcome, kube::Error> {
        apply_child(&self.client, &self.applier, &self.cache, cm).await
    }
}

/// The wiring of a widget controller in `ns` that owns the ConfigMaps labelled `<label>=yes`
/// and applies them as `manager`; `context` makes the reconcile's context around them.
pub fn owning_configmaps<C>(
    client: &Client,
    ns: Option<&str>,
    label: &str,
    manager: &str,
    context: impl FnOnce(OwnedConfigMaps) -> C,
) -> Wiring<Widget, C>
where
    C: Send + Sync + 'static,
{
    let applier = Applier::new(manager);
    let (cache, stream) = ChildCache::<ConfigMap>::watch_owned(
        client.clone(),
        ns,
        &format!("{label}=yes"),
        |c| c.data = None,
        &applier,
    );
    let state = Arc::new(context(OwnedConfigMaps {
        client: client.clone(),
        applier,
        cache: cache.clone(),
    }));
    Wiring::new(widget_primary(client, ns), state).owns(stream, cache.synced())
}

/// What a reconcile of [`run_time_children`] holds: the replica's identity and the child
/// caches it starts.
pub struct RunTimeCtx {
    pub client: Client,
    pub identity: String,
    pub applier: Applier,
    pub children: DynamicChildren<Widget>,
    label: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RunTimeError {
    #[error("api: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Children(#[from] ChildCacheError),
}

impl Categorized for RunTimeError {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Api
    }
}

impl RunTimeCtx {
    /// Applies `w`'s ConfigMap `<widget>-w` (naming this replica in `reconciledBy`), read from
    /// the ConfigMap cache this starts on its first call.
    pub async fn apply_configmap(&self, w: &Widget) -> Result<Outcome, RunTimeError> {
        let ns = w.namespace().unwrap_or_default();
        let cache = self
            .children
            .cache(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
            .await?;
        let cm = owned_configmap(w, "-w", &self.label, &[("reconciledBy", &self.identity)]);
        Ok(self
            .applier
            .apply(
                &Api::namespaced(self.client.clone(), &ns),
                &cm,
                cache.meta(&ns, &cm.name_any()).as_ref(),
            )
            .await?)
    }
}

/// A widget operator `name` of replica `identity` that meets its child kinds only while
/// reconciling: a `DynamicChildren` of the children labelled `<label>=yes`, whose caches
/// `reconcile` starts (writing as `manager`), joined to the controller as they start.
pub fn run_time_children<F, Fut>(
    name: &'static str,
    label: &str,
    manager: &str,
    identity: &str,
    reconcile: F,
) -> Arc<dyn Operator>
where
    F: Fn(Arc<Widget>, Arc<RunTimeCtx>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, RunTimeError>> + Send + 'static,
{
    let (label, manager, identity) = (label.to_string(), manager.to_string(), identity.to_string());
    widget_controller(
        name,
        move |client, ns| {
            let (children, trigger) = DynamicChildren::new(
                client.clone(),
                Discovery::new(client.clone()),
                ns,
                &format!("{label}=yes"),
                (),
            );
            let late = children.wired();
            let context = Arc::new(RunTimeCtx {
                client: client.clone(),
                identity: identity.clone(),
                applier: Applier::new(manager.as_str()),
                children,
                label: label.clone(),
            });
            Wiring::new(widget_primary(client, ns), context)
                .trigger(trigger)
                .late_children(late)
        },
        reconcile,
    )
}
