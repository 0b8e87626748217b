//! Placing one kind's objects: run by every controller when sharding is on, active while
//! this replica holds the sharder Lease.
//!
//! It watches the metadata of every object of the kind in the controller's scope (the
//! operator's own label selector kept), and on each round of the coordinator decides each
//! object's step ([`super::place`]) and writes it: a merge patch of the labels carrying the
//! `resourceVersion` the decision was made on, so a decision on a stale view fails instead of
//! overwriting a member's hand-off.
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};

use super::place::{decide, Seen, Step};
use super::{Labels, MemberView, ShardContext};

/// Writes in flight at once while placing (a first placement labels every object).
const PLACING: usize = 16;

static KINDS: AtomicU64 = AtomicU64::new(0);

/// Where the placed objects are: the kind (any kind, typed or not, is placed through its
/// metadata), the controller's namespace (None: all), the operator's own label selector.
pub(crate) struct Scope {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub selector: Option<String>,
}

type Meta = PartialObjectMeta<DynamicObject>;

/// `resource`'s objects in `namespace` (all when None), or where `object` is.
pub(crate) fn api(
    client: kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<Meta> {
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    }
}

pub(crate) async fn run(shard: ShardContext, labels: Labels, scope: Scope) {
    let id = KINDS.fetch_add(1, Ordering::Relaxed);
    let mut views = shard.view.clone();
    loop {
        if views.wait_for(Option::is_some).await.is_err() {
            return;
        }
        let client = shard.sharder_client.clone();
        let api = api(client, &scope.resource, scope.namespace.as_deref());
        let mut cfg = watcher::Config::default().page_size(100);
        if let Some(s) = &scope.selector {
            cfg = cfg.labels(s);
        }
        let writer = reflector::store::Writer::<Meta>::new(scope.resource.clone());
        let store = writer.as_reader();
        let events = reflector::reflector(writer, watcher(api, cfg).default_backoff());
        futures::pin_mut!(events);
        let mut synced = false;
        loop {
            tokio::select! {
                ev = events.next() => match ev {
                    Some(Ok(watcher::Event::InitDone)) => synced = true,
                    Some(Err(e)) => tracing::warn!(error = %e, "sharder watch error (retrying)"),
                    Some(Ok(_)) => {}
                    None => break,
                },
                changed = views.changed() => {
                    if changed.is_err() {
                        shard.reports.forget(id);
                        return;
                    }
                    let view = views.borrow_and_update().clone();
                    let Some(view) = view else { break };
                    if synced {
                        place(&shard, &labels, &scope, id, &store, &view).await;
                    }
                }
            }
        }
        shard.reports.forget(id);
    }
}

async fn place(
    shard: &ShardContext,
    labels: &Labels,
    scope: &Scope,
    id: u64,
    store: &Store<Meta>,
    view: &MemberView,
) {
    let objects = store.state();
    let on: HashSet<String> = objects
        .iter()
        .filter_map(|o| o.labels().get(&labels.shard).cloned())
        .collect();
    shard.reports.report(id, on);
    let view = view.at(std::time::Instant::now());
    let steps: Vec<_> = objects
        .iter()
        .filter_map(|o| {
            let uid = o.meta().uid.as_deref()?;
            let seen = Seen {
                uid,
                shard: o.labels().get(&labels.shard).map(String::as_str),
                draining: o.labels().contains_key(&labels.drain),
            };
            match decide(&seen, &view) {
                Step::None => None,
                step => Some((o.clone(), step)),
            }
        })
        .collect();
    futures::stream::iter(steps)
        .for_each_concurrent(PLACING, |(o, step)| {
            write(shard, labels, scope, o, step, &view)
        })
        .await;
}

async fn write(
    shard: &ShardContext,
    labels: &Labels,
    scope: &Scope,
    o: Arc<Meta>,
    step: Step,
    view: &MemberView,
) {
    let current = o.labels().get(&labels.shard).cloned();
    let label_values = match &step {
        Step::Assign(to) => {
            // Moving away from a taken-over member: only while the takeover is surely held.
            if current.as_ref().is_some_and(|c| view.taken.contains(c))
                && view
                    .taken_until
                    .is_none_or(|t| std::time::Instant::now() >= t)
            {
                return;
            }
            serde_json::json!({ labels.shard.clone(): to, labels.drain.clone(): null })
        }
        Step::Drain => {
            serde_json::json!({ labels.drain.clone(): current.clone().unwrap_or_default() })
        }
        Step::None => return,
    };
    let body = serde_json::json!({
        "metadata": { "resourceVersion": o.resource_version(), "labels": label_values }
    });
    let name = o.name_any();
    let api = api(
        shard.sharder_client.clone(),
        &scope.resource,
        o.namespace().as_deref(),
    );
    match api
        .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => tracing::debug!(name = %name, step = ?step, "placed"),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
            tracing::debug!(name = %name, "changed since seen: decided again next round")
        }
        Err(e) => {
            tracing::warn!(error = %e, name = %name, step = ?step, "could not place an object")
        }
    }
}
