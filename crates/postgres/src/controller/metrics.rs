//! The operator's PostgreSQL series, written at each scrape from the statuses in its cache
//! (nothing kept beside them, so a deleted cluster's series go with it): instances and ready
//! instances, each replica's replay lag behind the primary in bytes, and the times of the
//! last base backup, the last archived WAL segment and the first recoverability point —
//! timestamps, so that an alert is `time() - x > threshold` (the chart's PrometheusRule).
use std::fmt::Write as _;

use crate::api::PostgresCluster;
use crate::instance::parse_lsn;

pub const INSTANCES: &str = "bosun_postgres_instances";
pub const READY: &str = "bosun_postgres_instances_ready";
pub const PRIMARY: &str = "bosun_postgres_primary";
pub const LAG: &str = "bosun_postgres_replication_lag_bytes";
pub const LAST_BACKUP: &str = "bosun_postgres_last_backup_timestamp_seconds";
pub const LAST_FAILED_BACKUP: &str = "bosun_postgres_last_failed_backup_timestamp_seconds";
pub const LAST_ARCHIVED_WAL: &str = "bosun_postgres_last_archived_wal_timestamp_seconds";
pub const FIRST_RECOVERABILITY: &str = "bosun_postgres_first_recoverability_timestamp_seconds";

/// Every family this module writes, with its help text.
pub const FAMILIES: &[(&str, &str)] = &[
    (
        INSTANCES,
        "Instances a PostgresCluster asks for (spec.size)",
    ),
    (
        READY,
        "Instances ready: the primary accepting writes, replicas streaming",
    ),
    (
        PRIMARY,
        "1 for the instance the status names the current primary",
    ),
    (
        LAG,
        "Bytes of WAL a replica has yet to replay behind its primary (from the status)",
    ),
    (
        LAST_BACKUP,
        "When the last base backup succeeded (Unix time)",
    ),
    (
        LAST_FAILED_BACKUP,
        "When the last base backup failed (Unix time)",
    ),
    (
        LAST_ARCHIVED_WAL,
        "When the last WAL segment was archived (Unix time)",
    ),
    (
        FIRST_RECOVERABILITY,
        "The earliest point in time the cluster can be restored to (Unix time)",
    ),
];

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn unix(rfc3339: &Option<String>) -> Option<i64> {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339.as_deref()?).ok()?;
    Some(t.timestamp())
}

/// The series of `clusters`, grouped by family (OpenMetrics text, no `# EOF`).
pub fn openmetrics<'a>(clusters: impl IntoIterator<Item = &'a PostgresCluster>) -> String {
    let mut series: Vec<(&str, String)> = Vec::new();
    for pc in clusters {
        let ns = label(pc.metadata.namespace.as_deref().unwrap_or(""));
        let name = label(pc.metadata.name.as_deref().unwrap_or(""));
        let at = format!("namespace=\"{ns}\",cluster=\"{name}\"");
        series.push((INSTANCES, format!("{{{at}}} {}", pc.spec.size)));
        let Some(st) = pc.status.as_ref() else {
            continue;
        };
        series.push((READY, format!("{{{at}}} {}", st.ready_instances)));
        let primary = st
            .current_primary
            .as_deref()
            .and_then(|p| st.instances.iter().find(|i| i.name == p));
        if let Some(p) = primary {
            series.push((
                PRIMARY,
                format!("{{{at},instance=\"{}\"}} 1", label(&p.name)),
            ));
        }
        let primary_lsn = primary.and_then(|p| p.lsn.as_deref()).and_then(parse_lsn);
        for i in st.instances.iter().filter(|i| i.role == "replica") {
            if let (Some(head), Some(at_replica)) =
                (primary_lsn, i.lsn.as_deref().and_then(parse_lsn))
            {
                series.push((
                    LAG,
                    format!(
                        "{{{at},instance=\"{}\"}} {}",
                        label(&i.name),
                        head.saturating_sub(at_replica)
                    ),
                ));
            }
        }
        if let Some(b) = &st.backup {
            for (family, t) in [
                (LAST_BACKUP, &b.last_successful_backup),
                (LAST_FAILED_BACKUP, &b.last_failed_backup),
                (LAST_ARCHIVED_WAL, &b.last_archived_wal_time),
                (FIRST_RECOVERABILITY, &b.first_recoverability_point),
            ] {
                if let Some(secs) = unix(t) {
                    series.push((family, format!("{{{at}}} {secs}")));
                }
            }
        }
    }
    let mut out = String::new();
    for (family, help) in FAMILIES {
        let mut first = true;
        for (f, s) in series.iter().filter(|(f, _)| f == family) {
            if first {
                let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} gauge");
                first = false;
            }
            let _ = writeln!(out, "{f}{s}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(status: serde_json::Value) -> PostgresCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "lukeb0nd.com/v1", "kind": "PostgresCluster",
            "metadata": {"name": "pg", "namespace": "db"},
            "spec": {"size": 3},
            "status": status,
        }))
        .expect("cluster")
    }

    #[test]
    fn lag_is_the_primary_position_minus_each_replica_and_times_are_unix_seconds() {
        let pc = cluster(serde_json::json!({
            "size": 3, "readyInstances": 2, "selector": "", "latestInstance": 3,
            "currentPrimary": "pg-1",
            "instances": [
                {"name": "pg-1", "role": "primary", "lsn": "0/3000100", "ready": true},
                {"name": "pg-2", "role": "replica", "lsn": "0/3000000", "ready": true},
                {"name": "pg-3", "role": "replica", "ready": false},
            ],
            "backup": {"lastSuccessfulBackup": "2026-11-25T01:00:00Z",
                       "lastArchivedWalTime": "2026-11-25T01:30:00+00:00"},
        }));
        let text = openmetrics([&pc]);
        let at = "namespace=\"db\",cluster=\"pg\"";
        for line in [
            format!("{INSTANCES}{{{at}}} 3"),
            format!("{READY}{{{at}}} 2"),
            format!("{PRIMARY}{{{at},instance=\"pg-1\"}} 1"),
            format!("{LAG}{{{at},instance=\"pg-2\"}} 256"),
            format!("{LAST_BACKUP}{{{at}}} 1795568400"),
            format!("{LAST_ARCHIVED_WAL}{{{at}}} 1795570200"),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        // No position known for pg-3: no lag is made up for it; no failure recorded.
        assert!(!text.contains("instance=\"pg-3\""), "{text}");
        assert!(!text.contains(LAST_FAILED_BACKUP), "{text}");
        // Each family announced once, before its series.
        assert_eq!(text.matches(&format!("# TYPE {LAG} gauge")).count(), 1);
    }

    #[test]
    fn a_cluster_without_status_has_only_its_size_and_labels_are_escaped() {
        let mut pc = cluster(serde_json::Value::Null);
        pc.status = None;
        pc.metadata.name = Some("a\"b".into());
        let text = openmetrics([&pc]);
        assert_eq!(
            text,
            format!(
                "# HELP {INSTANCES} Instances a PostgresCluster asks for (spec.size)\n# TYPE {INSTANCES} gauge\n{INSTANCES}{{namespace=\"db\",cluster=\"a\\\"b\"}} 3\n"
            )
        );
    }
}
