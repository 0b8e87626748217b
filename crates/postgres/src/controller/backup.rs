//! Backups, the operator's side (pure): the status's backup fields and conditions from what
//! the primary's manager reports of the store, and whether a base backup is due — on request
//! (a new value of the [`REQUEST_ANNOTATION`]), on the schedule, or the first one once the
//! cluster is up. The backup itself runs in the primary's manager (`POST /backup`).
use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;

use bosun_runtime::conditions::{condition, set_condition};

use crate::api::{BackupStatus, PostgresClusterStatus};
use crate::backup::schedule::Cron;
use crate::instance::{BackupState, InstanceState};
use crate::validate::Plan;

use super::reason::Reason;

/// Set it (to any new value, e.g. a timestamp) to take a base backup now.
pub const REQUEST_ANNOTATION: &str = "postgres.lukeb0nd.com/backup-request";

/// Why a base backup starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The annotation's new value.
    Request(String),
    /// The schedule's slot (RFC 3339).
    Schedule(String),
    /// The store holds no backup yet.
    First,
}

/// The backup fields after this cycle: the store's truth where the primary reported it,
/// the previous values otherwise. A failure (its time and message) is known only to the
/// manager of the primary that ran the backup, and only until it restarts: it is kept here
/// until a later one.
pub fn status(prev: Option<&BackupStatus>, seen: Option<&BackupState>) -> BackupStatus {
    let mut s = prev.cloned().unwrap_or_default();
    let Some(b) = seen else { return s };
    if b.first_recoverability_point.is_some() {
        s.first_recoverability_point = b.first_recoverability_point.clone();
    }
    if b.last_successful.is_some() {
        s.last_successful_backup = b.last_successful.clone();
    }
    let newer_failure = b.last_failed.is_some()
        && later(s.last_failed_backup.clone(), b.last_failed.clone()) != s.last_failed_backup;
    if newer_failure {
        s.last_failed_backup = b.last_failed.clone();
        s.last_failed_backup_message = b.last_failure.clone();
    }
    if b.last_archived_wal.is_some() {
        s.last_archived_wal = b.last_archived_wal.clone();
        s.last_archived_wal_time = b.last_archived_time.clone();
    }
    s
}

fn later(a: Option<String>, b: Option<String>) -> Option<String> {
    match (parse(a.as_deref()), parse(b.as_deref())) {
        (Some(x), Some(y)) if y > x => b,
        (None, Some(_)) => b,
        _ => a.or(b),
    }
}

fn parse(t: Option<&str>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.to_utc())
}

/// ContinuousArchiving, from the primary's report (kept as it was when no primary reported
/// this cycle), and LastBackupSucceeded, from the backup times and message `status` holds
/// (its `backup`, already merged by [`status`]).
pub fn conditions(
    status: &mut PostgresClusterStatus,
    prev: &PostgresClusterStatus,
    seen: Option<&BackupState>,
    generation: Option<i64>,
    now: Timestamp,
) {
    if let Some(c) = last_backup(status.backup.as_ref(), generation) {
        set_condition(&mut status.conditions, &prev.conditions, c, now);
    }
    let Some(b) = seen else { return };
    if let Some(why) = &b.store_refused {
        let c = condition(
            "ContinuousArchiving",
            false,
            Reason::StoreOwnedByAnotherCluster.as_str(),
            why.clone(),
            generation,
        );
        set_condition(&mut status.conditions, &prev.conditions, c, now);
        return;
    }
    let failing = match (
        parse(b.last_failed_time.as_deref()),
        parse(b.last_archived_time.as_deref()),
    ) {
        (Some(f), Some(a)) => f > a,
        (Some(_), None) => true,
        _ => false,
    };
    let archiving = if failing {
        condition(
            "ContinuousArchiving",
            false,
            Reason::ArchiveFailing.as_str(),
            format!(
                "archiving {} failed at {}; see the primary's log",
                b.last_failed_wal.as_deref().unwrap_or("a WAL file"),
                b.last_failed_time.as_deref().unwrap_or_default()
            ),
            generation,
        )
    } else if let Some(wal) = &b.last_archived_wal {
        condition(
            "ContinuousArchiving",
            true,
            Reason::WalArchived.as_str(),
            format!(
                "{wal} archived at {}",
                b.last_archived_time.as_deref().unwrap_or_default()
            ),
            generation,
        )
    } else {
        condition(
            "ContinuousArchiving",
            false,
            Reason::NoWalArchivedYet.as_str(),
            "no WAL segment has been archived yet",
            generation,
        )
    };
    set_condition(&mut status.conditions, &prev.conditions, archiving, now);
}

