//! What a run reports to its host.
use std::time::Duration;

use serde_json::Value as Json;

use super::TouchedKinds;

/// What Ansible shows instead of the result of a task with `no_log: true` (and what bosun
/// writes instead of its failure message).
pub const CENSORED: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    Ok,
    Changed,
    Skipped,
    Failed,
    /// Failed inside a block whose `rescue` ran.
    Rescued,
    /// Failed with `ignore_errors`.
    Ignored,
}

#[derive(Clone, Debug)]
pub struct TaskResult {
    pub name: String,
    /// The module's short name (`k8s`, `set_fact`, ...).
    pub module: String,
    pub status: TaskStatus,
    /// The result as `register` stores it.
    pub result: Json,
    /// file:line:col of the task.
    pub location: String,
}

/// The play recap for `localhost`, as Ansible counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ok: u64,
    pub changed: u64,
    pub skipped: u64,
    pub failures: u64,
    pub rescued: u64,
    pub ignored: u64,
}

#[derive(Clone, Debug)]
pub struct FailedTask {
    pub name: String,
    pub msg: String,
    pub location: String,
}

#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Every task run, in order (empty when [`crate::RunContext::keep_results`] is off).
    pub tasks: Vec<TaskResult>,
    pub stats: Stats,
    /// Failures that count (not ignored, not rescued), in order; ansible-operator joins their
    /// messages with `\n` in the `Failure` condition.
    pub failures: Vec<FailedTask>,
    /// What `k8s_status` asked for the run's own CR, merged in order: the host writes it
    /// with its single status update (see [`crate::status`]).
    pub status: Option<StatusRequest>,
    /// The last `requeue_after` period asked for.
    pub requeue_after: Option<Duration>,
    /// Events created by `k8s_event`.
    pub events: Vec<Json>,
    /// `(apiVersion, kind)` of every object `k8s` manages (state present, changed or not)
    /// and `k8s_scale` changed: the host's dependent watches.
    pub touched: TouchedKinds,
    /// When the run ended.
    pub completed: Option<chrono::DateTime<chrono::Utc>>,
}

/// Status changes asked by `k8s_status` for the CR of the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusRequest {
    /// Keys to merge into `.status` (conditions excluded).
    pub status: serde_json::Map<String, Json>,
    /// Conditions, merged by type.
    pub conditions: Vec<Json>,
    /// `replace: true`: the status is replaced rather than merged.
    pub replace: bool,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.failures.is_empty()
    }

    /// `ansibleResult` for the status conditions.
    pub fn ansible_result(&self) -> crate::status::AnsibleResult {
        crate::status::AnsibleResult {
            ok: self.stats.ok,
            changed: self.stats.changed,
            skipped: self.stats.skipped,
            failures: self.stats.failures,
            completion: crate::status::completion_time(
                self.completed.unwrap_or_else(chrono::Utc::now),
            ),
        }
    }

    /// The failure messages, as ansible-operator collects them.
    pub fn failure_messages(&self) -> Vec<String> {
        self.failures.iter().map(|f| f.msg.clone()).collect()
    }
}
