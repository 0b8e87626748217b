//! Kubernetes Events (`events.k8s.io/v1`) for what a user must see in `kubectl describe`.
//! kube-runtime's recorder de-duplicates repeats into a series.
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

#[derive(Clone)]
pub struct Events {
    recorder: std::sync::Arc<Recorder>,
}

impl Events {
    pub fn new(client: Client, controller: &str) -> Self {
        let reporter = Reporter {
            controller: controller.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Events {
            recorder: std::sync::Arc::new(Recorder::new(client, reporter)),
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
    /// (regarding, related, reason, action) are folded into one event series by kube-runtime,
    /// so events about different related objects stay distinct.
    pub async fn publish_related(
        &self,
        regarding: &ObjectReference,
        related: Option<ObjectReference>,
        warning: bool,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let mut note: String = note.into();
        if note.len() > 1000 {
            let mut cut = 1000;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
        }
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: related,
        };
        if let Err(e) = self.recorder.publish(&ev, regarding).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }
}
