//! The status ansible-operator writes on the custom resource, as pure functions over the
//! status JSON: conditions `Running`, `Successful` and `Failure` with its reasons, messages
//! and `ansibleResult`, every other status key kept, and its `SetCondition` rule (same type,
//! status and reason: no change, except `Failure`, always replaced; `lastTransitionTime` kept
//! while the status stays).
//!
//! Differences, so that the host writes status once per reconcile and not at all when nothing
//! changed: there is no separate "Running reconciliation" write before the run; a
//! `Running`/`Failure` condition whose `ansibleResult` counts are unchanged keeps its old
//! `completion` time instead of being rewritten with a new one; and a successful run that
//! changed nothing, after a successful run, keeps the `Running` condition as it was — its
//! `ansibleResult` stays that of the last run that changed something (ansible-operator would
//! rewrite it with the no-op run's counts and time, a status write per reconcile, and per CR
//! after every restart); likewise a run that changed nothing and failed with the same
//! message as the `Failure` condition already says (a retry) leaves it as it was.
use serde_json::{json, Map, Value};

pub const RUNNING: &str = "Running";
pub const SUCCESSFUL: &str = "Successful";
pub const FAILURE: &str = "Failure";
pub const REASON_RUNNING: &str = "Running";
pub const REASON_SUCCESSFUL: &str = "Successful";
pub const REASON_FAILED: &str = "Failed";
pub const MSG_RUNNING: &str = "Running reconciliation";
pub const MSG_AWAITING: &str = "Awaiting next reconciliation";
pub const MSG_SUCCEEDED: &str = "Last reconciliation succeeded";

/// `ansibleResult`: the play's stats for `localhost` and the time the run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnsibleResult {
    pub ok: u64,
    pub changed: u64,
    pub skipped: u64,
    pub failures: u64,
    /// ansible-runner's event time format (`2006-01-02T15:04:05.999999`, UTC, no zone).
    pub completion: String,
}

impl AnsibleResult {
    fn to_json(&self) -> Value {
        json!({"ok": self.ok, "changed": self.changed, "skipped": self.skipped,
               "failures": self.failures, "completion": self.completion})
    }
}

/// ansible-runner's time format for `completion`.
/// The longest failure message a condition or Event carries: a hostile spec can make a task
/// fail with a message as large as the spec.
pub const MAX_FAILURE_MESSAGE: usize = 8 * 1024;

/// A run's failure messages joined, capped at [`MAX_FAILURE_MESSAGE`] bytes.
pub fn failure_message(messages: &[String]) -> String {
    let mut msg = messages.join("\n");
    if msg.len() > MAX_FAILURE_MESSAGE {
        let mut cut = MAX_FAILURE_MESSAGE;
        while !msg.is_char_boundary(cut) {
            cut -= 1;
        }
        msg.truncate(cut);
        msg.push_str("… (truncated)");
    }
    msg
}

/// The message of a status's true `Failure` condition (the last failure reported).
pub fn previous_failure(status: Option<&Value>) -> Option<&str> {
    status?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == FAILURE && c["status"] == "True")?
        .get("message")?
        .as_str()
}

pub fn completion_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// RFC 3339 seconds, as `metav1.Time` serializes.
pub fn transition_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

struct Status {
    conditions: Vec<Map<String, Value>>,
    custom: Map<String, Value>,
}