/// The condition a replica's failing reads of the backup store are said in.
pub const ARCHIVE_READABLE: &str = "ArchiveReadable";

/// `ArchiveReadable`, for a cluster with a backup store: False while any replica reports
/// that its `restore_command` (or its manager's own look at the store) fails, naming each
/// with the store's words; True once none does. A replica whose WAL is gone from its
/// primary can only catch up from the store, so without this the user sees only an unready
/// member. An instance that did not answer this cycle is not taken as recovered: a False
/// condition stays as it was until every member with a pod (`members`) has answered
/// without a failure. No store: the condition is removed.
pub fn archive_reads(
    status: &mut PostgresClusterStatus,
    prev: &PostgresClusterStatus,
    states: &BTreeMap<u32, InstanceState>,
    members: &BTreeSet<u32>,
    has_store: bool,
    generation: Option<i64>,
    now: Timestamp,
) {
    if !has_store {
        status.conditions.retain(|c| c.type_ != ARCHIVE_READABLE);
        return;
    }
    let failing: Vec<String> = states
        .values()
        .filter_map(|s| {
            let why = s.archive_read_failure.as_deref()?;
            Some(format!("{}: {}", s.name, why.trim()))
        })
        .collect();
    let c = if !failing.is_empty() {
        condition(
            ARCHIVE_READABLE,
            false,
            Reason::ArchiveReadFailing.as_str(),
            format!(
                "{}; a replica that cannot read the WAL it needs stays unready until the \
                 store answers (it asks again by itself)",
                failing.join("; ")
            ),
            generation,
        )
    } else {
        let was_failing = prev
            .conditions
            .iter()
            .any(|c| c.type_ == ARCHIVE_READABLE && c.status == "False");
        if was_failing && members.iter().any(|m| !states.contains_key(m)) {
            return;
        }
        condition(
            ARCHIVE_READABLE,
            true,
            Reason::ArchiveReadable.as_str(),
            "no replica reports a failure reading the backup store",
            generation,
        )
    };
    set_condition(&mut status.conditions, &prev.conditions, c, now);
}

/// LastBackupSucceeded: the later of the last failure and the last success; None before
/// any backup ended.
fn last_backup(b: Option<&BackupStatus>, generation: Option<i64>) -> Option<Condition> {
    let b = b?;
    let failed = parse(b.last_failed_backup.as_deref());
    let succeeded = parse(b.last_successful_backup.as_deref());
    match (failed, succeeded) {
        (Some(f), s) if s.is_none_or(|s| f > s) => Some(condition(
            "LastBackupSucceeded",
            false,
            Reason::BackupFailed.as_str(),
            b.last_failed_backup_message
                .clone()
                .unwrap_or_else(|| "the last base backup failed".into()),
            generation,
        )),
        (_, Some(_)) => Some(condition(
            "LastBackupSucceeded",
            true,
            Reason::BackupSucceeded.as_str(),
            format!(
                "base backup completed at {}",
                b.last_successful_backup.as_deref().unwrap_or_default()
            ),
            generation,
        )),
        _ => None,
    }
}

/// The primary runs without the store: it was started before `spec.backup` was set (pods
/// are made once; the store reaches an instance when its pod is next created).
pub fn not_mounted(
    status: &mut PostgresClusterStatus,
    prev: &PostgresClusterStatus,
    generation: Option<i64>,
    now: Timestamp,
) {
    set_condition(
        &mut status.conditions,
        &prev.conditions,
        condition(
            "ContinuousArchiving",
            false,
            Reason::StoreNotInUse.as_str(),
            "the primary was started without the backup store: nothing is archived until its \
             pod is recreated (e.g. `kubectl delete pod` of the primary; a failover follows)",
            generation,
        ),
        now,
    );
}

