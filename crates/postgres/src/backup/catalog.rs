//! The catalog of base backups (pure): which one a restore starts from, which ones retention
//! removes, and which archived WAL is then no longer needed.
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::wal::Segment;
use crate::instance::parse_lsn;

/// One complete base backup, as `base/<id>/bosun-backup.json` records it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupInfo {
    /// `YYYYMMDDTHHMMSSZ` of its start: ids sort by time.
    pub id: String,
    #[serde(with = "rfc3339")]
    pub started: DateTime<Utc>,
    /// When `pg_basebackup` returned: the backup is consistent at a point before this.
    #[serde(with = "rfc3339")]
    pub finished: DateTime<Utc>,
    pub timeline: u32,
    /// The first WAL segment the backup needs (from its `backup_label`).
    pub start_wal: String,
    /// Where its WAL range ends (from its `backup_manifest`).
    pub end_lsn: String,
}

/// Times as RFC 3339 text (chrono's own serde support is not enabled here).
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Micros, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.to_utc())
            .map_err(serde::de::Error::custom)
    }
}

/// Where a restore stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Time(DateTime<Utc>),
    /// A WAL position `X/Y`.
    Lsn(u64),
}

/// The backup to restore: the newest one that ends before the target (PostgreSQL refuses to
/// stop before a backup's consistent point), or the newest of all without a target.
pub fn choose<'a>(backups: &'a [BackupInfo], target: Option<&Target>) -> Option<&'a BackupInfo> {
    backups
        .iter()
        .filter(|b| match target {
            None => true,
            Some(Target::Time(t)) => b.finished <= *t,
            Some(Target::Lsn(l)) => parse_lsn(&b.end_lsn).is_some_and(|e| e <= *l),
        })
        .max_by(|a, b| a.finished.cmp(&b.finished).then(a.id.cmp(&b.id)))
}

/// The ids retention removes: backups that finished more than `days` ago, except the newest
/// of those (every point inside the window stays recoverable: it is the base the window's
/// start replays from) and never the newest backup of all.
pub fn expired(backups: &[BackupInfo], now: DateTime<Utc>, days: u32) -> Vec<String> {
    let window_start = now - Duration::days(i64::from(days));
    let mut old: Vec<&BackupInfo> = backups
        .iter()
        .filter(|b| b.finished < window_start)
        .collect();
    old.sort_by(|a, b| a.finished.cmp(&b.finished).then(a.id.cmp(&b.id)));
    // The newest old one is the base of the window's start.
    old.pop();
    let newest = backups
        .iter()
        .max_by(|a, b| a.finished.cmp(&b.finished))
        .map(|b| b.id.as_str());
    old.into_iter()
        .filter(|b| Some(b.id.as_str()) != newest)
        .map(|b| b.id.clone())
        .collect()
}

/// Archived WAL segments no kept backup needs: before the oldest kept backup's first segment.
/// History files are kept (tiny, and a restore following timelines reads them).
pub fn unneeded_wal<'a>(wal: &[&'a str], kept: &[&BackupInfo]) -> Vec<&'a str> {
    let Some(oldest) = kept
        .iter()
        .filter_map(|b| Segment::parse(&b.start_wal))
        .min()
    else {
        // No backup: the archive is all there is; nothing goes.
        return Vec::new();
    };
    wal.iter()
        .copied()
        .filter(|n| {
            let base = n.strip_suffix(".partial").unwrap_or(n);
            Segment::parse(base).is_some_and(|s| s.position() < oldest.position())
        })
        .collect()
}

/// The earliest time the backups can restore to: the oldest backup's end.
pub fn first_recoverability_point(backups: &[BackupInfo]) -> Option<DateTime<Utc>> {
    backups.iter().map(|b| b.finished).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    fn backup(id: &str, finished: &str, start_wal: &str, end_lsn: &str) -> BackupInfo {
        BackupInfo {
            id: id.into(),
            started: at(finished) - Duration::seconds(5),
            finished: at(finished),
            timeline: 1,
            start_wal: start_wal.into(),
            end_lsn: end_lsn.into(),
        }
    }

    fn three() -> Vec<BackupInfo> {
        vec![
            backup(
                "b1",
                "2026-01-01T00:00:00Z",
                "000000010000000000000002",
                "0/2000100",
            ),
            backup(
                "b2",
                "2026-01-10T00:00:00Z",
                "000000010000000000000009",
                "0/9000100",
            ),
            backup(
                "b3",
                "2026-01-20T00:00:00Z",
                "000000020000000000000010",
                "0/10000100",
            ),
        ]
    }

    #[test]
    fn a_restore_starts_from_the_newest_backup_before_its_target() {
        let b = three();
        assert_eq!(choose(&b, None).map(|b| b.id.as_str()), Some("b3"));
        let t = Target::Time(at("2026-01-15T00:00:00Z"));
        assert_eq!(choose(&b, Some(&t)).map(|b| b.id.as_str()), Some("b2"));
        let exact = Target::Time(at("2026-01-10T00:00:00Z"));
        assert_eq!(choose(&b, Some(&exact)).map(|b| b.id.as_str()), Some("b2"));
        let before_all = Target::Time(at("2025-12-31T00:00:00Z"));
        assert_eq!(choose(&b, Some(&before_all)), None);
        let lsn = Target::Lsn(parse_lsn("0/A000000").expect("lsn"));
        assert_eq!(choose(&b, Some(&lsn)).map(|b| b.id.as_str()), Some("b2"));
        assert_eq!(choose(&[], None), None);
    }

    #[test]
    fn retention_keeps_the_window_and_the_base_of_its_start() {
        let b = three();
        // Window of 7 days from Jan 21: Jan 14 on. b3 inside; b2 is the base of Jan 14.
        assert_eq!(expired(&b, at("2026-01-21T00:00:00Z"), 7), ["b1"]);
        // A long window keeps everything.
        assert!(expired(&b, at("2026-01-21T00:00:00Z"), 30).is_empty());
        // Everything old: the newest backup is never removed.
        assert_eq!(expired(&b, at("2026-06-01T00:00:00Z"), 1), ["b1", "b2"]);
        assert!(expired(&b[..1], at("2026-06-01T00:00:00Z"), 1).is_empty());
    }

    #[test]
    fn wal_before_the_oldest_kept_backup_goes_history_files_stay() {
        let b = three();
        let kept: Vec<&BackupInfo> = b[1..].iter().collect();
        let wal = [
            "000000010000000000000001",
            "000000010000000000000008",
            "000000010000000000000008.partial",
            "000000010000000000000009",
            "000000020000000000000003",
            "00000002.history",
        ];
        assert_eq!(
            unneeded_wal(&wal, &kept),
            [
                "000000010000000000000001",
                "000000010000000000000008",
                "000000010000000000000008.partial",
                "000000020000000000000003"
            ]
        );
        assert!(unneeded_wal(&wal, &[]).is_empty());
    }
}