impl Status {
    /// ansible-operator's `CreateFromMap`: custom keys kept; each condition reduced to its
    /// known fields with the same defaults.
    fn parse(status: Option<&Value>, now: &str) -> Status {
        let empty = Map::new();
        let m = status.and_then(Value::as_object).unwrap_or(&empty);
        let mut custom = m.clone();
        custom.remove("conditions");
        let conditions = m
            .get("conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(Value::as_object)
                    .map(|c| normalize(c, now))
                    .collect()
            })
            .unwrap_or_default();
        Status { conditions, custom }
    }

    fn get(&self, ty: &str) -> Option<&Map<String, Value>> {
        self.conditions.iter().find(|c| c["type"] == ty)
    }

    fn set(&mut self, mut cond: Map<String, Value>) {
        let ty = cond["type"].as_str().unwrap_or_default().to_string();
        if let Some(cur) = self.get(&ty) {
            let same = cur["status"] == cond["status"] && cur["reason"] == cond["reason"];
            if same && ty != FAILURE && same_result(cur, &cond) {
                return;
            }
            if cur["status"] == cond["status"] {
                cond.insert(
                    "lastTransitionTime".into(),
                    cur["lastTransitionTime"].clone(),
                );
            }
            if same && same_result(cur, &cond) && cur["message"] == cond["message"] {
                // Nothing the user can see changed: keep the old completion time too.
                cond = cur.clone();
            }
        }
        self.conditions.retain(|c| c["type"] != ty.as_str());
        self.conditions.push(cond);
    }

    fn set_status_of(&mut self, ty: &str, status: &str) {
        if let Some(mut c) = self.get(ty).cloned() {
            c.insert("status".into(), status.into());
            self.set(c);
        }
    }

    fn into_json(self) -> Value {
        let mut m = self.custom;
        m.insert(
            "conditions".into(),
            Value::Array(self.conditions.into_iter().map(Value::Object).collect()),
        );
        Value::Object(m)
    }
}

fn same_result(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    let counts = |c: &Map<String, Value>| {
        c.get("ansibleResult").map(|r| {
            ["ok", "changed", "skipped", "failures"]
                .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
        })
    };
    counts(a) == counts(b)
}

fn normalize(c: &Map<String, Value>, now: &str) -> Map<String, Value> {
    let s =
        |k: &str, d: &str| Value::String(c.get(k).and_then(Value::as_str).unwrap_or(d).to_string());
    let mut out = Map::new();
    out.insert("type".into(), s("type", RUNNING));
    out.insert("status".into(), s("status", "True"));
    out.insert("lastTransitionTime".into(), s("lastTransitionTime", now));
    if let Some(r) = c.get("ansibleResult").filter(|r| r.is_object()) {
        out.insert("ansibleResult".into(), r.clone());
    }
    out.insert("reason".into(), s("reason", ""));
    out.insert("message".into(), s("message", ""));
    out
}

fn condition(
    ty: &str,
    status: &str,
    result: Option<&AnsibleResult>,
    reason: &str,
    msg: &str,
    now: &str,
) -> Map<String, Value> {
    let mut c = Map::new();
    c.insert("type".into(), ty.into());
    c.insert("status".into(), status.into());
    c.insert("lastTransitionTime".into(), now.into());
    if let Some(r) = result {
        c.insert("ansibleResult".into(), r.to_json());
    }
    c.insert("reason".into(), reason.into());
    c.insert("message".into(), msg.into());
    c
}

/// ansible-operator's `markRunning` (bosun's host does not write it; kept for `bosun` tools
/// that want to show a run in progress).
pub fn mark_running(status: Option<&Value>, now: &str) -> Value {
    let mut st = Status::parse(status, now);
    st.set(condition(
        RUNNING,
        "True",
        None,
        REASON_RUNNING,
        MSG_RUNNING,
        now,
    ));
    st.set_status_of(SUCCESSFUL, "False");
    st.into_json()
}

