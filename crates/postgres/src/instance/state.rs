//! The instance's state as the HTTP API serves it (and the operator reads it).
use serde::{Deserialize, Serialize};

/// What the instance is now.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StateRole {
    /// Preparing its data (initdb, base backup, rewind) or starting.
    Starting,
    Primary,
    Replica,
    /// Stopped on request; nothing runs until unfenced or demoted.
    Fenced,
    /// Not running after a failed request (see `error`).
    Stopped,
}

/// How the instance last rejoined a primary.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Rejoin {
    /// `pg_rewind` brought its data onto the primary's timeline.
    Rewind,
    /// Its data was replaced by a fresh base backup.
    Reclone,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceState {
    pub name: String,
    pub role: StateRole,
    /// Primary: accepting writes. Replica: streaming from its primary.
    pub ready: bool,
    /// The WAL timeline (primary: the one it writes; replica: the one it receives).
    pub timeline: Option<u32>,
    /// Primary: the current write position. Replica: the position replayed.
    pub lsn: Option<String>,
    /// Replica: the position received (what a failover compares).
    pub received_lsn: Option<String>,
    /// `host:port` of the primary a replica follows.
    pub primary: Option<String>,
    pub last_rejoin: Option<Rejoin>,
    /// Why the last rejoin could not rewind (and cloned instead).
    pub rewind_failure: Option<String>,
    /// The last request's failure, if it failed.
    pub error: Option<String>,
    /// Why restoring this new instance from the backup store failed (it then waits, with
    /// no data, for the operator to report it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_failure: Option<String>,
    /// A replica whose WAL diverged from the newest timeline it knows of (it can never
    /// stream from that primary: a rewind is needed): why. It is never ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverged: Option<String>,
    /// A primary: the standbys each commit waits for now (None: unknown, or not a value
    /// bosun sets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<u32>,
    /// A primary whose isolation check is armed: a replica has streamed from it, so it
    /// fences itself if it loses every replica and the operator (see `instance::isolation`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolation_armed: bool,
    /// Shut down on request (SIGTERM): postgres has exited cleanly and this container never
    /// starts it again (the clean-shutdown record; see `instance::manager`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped_cleanly: bool,
    /// A replica that does not stream: why it never can again from its primary (the WAL it
    /// needs is gone there); the operator re-clones it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cannot_catch_up: Option<String>,
    /// A replica that does not stream and whose reads of the backup store fail (a store
    /// error, another cluster's store): why. Cleared once the store answers or the replica
    /// streams. The operator says it in the `ArchiveReadable` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_read_failure: Option<String>,
    /// The backup store as this instance sees it (an instance with a store only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupState>,
    /// The parameters set in `postgresql.auto.conf`, and any that wait for a restart (None:
    /// not running, or not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Vec<ParameterState>>,
}

/// One parameter of a running instance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ParameterState {
    pub name: String,
    /// Its value in `postgresql.auto.conf` (None: not set there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<String>,
    /// `SHOW name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<String>,
    /// What is written differs from what runs until PostgreSQL restarts (a `postmaster`
    /// parameter, or one the pod's command line sets).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pending_restart: bool,
}

/// Backups and archiving, as the primary's manager reports them (times RFC 3339).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupState {
    /// A base backup is being taken now.
    pub running: bool,
    /// The store has not been listed yet (the listing runs beside `/state`, never inside
    /// it): `backups` and the times below are unknown, not zero.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub listing_pending: bool,
    /// Complete base backups in the store.
    pub backups: u32,
    pub first_recoverability_point: Option<String>,
    /// The newest backup's end.
    pub last_successful: Option<String>,
    /// The last failed backup attempt (of this manager) and why.
    pub last_failed: Option<String>,
    pub last_failure: Option<String>,
    /// From `pg_stat_archiver` (a running primary only).
    pub last_archived_wal: Option<String>,
    pub last_archived_time: Option<String>,
    pub last_failed_wal: Option<String>,
    pub last_failed_time: Option<String>,
    /// The store belongs to another cluster (its owner record names another UID): why, with
    /// the fix. Nothing is archived or backed up there, and its backups are not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_refused: Option<String>,
}

/// A WAL position `X/Y` as a number.
pub fn parse_lsn(s: &str) -> Option<u64> {
    let (hi, lo) = s.split_once('/')?;
    let hi = u64::from_str_radix(hi, 16).ok()?;
    let lo = u64::from_str_radix(lo, 16).ok()?;
    if hi > u64::from(u32::MAX) || lo > u64::from(u32::MAX) {
        return None;
    }
    Some(hi << 32 | lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_compare_as_numbers() {
        assert_eq!(parse_lsn("0/3000060"), Some(0x3000060));
        assert!(parse_lsn("1/0") > parse_lsn("0/FFFFFFFF"));
        assert_eq!(parse_lsn("0/1/2"), None);
        assert_eq!(parse_lsn("x"), None);
    }
}
