//! `bosun verify`: the chaos suite as a tool for any operator — a Rust binary, a Helm chart
//! or an Ansible role run by bosun, or any other operator started by a shell command
//! (operator-sdk's included). It finds the bug classes fault-injection research keeps finding
//! in operators (Sieve, OSDI '22; Acto, SOSP '23): not idempotent after a crash, blind to a
//! stale view, never repairing drift, hot-looping on status, leaking children, finalizers
//! that never clear, writing on every restart.
//!
//! One local control plane (etcd, kube-apiserver, kube-controller-manager for garbage
//! collection and Deployments, the simulated node agent) serves every scenario; each scenario
//! has its own namespace, its own operator process (`WATCH_NAMESPACE` set to it) and its own
//! [`proxy`] between that process and the API server, through which the operator acts as its
//! ServiceAccount, every write it sends is recorded, and its watch events can be held back.
//!
//! 1. `reference`: no fault. Its end state ([`state`]) is what every other scenario must
//!    reach; at rest, then over a restart, it must write nothing; on delete, finalizers clear
//!    and no child outlives its parent.
//! 2. `crash`: `kill -9` while the samples converge, each right after a create of the
//!    operator is committed and before it has the answer (which create is seeded).
//! 3. `apiserver-restart`: the API server down for a few seconds mid-convergence: right
//!    after the operator's k-th write of its work (k seeded, below the reference run's
//!    writes), the operator paused there until the API server is down.
//! 4. `stale`: the watch events of the operator's children held back mid-convergence, then
//!    released in order (its view of them stale, and reordered against the custom
//!    resources').
//! 5. `time-travel`: the custom resources deleted and created again; the operator, restarted,
//!    is served the view of before (its custom resources being deleted) while their watch
//!    events are held back (Sieve's time travel): it must not act on it destructively.
//! 6. `drift`: after convergence a child edited and another deleted behind its back.
//! 7. `spec-change`: a second valid spec ([`schema`]) applied mid-convergence (after the
//!    k-th write, as `apiserver-restart`); compared with a fault-free run of that spec.
//!
//! Where each mid-convergence fault landed is in [`Report::faults`] and under the report's
//! table.
//! 8. `failure`: the operator's writes of its children refused, a child deleted: the custom
//!    resource's status conditions must say so.
//!
//! Every scenario ends with the children and Secret-in-log checks ([`report::check`]).
pub mod operator;
pub mod proxy;
pub mod report;
mod run;
pub mod schema;
pub mod state;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub use report::Report;
pub use run::verify;

/// The scenarios, in the order they run.
pub const SCENARIOS: &[&str] = &[
    "reference",
    "crash",
    "apiserver-restart",
    "stale",
    "time-travel",
    "drift",
    "spec-change",
    "failure",
];

/// The operator under test and what it needs.
#[derive(Clone, Debug)]
pub struct Target {
    /// For the report.
    pub name: String,
    pub command: operator::Command,
    /// Installed before anything runs.
    pub crds: Vec<CustomResourceDefinition>,
    /// Granted to the ServiceAccount, cluster-wide.
    pub rules: Vec<PolicyRule>,
    /// (namespace, name) of the ServiceAccount the operator acts as.
    pub service_account: (String, String),
    /// The objects each scenario applies in its namespace: the custom resources, and any
    /// Secret or ConfigMap they refer to.
    pub samples: Vec<serde_json::Value>,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The short form for CI: fewer kills, shorter windows.
    pub quick: bool,
    /// Seeds every random choice (kill points, the field the second spec changes, which
    /// child drifts): the same seed replays the same run.
    pub seed: u64,
    /// Only these scenarios (`reference` always runs: the others compare with it).
    pub only: Vec<String>,
    /// How long the operator must write nothing once converged.
    pub rest: Duration,
    /// How long the samples may take to converge.
    pub timeout: Duration,
    /// Where the operator's logs go (one per scenario).
    pub logs: PathBuf,
    /// The command line that replays this run, for the report.
    pub replay: String,
}

impl Options {
    pub fn new(quick: bool, seed: u64, logs: PathBuf) -> Options {
        Options {
            quick,
            seed,
            only: Vec::new(),
            rest: Duration::from_secs(if quick { 10 } else { 30 }),
            timeout: Duration::from_secs(if quick { 120 } else { 300 }),
            logs,
            replay: String::new(),
        }
    }
    fn wanted(&self, scenario: &str) -> bool {
        scenario == "reference" || self.only.is_empty() || self.only.iter().any(|o| o == scenario)
    }
}

/// xorshift64*: every random choice of a run from its printed seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// In `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi.saturating_sub(lo)).max(1)
    }
    /// Independent streams per scenario: adding a scenario does not move another's choices.
    pub fn fork(&self, salt: &str) -> Rng {
        let mut h = self.0;
        for b in salt.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        Rng::new(h)
    }
}

/// The default StorageClass, `standard`, whose claims the simulated node agent binds at once
/// and lets grow (the chaos suite's cluster has the same).
pub async fn simulated_storage_class(admin: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::api::storage::v1::StorageClass;
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "bosun.dev/simulated", "allowVolumeExpansion": true,
        "volumeBindingMode": "Immediate",
    }))?;
    kube::Api::<StorageClass>::all(admin.clone())
        .patch(
            "standard",
            &kube::api::PatchParams::apply("bosun-verify").force(),
            &kube::api::Patch::Apply(&sc),
        )
        .await?;
    Ok(())
}

/// A seed from the clock, for a run given none.
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 % 1_000_000_007)
        .unwrap_or(1)
        .max(1)
}
