//! bosun's operator runtime: what kube-rs leaves to each operator author.
//!
//! * [`controller`] wires any operator the same way — typed or `DynamicObject` kinds — per
//!   watched namespace, with readiness, re-list safety and a retry policy by error category;
//!   [`dynamic`] watches children whose kinds are found at run time;
//! * [`manager::Manager`] runs several controllers in one process with bounded concurrency, a
//!   watch scope, an optional client-side rate limit, and graceful shutdown;
//! * [`leader::LeaderElector`] holds a `coordination.k8s.io/v1` Lease, client-go style: the
//!   leader steps down as soon as it cannot prove it still holds the lease (the manager
//!   aborts every reconcile and waits as a warm standby, its caches kept), and a standby
//!   judges expiry by its own monotonic clock, never by comparing timestamps written by
//!   another machine;
//! * [`http`] serves `/metrics`, `/healthz` and `/readyz`; [`metrics`] holds the registry;
//! * [`apply::Applier`] does server-side apply with one field manager and skips writes whose
//!   desired state is already what the cache holds; [`status`] writes status only on change;
//!   [`conditions`] keeps `lastTransitionTime` honest; [`events`] publishes Kubernetes Events;
//! * [`client::client`] is the API client: kube's stack over a pool that lets idle connections go;
//! * [`shard`] spreads every operator's objects over the replicas, on Leases and labels;
//! * [`webhook`] serves admission and conversion webhooks over HTTPS for any operator.
pub mod apply;
pub mod auth;
pub mod cache;
pub mod claims;
pub mod client;
pub mod conditions;
pub mod controller;
pub mod dynamic;
pub mod error;
pub mod events;
pub mod fence;
pub mod heap;
pub mod http;
pub mod kubeversion;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod names;
pub mod owned;
pub mod owner;
pub mod quantity;
pub mod queue;
pub mod ratelimit;
pub mod rbac;
pub mod resources;
pub(crate) mod runner;
pub mod shard;
pub mod status;
pub mod telemetry;
pub mod webhook;

pub use controller::{Primary, RetryPolicy, Wiring};
pub use error::ErrorCategory;
pub use manager::{ControllerContext, Manager, ManagerConfig, Operator, Scope};