/// Whether a base backup should start now. `since` is when the schedule started counting
/// (the cluster's creation) when no scheduled backup ran yet.
pub fn due(
    plan: &Plan,
    request: Option<&str>,
    prev: Option<&BackupStatus>,
    seen: &BackupState,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<Trigger> {
    let b = plan.backup.as_ref()?;
    // Another cluster's store: no backup goes there, the first one included (it would look
    // as if the store had one).
    if seen.running || seen.store_refused.is_some() {
        return None;
    }
    if let Some(r) = request.filter(|r| !r.is_empty()) {
        if prev.and_then(|p| p.last_backup_request.as_deref()) != Some(r) {
            return Some(Trigger::Request(r.to_string()));
        }
    }
    // An instance that has not listed its store yet does not know it is empty.
    if seen.backups == 0 && seen.last_failed.is_none() && !seen.listing_pending {
        return Some(Trigger::First);
    }
    let cron = Cron::parse(b.schedule.as_deref()?).ok()?;
    let from = parse(prev.and_then(|p| p.last_scheduled_backup.as_deref())).unwrap_or(since);
    // The latest slot that has come: missed slots (an operator down for days) make one
    // backup, not a burst.
    let mut slot = cron.next_after(from).filter(|s| *s <= now)?;
    for _ in 0..10_000 {
        match cron.next_after(slot) {
            Some(n) if n <= now => slot = n,
            _ => break,
        }
    }
    Some(Trigger::Schedule(
        slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    ))
}

/// The status once `trigger`'s backup has started.
pub fn started(mut s: BackupStatus, trigger: &Trigger) -> BackupStatus {
    match trigger {
        Trigger::Request(r) => s.last_backup_request = Some(r.clone()),
        Trigger::Schedule(t) => s.last_scheduled_backup = Some(t.clone()),
        Trigger::First => {}
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::plan_of;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    fn one_backup() -> BackupState {
        BackupState {
            backups: 1,
            last_successful: Some("2026-11-24T03:00:05Z".into()),
            ..Default::default()
        }
    }

    #[test]
    fn backups_are_due_on_request_on_schedule_and_first() {
        let p = plan_of(serde_json::json!({
            "backup": {"store": {"volume": {"size": "1Gi"}}, "schedule": "0 3 * * *"}
        }));
        let since = at("2026-11-20T10:00:00Z");
        let now = at("2026-11-25T01:00:00Z");
        // Nothing in the store yet: the first backup.
        assert_eq!(
            due(&p, None, None, &BackupState::default(), since, now),
            Some(Trigger::First)
        );
        // A new request value; the same value again is not a new request.
        let mut prev = BackupStatus {
            last_scheduled_backup: Some("2026-11-24T03:00:00Z".into()),
            ..Default::default()
        };
        assert_eq!(
            due(&p, Some("r1"), Some(&prev), &one_backup(), since, now),
            Some(Trigger::Request("r1".into()))
        );
        prev = started(prev, &Trigger::Request("r1".into()));
        assert_eq!(
            due(&p, Some("r1"), Some(&prev), &one_backup(), since, now),
            None
        );
        // The next slot has come: one backup for it, even if several were missed.
        let later = at("2026-11-28T04:00:00Z");
        assert_eq!(
            due(&p, Some("r1"), Some(&prev), &one_backup(), since, later),
            Some(Trigger::Schedule("2026-11-28T03:00:00Z".into()))
        );
        // Never while one runs, never without a store.
        let running = BackupState {
            running: true,
            ..one_backup()
        };
        assert_eq!(
            due(&p, Some("r2"), Some(&prev), &running, since, later),
            None
        );
        let none = plan_of(serde_json::json!({}));
        assert_eq!(
            due(&none, Some("r2"), None, &BackupState::default(), since, now),
            None
        );
    }

    #[test]
    fn status_keeps_the_latest_failure_and_the_store_truth() {
        let prev = BackupStatus {
            last_failed_backup: Some("2026-11-25T00:00:00Z".into()),
            last_archived_wal: Some("000000010000000000000003".into()),
            ..Default::default()
        };
        let seen = BackupState {
            backups: 2,
            first_recoverability_point: Some("2026-11-20T03:00:05Z".into()),
            last_successful: Some("2026-11-24T03:00:05Z".into()),
            last_failed: Some("2026-11-23T00:00:00Z".into()),
            last_archived_wal: Some("000000010000000000000005".into()),
            last_archived_time: Some("2026-11-25T00:10:00Z".into()),
            ..Default::default()
        };
        let s = status(Some(&prev), Some(&seen));
        assert_eq!(
            s.last_failed_backup.as_deref(),
            Some("2026-11-25T00:00:00Z")
        );
        assert_eq!(
            s.last_successful_backup.as_deref(),
            Some("2026-11-24T03:00:05Z")
        );
        assert_eq!(
            s.first_recoverability_point.as_deref(),
            Some("2026-11-20T03:00:05Z")
        );
        assert_eq!(
            s.last_archived_wal.as_deref(),
            Some("000000010000000000000005")
        );
        assert_eq!(status(Some(&prev), None), prev);
    }

    /// A failure is reported once, by the primary that ran the backup; the next primary (or
    /// the same manager restarted) knows only the store's successful backups. The status
    /// keeps the failure until a later backup succeeds.
    #[test]
    fn a_backup_failure_outlives_the_primary_that_saw_it() {
        let now = Timestamp::now();
        let cycle = |prev: &PostgresClusterStatus, seen: &BackupState| {
            let mut s = PostgresClusterStatus {
                backup: Some(status(prev.backup.as_ref(), Some(seen))),
                ..Default::default()
            };
            conditions(&mut s, prev, Some(seen), Some(1), now);
            s
        };
        let last = |s: &PostgresClusterStatus| {
            let c = s
                .conditions
                .iter()
                .find(|c| c.type_ == "LastBackupSucceeded")
                .cloned()
                .expect("LastBackupSucceeded");
            (c.status, c.reason, c.message)
        };
        let store_truth = BackupState {
            backups: 1,
            last_successful: Some("2026-11-24T03:00:05Z".into()),
            ..Default::default()
        };
        let failed_on_old_primary = BackupState {
            last_failed: Some("2026-11-25T03:00:09Z".into()),
            last_failure: Some("pg_basebackup: the store is full".into()),
            ..store_truth.clone()
        };
        let s1 = cycle(&PostgresClusterStatus::default(), &failed_on_old_primary);
        let failed = (
            "False".to_string(),
            "BackupFailed".to_string(),
            "pg_basebackup: the store is full".to_string(),
        );
        assert_eq!(last(&s1), failed);
        // A new primary: the failure is not in its report, but still the latest outcome.
        let s2 = cycle(&s1, &store_truth);
        assert_eq!(last(&s2), failed);
        let b = s2.backup.clone().expect("backup status");
        assert_eq!(
            (
                b.last_failed_backup.as_deref(),
                b.last_failed_backup_message.as_deref()
            ),
            (
                Some("2026-11-25T03:00:09Z"),
                Some("pg_basebackup: the store is full")
            )
        );
        // And again (the status written last cycle is the only memory).
        let s3 = cycle(&s2, &store_truth);
        assert_eq!(last(&s3), failed);
        // A later success ends it.
        let succeeded = BackupState {
            backups: 2,
            last_successful: Some("2026-11-26T03:00:05Z".into()),
            ..Default::default()
        };
        let s4 = cycle(&s3, &succeeded);
        assert_eq!(last(&s4).0, "True");
    }

    #[test]
    fn a_primary_started_without_the_store_is_reported() {
        let mut s = PostgresClusterStatus::default();
        not_mounted(
            &mut s,
            &PostgresClusterStatus::default(),
            Some(2),
            Timestamp::now(),
        );
        let c = &s.conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("ContinuousArchiving", "False", "StoreNotInUse")
        );
    }

    #[test]
    fn archiving_and_backup_conditions_follow_the_report() {
        let now = Timestamp::now();
        let prev = PostgresClusterStatus::default();
        let mut s = PostgresClusterStatus::default();
        let seen = BackupState {
            last_archived_wal: Some("000000010000000000000004".into()),
            last_archived_time: Some("2026-11-25T00:10:00Z".into()),
            last_failed_wal: Some("000000010000000000000005".into()),
            last_failed_time: Some("2026-11-25T00:11:00Z".into()),
            last_failed: Some("2026-11-25T00:12:00Z".into()),
            last_failure: Some("pg_basebackup failed".into()),
            last_successful: Some("2026-11-24T00:00:00Z".into()),
            ..Default::default()
        };
        s.backup = Some(status(None, Some(&seen)));
        conditions(&mut s, &prev, Some(&seen), Some(1), now);
        let get = |t: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == t)
                .cloned()
                .expect(t)
        };
        let a = get("ContinuousArchiving");
        assert_eq!(
            (a.status.as_str(), a.reason.as_str()),
            ("False", "ArchiveFailing")
        );
        assert!(
            a.message.contains("000000010000000000000005"),
            "{}",
            a.message
        );
        let b = get("LastBackupSucceeded");
        assert_eq!(
            (b.status.as_str(), b.message.as_str()),
            ("False", "pg_basebackup failed")
        );
    }

    fn replica(name: &str, failure: Option<&str>) -> InstanceState {
        serde_json::from_value(serde_json::json!({
            "name": name, "role": "replica", "ready": false, "timeline": 1, "lsn": "0/3000000",
            "receivedLsn": null, "primary": "10.0.0.1:5432", "lastRejoin": null,
            "rewindFailure": null, "error": failure, "archiveReadFailure": failure,
        }))
        .expect("state")
    }

    fn readable(s: &PostgresClusterStatus) -> Option<(String, String, String)> {
        s.conditions
            .iter()
            .find(|c| c.type_ == ARCHIVE_READABLE)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    /// Issue 32, M13 follow-up: a replica whose archive reads fail is a False condition
    /// naming it and the store's words; it clears only once every member answers without
    /// one, and a cluster without a store carries no such condition.
    #[test]
    fn a_replicas_failing_archive_read_is_a_condition_until_it_recovers() {
        let now: Timestamp = "2026-11-29T03:00:00Z".parse().expect("time");
        let why = "reading 000000010000000000000007 from the backup store failed: 503 SlowDown";
        let members: BTreeSet<u32> = [1, 2, 3].into();
        let mut states =
            BTreeMap::from([(2, replica("pg-2", Some(why))), (3, replica("pg-3", None))]);
        let prev = PostgresClusterStatus::default();
        let mut failing = prev.clone();
        archive_reads(&mut failing, &prev, &states, &members, true, Some(1), now);
        let (status, reason, message) = readable(&failing).expect("the condition");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "ArchiveReadFailing")
        );
        assert!(message.starts_with(&format!("pg-2: {why}")), "{message}");
        assert!(!message.contains("pg-3"), "{message}");

        // pg-2 does not answer this cycle: not taken as recovered.
        states.remove(&2);
        let mut unknown = failing.clone();
        archive_reads(
            &mut unknown,
            &failing,
            &states,
            &members,
            true,
            Some(1),
            now,
        );
        assert_eq!(readable(&unknown), readable(&failing));

        // Every member answers, none failing: True again.
        states.insert(2, replica("pg-2", None));
        states.insert(1, replica("pg-1", None));
        let mut healed = unknown.clone();
        archive_reads(&mut healed, &unknown, &states, &members, true, Some(1), now);
        let (status, reason, _) = readable(&healed).expect("the condition");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", "ArchiveReadable")
        );

        // The store removed from the spec: no condition about it.
        let mut no_store = healed.clone();
        archive_reads(
            &mut no_store,
            &healed,
            &states,
            &members,
            false,
            Some(1),
            now,
        );
        assert_eq!(readable(&no_store), None);
    }
}
