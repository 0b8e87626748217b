//! A run's job events (`artifacts/<ident>/job_events/*.json`, written by ansible-runner)
//! read into the [`Outcome`] the native engine reports, so both engines share the status
//! conditions ([`bosun_ansible::status`]) — ansible-operator reads the same events from its
//! HTTP plugin:
//!
//! * `playbook_on_stats` → the recap for `localhost` (`ansibleResult`) and the end time;
//! * `runner_on_failed` (not `ignore_errors`) and `runner_on_unreachable` → a failure with
//!   `res.msg` (Ansible's censored notice for a `no_log` task, `unknown playbook failure`
//!   when absent); a failure a `rescue` section caught
//!   is not one (Ansible counts it in `rescued`, not `failures`);
//! * `runner_on_ok` of `requeue_after` → `res.period`; 0 or less means no requeue;
//! * no `playbook_on_stats` at all (a syntax error, a crash) is a failure of its own.
use std::path::Path;
use std::time::Duration;

use bosun_ansible::engine::FailedTask;
use bosun_ansible::{Outcome, Stats};
use serde_json::Value;

/// One event as ansible-runner writes it.
#[derive(Clone, Debug)]
pub struct JobEvent {
    pub counter: u64,
    pub event: String,
    pub data: Value,
    pub created: Option<String>,
}

impl JobEvent {
    pub fn from_json(v: Value) -> Option<JobEvent> {
        Some(JobEvent {
            counter: v.get("counter")?.as_u64()?,
            event: v.get("event")?.as_str()?.to_string(),
            created: v.get("created").and_then(Value::as_str).map(String::from),
            data: v.get("event_data").cloned().unwrap_or(Value::Null),
        })
    }

    pub fn task(&self) -> &str {
        self.data["task"].as_str().unwrap_or_default()
    }

    pub fn action(&self) -> &str {
        self.data["task_action"].as_str().unwrap_or_default()
    }

    /// `roles/x/tasks/main.yml:6`.
    pub fn task_path(&self) -> &str {
        self.data["task_path"].as_str().unwrap_or_default()
    }
}

/// The events of one run, in order (files that do not parse are skipped: ansible-runner
/// writes each atomically, so these are foreign files).
pub fn read_dir(dir: &Path) -> std::io::Result<Vec<JobEvent>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read(&p)?;
            if let Some(ev) = serde_json::from_slice(&text)
                .ok()
                .and_then(JobEvent::from_json)
            {
                out.push(ev);
            }
        }
    }
    out.sort_by_key(|e| e.counter);
    Ok(out)
}

fn host_count(data: &Value, key: &str) -> u64 {
    data[key]["localhost"].as_u64().unwrap_or(0)
}

const REQUEUE_ACTIONS: &[&str] = &["requeue_after", "operator_sdk.util.requeue_after"];

/// The run's outcome; `no_recap` describes the run when it ended without a recap.
pub fn outcome(events: &[JobEvent], no_recap: impl FnOnce() -> String) -> Outcome {
    let mut o = Outcome::default();
    let mut stats_seen = false;
    for e in events {
        match e.event.as_str() {
            "playbook_on_stats" => {
                stats_seen = true;
                let d = &e.data;
                o.stats = Stats {
                    ok: host_count(d, "ok"),
                    changed: host_count(d, "changed"),
                    skipped: host_count(d, "skipped"),
                    failures: host_count(d, "failures") + host_count(d, "dark"),
                    rescued: host_count(d, "rescued"),
                    ignored: host_count(d, "ignored"),
                };
                o.completed = e
                    .created
                    .as_deref()
                    .and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok())
                    .map(|t| t.with_timezone(&chrono::Utc));
            }
            "runner_on_failed" | "runner_on_unreachable" => {
                if e.data["ignore_errors"].as_bool() == Some(true) {
                    continue;
                }
                o.failures.push(FailedTask {
                    name: e.task().to_string(),
                    // A `no_log` task's result is censored by Ansible: its notice stands in.
                    msg: e.data["res"]["msg"]
                        .as_str()
                        .or_else(|| e.data["res"]["censored"].as_str())
                        .unwrap_or("unknown playbook failure")
                        .to_string(),
                    location: e.task_path().to_string(),
                });
            }
            "runner_on_ok" if REQUEUE_ACTIONS.contains(&e.action()) => {
                o.requeue_after = requeue(&e.data["res"]["period"]);
            }
            _ => {}
        }
    }
    if stats_seen {
        // Failures a rescue caught are not counted by Ansible: drop as many of the first.
        let counted = usize::try_from(o.stats.failures).unwrap_or(usize::MAX);
        if o.failures.len() > counted {
            let extra = o.failures.len() - counted;
            o.failures.drain(..extra);
        }
    } else {
        o.failures.push(FailedTask {
            name: String::new(),
            msg: no_recap(),
            location: String::new(),
        });
    }
    o
}