/// ansible-operator's `markDone`: the status after a run whose stats are `result` and whose
/// failed tasks said `failures` (empty: the run succeeded).
pub fn mark_done(
    status: Option<&Value>,
    result: &AnsibleResult,
    failures: &[String],
    now: &str,
) -> Value {
    let mut st = Status::parse(status, now);
    if failures.is_empty() {
        // A run that changed nothing after a successful one leaves `Running` (and its
        // `ansibleResult`) as the last run that did something recorded it.
        let settled = result.changed == 0
            && st.get(RUNNING).is_some_and(|c| {
                c["status"] == "True"
                    && c["reason"] == REASON_SUCCESSFUL
                    && c["message"] == MSG_AWAITING
                    && c.contains_key("ansibleResult")
            });
        if !settled {
            st.set(condition(
                RUNNING,
                "True",
                Some(result),
                REASON_SUCCESSFUL,
                MSG_AWAITING,
                now,
            ));
        }
        st.set(condition(
            SUCCESSFUL,
            "True",
            None,
            REASON_SUCCESSFUL,
            MSG_SUCCEEDED,
            now,
        ));
        st.set(condition(FAILURE, "False", None, "", "", now));
    } else {
        st.set_status_of(RUNNING, "False");
        let message = failures.join("\n");
        // The same failure again, by a run that changed nothing (a retry): the condition
        // stays as the first such run wrote it.
        let repeated = result.changed == 0
            && st.get(FAILURE).is_some_and(|c| {
                c["status"] == "True" && c["reason"] == REASON_FAILED && c["message"] == message
            });
        if !repeated {
            st.set(condition(
                FAILURE,
                "True",
                Some(result),
                REASON_FAILED,
                &message,
                now,
            ));
        }
        st.set(condition(SUCCESSFUL, "False", None, "", "", now));
    }
    st.into_json()
}

/// ansible-operator's `markError`: the run could not start (bad annotation, role error).
pub fn mark_error(status: Option<&Value>, message: &str, now: &str) -> Value {
    let mut st = Status::parse(status, now);
    st.set_status_of(RUNNING, "False");
    st.set(condition(
        FAILURE,
        "True",
        None,
        REASON_FAILED,
        message,
        now,
    ));
    st.into_json()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_messages_are_joined_and_capped_on_a_char_boundary() {
        assert_eq!(failure_message(&["a".into(), "b".into()]), "a\nb");
        let long = "é".repeat(MAX_FAILURE_MESSAGE);
        let m = failure_message(&[long]);
        assert!(m.ends_with("… (truncated)") && m.len() <= MAX_FAILURE_MESSAGE + 20);
        let st = serde_json::json!({"conditions": [
            {"type": "Running", "status": "True", "message": "x"},
            {"type": "Failure", "status": "True", "message": "boom"}]});
        assert_eq!(previous_failure(Some(&st)), Some("boom"));
        assert_eq!(previous_failure(None), None);
    }

    fn res(changed: u64, t: &str) -> AnsibleResult {
        AnsibleResult {
            ok: 4,
            changed,
            skipped: 0,
            failures: 0,
            completion: t.into(),
        }
    }

    #[test]
    fn success_then_unchanged_is_identical() {
        let s1 = mark_done(Some(&json!({"custom": 1})), &res(4, "t1"), &[], "T1");
        assert_eq!(s1["custom"], 1);
        let types: Vec<_> = s1["conditions"]
            .as_array()
            .expect("test value")
            .iter()
            .map(|c| c["type"].clone())
            .collect();
        assert_eq!(types, vec!["Running", "Successful", "Failure"]);
        assert_eq!(s1["conditions"][0]["ansibleResult"]["changed"], 4);
        assert_eq!(s1["conditions"][0]["message"], MSG_AWAITING);
        assert_eq!(
            s1["conditions"][2],
            json!({"type": "Failure", "status": "False", "lastTransitionTime": "T1", "reason": "", "message": ""})
        );
        let s2 = mark_done(Some(&s1), &res(0, "t2"), &[], "T2");
        assert_eq!(
            s2, s1,
            "a run that changed nothing leaves the status as it was"
        );
        let s3 = mark_done(Some(&s2), &res(1, "t3"), &[], "T3");
        let running = s3["conditions"]
            .as_array()
            .expect("test value")
            .iter()
            .find(|c| c["type"] == "Running")
            .expect("test value");
        assert_eq!(running["ansibleResult"]["changed"], 1, "{s3}");
        assert_eq!(running["ansibleResult"]["completion"], "t3");
        assert_eq!(
            running["lastTransitionTime"], "T1",
            "status unchanged keeps the time"
        );
        // After a failure, the first good run is recorded even when it changed nothing.
        let failed = mark_done(Some(&s3), &res(0, "t4"), &["boom".into()], "T4");
        let recovered = mark_done(Some(&failed), &res(0, "t5"), &[], "T5");
        let running = recovered["conditions"]
            .as_array()
            .expect("test value")
            .iter()
            .find(|c| c["type"] == "Running")
            .expect("test value");
        assert_eq!(running["status"], "True");
        assert_eq!(running["ansibleResult"]["completion"], "t5");
    }

    #[test]
    fn failure_and_recovery() {
        let ok = mark_done(None, &res(1, "t1"), &[], "T1");
        let failed = mark_done(
            Some(&ok),
            &res(0, "t2"),
            &["boom".into(), "bang".into()],
            "T2",
        );
        let by = |s: &Value, t: &str| {
            s["conditions"]
                .as_array()
                .expect("test value")
                .iter()
                .find(|c| c["type"] == t)
                .cloned()
                .expect("test value")
        };
        assert_eq!(by(&failed, "Running")["status"], "False");
        assert_eq!(by(&failed, "Running")["reason"], "Successful");
        assert_eq!(by(&failed, "Failure")["message"], "boom\nbang");
        assert_eq!(by(&failed, "Failure")["reason"], "Failed");
        assert_eq!(
            by(&failed, "Successful"),
            json!({"type": "Successful", "status": "False", "lastTransitionTime": "T2", "reason": "", "message": ""})
        );
        let retried = mark_done(
            Some(&failed),
            &res(0, "t3"),
            &["boom".into(), "bang".into()],
            "T3",
        );
        assert_eq!(
            retried, failed,
            "a retry failing the same way changes nothing"
        );
        let other = mark_done(Some(&failed), &res(0, "t3"), &["other".into()], "T3");
        assert_eq!(by(&other, "Failure")["message"], "other");
        let err = mark_error(Some(&ok), "Unable to run reconciliation", "T3");
        assert_eq!(
            by(&err, "Failure")["message"],
            "Unable to run reconciliation"
        );
        let running = mark_running(Some(&ok), "T4");
        assert_eq!(by(&running, "Running")["reason"], "Running");
        assert_eq!(by(&running, "Successful")["status"], "False");
    }
}

