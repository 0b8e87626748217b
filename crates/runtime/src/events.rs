//! Kubernetes Events (`events.k8s.io/v1`) for what a user must see in `kubectl describe`.
//!
//! Repeats of the same (regarding, related, type, reason, action) within [`SERIES_WINDOW`]
//! are folded into one event's series, as client-go's and kube-runtime's recorders do: the
//! first is created, each repeat patches the series' count and last time. kube-runtime's
//! recorder keeps every event it sent, whole, for that window (≈1.8 KB each: 1.8 MB after
//! an install of 1000 custom resources, held until the next event after the window); this one
//! keeps what a repeat needs — the event's name and namespace, the count and the time.
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

/// How long a repeat is folded into the series of the first (kube-runtime's and client-go's
/// window).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Where a series' next repeat goes.
struct Seen {
    name: String,
    namespace: String,
    count: i32,
    last: Instant,
}

#[derive(Clone)]
pub struct Events {
    client: Client,
    controller: Arc<str>,
    instance: Arc<str>,
    /// By a digest of the event's identity (type, reason, action, regarding, related).
    series: Arc<Mutex<HashMap<u64, Seen>>>,
}

impl Events {
    pub fn new(client: Client, controller: &str) -> Self {
        let instance = std::env::var("POD_NAME").unwrap_or_else(|_| controller.to_string());
        Events {
            client,
            controller: controller.into(),
            instance: instance.into(),
            series: Default::default(),
        }
    }

    /// Publishes an event; failures are logged, never fatal to a reconcile.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish_related(regarding, None, warning, reason, action, note)
            .await
    }

    /// Publishes an event that also names a related object. Repeats of the same
    /// (regarding, related, reason, action) are folded into one event series, so events
    /// about different related objects stay distinct.
    pub async fn publish_related(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        warning: bool,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let note = bounded(note.into());
        let type_ = if warning { "Warning" } else { "Normal" };
        let key = identity(regarding, related.as_ref(), type_, reason, action);
        if let Err(e) = self
            .send(key, regarding, related, type_, reason, action, note)
            .await
        {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }

    /// The series an event continues, if one is open (counted up), pruning closed ones.
    fn repeat_of(&self, key: u64) -> Option<(String, String, i32)> {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        series.retain(|_, s| now.duration_since(s.last) < SERIES_WINDOW);
        let s = series.get_mut(&key)?;
        s.count += 1;
        s.last = now;
        Some((s.name.clone(), s.namespace.clone(), s.count))
    }

    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        key: u64,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        type_: &str,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        if let Some((name, namespace, count)) = self.repeat_of(key) {
            let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
            let patch = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                // The event went (its TTL, or someone deleted it): start a new series.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = K8sEvent {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note: Some(note),
            regarding: Some(regarding.clone()),
            related,
            reporting_controller: Some(self.controller.to_string()),
            reporting_instance: Some(self.instance.to_string()),
            type_: Some(type_.to_string()),
            ..Default::default()
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        api.create(&PostParams::default(), &event).await?;
        self.series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                key,
                Seen {
                    name,
                    namespace,
                    count: 1,
                    last: Instant::now(),
                },
            );
        Ok(())
    }

    /// How many series are open (for tests).
    pub fn open_series(&self) -> usize {
        let now = Instant::now();
        self.series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|s| now.duration_since(s.last) < SERIES_WINDOW)
            .count()
    }
}

/// An event's note, at most 1 KB (the API's limit).
fn bounded(mut note: String) -> String {
    if note.len() > 1000 {
        let mut cut = 1000;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    note
}

fn reference_key(r: &ObjectReference, h: &mut DefaultHasher) {
    (
        &r.api_version,
        &r.kind,
        &r.namespace,
        &r.name,
        &r.uid,
        &r.field_path,
    )
        .hash(h);
}

/// What makes two events the same series.
fn identity(
    regarding: &ObjectReference,
    related: Option<&ObjectReference>,
    type_: &str,
    reason: &str,
    action: &str,
) -> u64 {
    let mut h = DefaultHasher::new();
    (type_, reason, action).hash(&mut h);
    reference_key(regarding, &mut h);
    related.is_some().hash(&mut h);
    if let Some(r) = related {
        reference_key(r, &mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_series_is_what_kube_runtime_keys_it_by() {
        let a = identity(&r("a"), None, "Normal", "Installed", "Install");
        assert_eq!(a, identity(&r("a"), None, "Normal", "Installed", "Install"));
        for other in [
            identity(&r("b"), None, "Normal", "Installed", "Install"),
            identity(&r("a"), Some(&r("x")), "Normal", "Installed", "Install"),
            identity(&r("a"), None, "Warning", "Installed", "Install"),
            identity(&r("a"), None, "Normal", "Upgraded", "Install"),
            identity(&r("a"), None, "Normal", "Installed", "Upgrade"),
        ] {
            assert_ne!(a, other);
        }
        // A related object is not the same as none, whatever it names.
        assert_ne!(
            identity(
                &r("a"),
                Some(&ObjectReference::default()),
                "Normal",
                "R",
                "A"
            ),
            identity(&r("a"), None, "Normal", "R", "A")
        );
    }

    #[test]
    fn notes_are_cut_at_a_char_boundary() {
        let long = "é".repeat(600);
        let cut = bounded(long);
        assert!(cut.len() <= 1000);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(bounded("short".into()), "short");
    }
}