/// `requeue_after`'s period; zero, negative or unreadable means no requeue.
fn requeue(period: &Value) -> Option<Duration> {
    let s = period.as_str()?;
    match bosun_watches::file::parse_duration(s) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(period = %s, error = %e, "requeue_after: not a positive duration; not requeued");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(counter: u64, event: &str, data: Value) -> JobEvent {
        JobEvent::from_json(
            json!({"counter": counter, "event": event, "event_data": data,
                                   "created": "2026-01-02T03:04:05.678+00:00"}),
        )
        .expect("event")
    }

    fn stats(ok: u64, changed: u64, failures: u64, rescued: u64) -> JobEvent {
        ev(
            99,
            "playbook_on_stats",
            json!({"ok": {"localhost": ok}, "changed": {"localhost": changed},
                   "failures": if failures > 0 { json!({"localhost": failures}) } else { json!({}) },
                   "rescued": {"localhost": rescued}, "skipped": {}, "dark": {}}),
        )
    }

    #[test]
    fn a_failed_task_is_reported_with_its_message_and_location() {
        let o = outcome(
            &[
                ev(
                    1,
                    "runner_on_ok",
                    json!({"task": "a", "task_action": "command"}),
                ),
                ev(
                    2,
                    "runner_on_failed",
                    json!({"task": "boom", "task_action": "fail",
                    "task_path": "/r/tasks/main.yml:6", "res": {"msg": "it broke"}}),
                ),
                stats(1, 1, 1, 0),
            ],
            || unreachable!(),
        );
        assert!(!o.succeeded());
        assert_eq!(o.failure_messages(), ["it broke"]);
        assert_eq!(o.failures[0].location, "/r/tasks/main.yml:6");
        assert_eq!((o.stats.ok, o.stats.changed, o.stats.failures), (1, 1, 1));
        assert_eq!(o.ansible_result().completion, "2026-01-02T03:04:05.678000");
    }

    #[test]
    fn ignored_and_rescued_failures_do_not_count() {
        let o = outcome(
            &[
                ev(
                    1,
                    "runner_on_failed",
                    json!({"ignore_errors": true, "res": {"msg": "x"}}),
                ),
                ev(2, "runner_on_failed", json!({"res": {"msg": "rescued"}})),
                stats(2, 0, 0, 1),
            ],
            || unreachable!(),
        );
        assert!(o.succeeded(), "{:?}", o.failures);
        let o = outcome(
            &[
                ev(1, "runner_on_failed", json!({"res": {}})),
                stats(0, 0, 1, 0),
            ],
            || unreachable!(),
        );
        assert_eq!(o.failure_messages(), ["unknown playbook failure"]);
    }

    #[test]
    fn a_no_log_failure_reports_the_censored_notice() {
        let notice = "the output has been hidden due to the fact that 'no_log: true' was specified for this result";
        let o = outcome(
            &[
                ev(
                    1,
                    "runner_on_failed",
                    json!({"res": {"censored": notice, "changed": false}}),
                ),
                stats(0, 0, 1, 0),
            ],
            || unreachable!(),
        );
        assert_eq!(o.failure_messages(), [notice]);
    }

    #[test]
    fn requeue_after_periods() {
        let r = |p: &str| {
            outcome(
                &[
                    ev(1, "runner_on_ok", json!({"task_action": "operator_sdk.util.requeue_after", "res": {"period": p}})),
                    stats(1, 0, 0, 0),
                ],
                || unreachable!(),
            )
            .requeue_after
        };
        assert_eq!(r("30s"), Some(Duration::from_secs(30)));
        assert_eq!(r("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(r("0s"), None);
        assert_eq!(r("-5s"), None);
    }

    #[test]
    fn no_recap_is_a_failure() {
        let o = outcome(&[ev(1, "playbook_on_start", json!({}))], || {
            "syntax error".into()
        });
        assert_eq!(o.failure_messages(), ["syntax error"]);
    }

    #[test]
    fn events_are_read_in_counter_order() {
        let d = tempfile::tempdir().expect("dir");
        for (n, name) in [(10, "b"), (2, "a")] {
            std::fs::write(
                d.path().join(format!("{n}-{name}.json")),
                json!({"counter": n, "event": name}).to_string(),
            )
            .expect("write");
        }
        std::fs::write(d.path().join("partial.json.tmp"), "{").expect("write");
        let evs = read_dir(d.path()).expect("read");
        assert_eq!(evs.iter().map(|e| e.counter).collect::<Vec<_>>(), [2, 10]);
    }
}
