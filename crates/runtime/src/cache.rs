//! Watch caches.
//!
//! * [`reflect`] builds the cache of an operator's primary resource for
//!   `Controller::for_stream`, with `managedFields` dropped and a [`Synced`] signal;
//! * [`ChildCache`] holds an operator's children slimmed to what the operator reads (metadata
//!   and status, spec dropped): full objects cost ≈6 KB each, metadata ≈1.6 KB (measured
//!   against this project's API server). It feeds both the controller's `owns_stream` trigger
//!   and the applier's skip decision.
//!
//! Readiness is tracked from the watcher's `InitDone` event rather than with
//! `Store::wait_until_ready`: kube-runtime 5's ready signal wakes only the most recent waiter,
//! so a readiness probe waiting on it can starve the controller's own runner of its wake-up.
use std::fmt::Debug;
use std::hash::Hash;

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::sync::Arc;
use kube::runtime::reflector::{reflector, store, Lookup, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// Becomes true once the first full list of a watch has been stored.
#[derive(Clone)]
pub struct Synced(watch::Receiver<bool>);

impl Synced {
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
    pub fn is_synced(&self) -> bool {
        *self.0.borrow()
    }
}

pub type ObjectStream<K> = std::pin::Pin<Box<dyn Stream<Item = Result<K, watcher::Error>> + Send>>;

fn track<K, S>(events: S) -> (impl Stream<Item = S::Item> + Send, Synced)
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let (tx, rx) = watch::channel(false);
    let s = events.inspect(move |ev| {
        if matches!(ev, Ok(watcher::Event::InitDone)) {
            let _ = tx.send(true);
        }
    });
    (s, Synced(rx))
}

/// A cache of `api`'s objects for `Controller::for_stream(stream, store)`: the stream yields
/// created/updated objects and must be polled (the controller does) to fill the store.
pub fn reflect<K>(api: Api<K>, cfg: watcher::Config) -> (Store<K>, ObjectStream<K>, Synced)
where
    K: Resource + Lookup + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    <K as Lookup>::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    <K as Resource>::DynamicType: Default + Eq + Hash + Clone,
{
    let (reader, writer) = store();
    let (events, synced) = track(watcher(api, cfg).default_backoff().modify(|o: &mut K| {
        o.meta_mut().managed_fields = None;
    }));
    let stream = reflector(writer, events).applied_objects();
    (reader, Box::pin(stream), synced)
}

/// A cache of an operator's children, as full typed objects that `strip` slims down (drop
/// the spec, keep metadata and status) before they are stored.
pub struct ChildCache<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    synced: Synced,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Clone for ChildCache<K> {
    fn clone(&self) -> Self {
        ChildCache { store: self.store.clone(), synced: self.synced.clone() }
    }
}

impl<K> ChildCache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Watches `K` in `namespace` (all when None) for objects matching `label_selector`
    /// (everything when empty). Poll the returned stream (e.g. hand it to
    /// `Controller::owns_stream`) to keep the cache filled.
    pub fn watch(
        client: Client,
        namespace: Option<&str>,
        label_selector: &str,
        strip: fn(&mut K),
    ) -> (Self, ObjectStream<K>)
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    {
        let api: Api<K> = match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        };
        let (reader, writer) = store();
        let mut cfg = watcher::Config::default();
        if !label_selector.is_empty() {
            cfg = cfg.labels(label_selector);
        }
        let (events, synced) = track(watcher(api, cfg).default_backoff().modify(move |o: &mut K| {
            o.meta_mut().managed_fields = None;
            strip(o);
        }));
        let stream = reflector(writer, events).touched_objects();
        (ChildCache { store: reader, synced }, Box::pin(stream))
    }

    /// One cached object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.store.get(&ObjectRef::<K>::new(name).within(namespace))
    }

    /// The cached metadata of one object.
    pub fn meta(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        self.get(namespace, name).map(|o| o.meta().clone())
    }

    /// Every cached object.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    pub fn len(&self) -> usize {
        self.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    pub fn synced(&self) -> &Synced {
        &self.synced
    }
}
