//! The audit findings of issue 12, each reproduced on the real API server by a deterministic
//! perturbation — a cache that syncs late, an edit made while the operator is stopped, a
//! pod held unready, an API error — and the state the operator must reach despite it.
#[path = "../support/mod.rs"]
mod support;

mod api_errors;
mod caches;
mod drift;
mod quantities;
mod volumes;