/// The status the host writes after a run (its single status write): what `k8s_status`
/// asked for the CR merged into `current`, then [`mark_done`] with the run's stats and
/// failures. Equal to `current` when nothing changed: then the host writes nothing.
pub fn after_run(
    current: Option<&Value>,
    outcome: &crate::Outcome,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let merged = match &outcome.status {
        Some(req) => crate::modules::k8s_status::apply(current, req),
        None => current.cloned().unwrap_or_else(|| json!({})),
    };
    mark_done(
        Some(&merged),
        &outcome.ansible_result(),
        &outcome.failure_messages(),
        &transition_time(now),
    )
}

#[cfg(test)]
mod after_run_tests {
    use super::*;

    #[test]
    fn requested_status_is_merged_then_marked() {
        let mut o = crate::Outcome::default();
        o.stats.ok = 2;
        o.status = Some(crate::StatusRequest {
            status: json!({"phase": "Ready"}).as_object().cloned().expect("map"),
            conditions: vec![
                json!({"type": "Custom", "status": "True", "lastTransitionTime": "t"}),
            ],
            replace: false,
        });
        let now = chrono::Utc::now();
        let s = after_run(Some(&json!({"keep": 1})), &o, now);
        assert_eq!(s["keep"], 1);
        assert_eq!(s["phase"], "Ready");
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, vec!["Custom", "Running", "Successful", "Failure"]);
        assert_eq!(
            after_run(Some(&s), &o, now),
            s,
            "a second identical run changes nothing"
        );
    }
}
