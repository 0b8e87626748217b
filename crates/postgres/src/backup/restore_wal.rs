//! `bosun pg restore-wal`, PostgreSQL's `restore_command`: its answer is read from the exit
//! status alone, so "this segment is not in the archive" and "the store failed" must differ.
//!
//! PostgreSQL takes any nonzero status up to 125 for "not in the archive": a restore without a
//! target then ends recovery there and promotes. A status above 125 (as a shell's "cannot
//! execute") makes it stop recovery with FATAL instead (PostgreSQL's `restore_command`
//! documentation). So: a missing segment exits 1; a store error is retried with backoff (a
//! 503, a reset connection, a slow NFS server pass), and one that persists exits
//! [`EXIT_STORE_FAILED`]: the restoring instance stops, the manager reports the restore as
//! failed and the operator says why, instead of promoting on an incomplete history
//! (issue 32, H9).
//!
//! A **replica** with a backup store runs the same program as its `restore_command`
//! ([`standby_exit_status`]), so that WAL its primary removed is still read from the archive
//! (issue 32, M13). There an error must not stop PostgreSQL (a replica is no restore: it
//! goes on streaming or waiting), so a store error exits as "not in the archive" — which a
//! standby asks again after `wal_retrieve_retry_interval`, forever — and is written to a
//! report file the instance manager reads: the replica is unready with the reason, and the
//! manager never reads an error as "the archive lacks it" (that would re-clone it).
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use super::owner::Owner;
use super::store::Store;
use super::volume::StoreError;

/// "Not in the archive": recovery ends here (or waits, in standby mode).
pub const EXIT_NOT_IN_ARCHIVE: i32 = 1;
/// The store failed after every retry: above 125, so PostgreSQL stops instead of promoting.
pub const EXIT_STORE_FAILED: i32 = 126;

/// How often and how patiently a failing store is asked again.
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    pub attempts: u32,
    /// Doubled after each failure.
    pub first_delay: Duration,
}

/// 6 attempts over about 30 s (1 + 2 + 4 + 8 + 16): longer than an S3 SlowDown or a
/// failover of the store's endpoint, short enough that a store that is really gone is said.
pub const RESTORE_RETRY: Retry = Retry {
    attempts: 6,
    first_delay: Duration::from_secs(1),
};

/// A standby asks again by itself after `wal_retrieve_retry_interval`: a few seconds of
/// retries only, so that streaming is tried again soon.
pub const STANDBY_RETRY: Retry = Retry {
    attempts: 3,
    first_delay: Duration::from_secs(1),
};

/// Runs `op` until it succeeds, its error is not worth retrying, or the attempts run out
/// (the last error then).
pub async fn retrying<T, F, Fut>(retry: Retry, mut op: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut delay = retry.first_delay;
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt >= retry.attempts || !transient(&e) => return Err(e),
            Err(e) => {
                eprintln!(
                    "restore-wal: attempt {attempt} of {} failed, retrying in {delay:?}: {e}",
                    retry.attempts
                );
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2);
                attempt += 1;
            }
        }
    }
}

/// A bad name never becomes good; everything else may pass.
fn transient(e: &StoreError) -> bool {
    !matches!(e, StoreError::BadName(_))
}

/// The exit status of `restore-wal` for `name` into `dest`; errors go to stderr (PostgreSQL's
/// log).
pub async fn exit_status(store: &Store, name: &str, dest: &Path, retry: Retry) -> i32 {
    match retrying(retry, || store.restore_wal(name, dest)).await {
        Ok(true) => 0,
        Ok(false) => EXIT_NOT_IN_ARCHIVE,
        Err(e) => {
            eprintln!(
                "restore-wal: {name}: {e}; stopping the recovery rather than ending it early"
            );
            EXIT_STORE_FAILED
        }
    }
}

/// The exit status of a replica's `restore_command` for `name` into `dest`: 0 when restored,
/// [`EXIT_NOT_IN_ARCHIVE`] otherwise — never a status that stops a standby. The store must
/// be this cluster's (`owner`, when given): another cluster's WAL is never replayed here.
/// Why a segment could not be read goes to `report` (removed once the store answers).
pub async fn standby_exit_status(
    store: &Store,
    owner: Option<&Owner>,
    name: &str,
    dest: &Path,
    report: &Path,
    retry: Retry,
) -> i32 {
    let answer = async {
        if let Some(me) = owner {
            if let Some(why) = retrying(retry, || store.refusal(me)).await? {
                return Ok(Err(why));
            }
        }
        retrying(retry, || store.restore_wal(name, dest))
            .await
            .map(Ok)
    };
    let failure = match answer.await {
        Ok(Ok(found)) => {
            if let Err(e) = std::fs::remove_file(report) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("restore-wal: removing {}: {e}", report.display());
                }
            }
            return if found { 0 } else { EXIT_NOT_IN_ARCHIVE };
        }
        Ok(Err(refused)) => format!("not read from the backup store: {refused}"),
        Err(e) => format!("reading {name} from the backup store failed: {e}"),
    };
    eprintln!("restore-wal: {failure}");
    report_failure(report, &failure);
    EXIT_NOT_IN_ARCHIVE
}

/// Writes a replica's report, replacing any at once (a reader never sees half of one).
pub fn report_failure(report: &Path, text: &str) {
    let tmp = report.with_extension("tmp");
    let r = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, report));
    if let Err(e) = r {
        eprintln!("restore-wal: writing {}: {e}", report.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::VolumeStore;

    const SEGMENT: &str = "000000010000000000000003";
    const FAST: Retry = Retry {
        attempts: 3,
        first_delay: Duration::from_millis(1),
    };

    #[tokio::test]
    async fn a_missing_segment_is_not_in_the_archive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::Volume(VolumeStore::new(dir.path().to_str().expect("utf-8")));
        let dest = dir.path().join("RECOVERYXLOG");
        assert_eq!(
            exit_status(&store, SEGMENT, &dest, FAST).await,
            EXIT_NOT_IN_ARCHIVE
        );
    }

    /// A segment the store holds but cannot give (here a directory where the file should
    /// be: an I/O error even for root, as EACCES or EIO would be) is an error, never "not in
    /// the archive".
    #[tokio::test]
    async fn an_unreadable_segment_stops_the_recovery() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::Volume(VolumeStore::new(dir.path().to_str().expect("utf-8")));
        std::fs::create_dir_all(dir.path().join("wals").join(SEGMENT)).expect("mkdir");
        let dest = dir.path().join("RECOVERYXLOG");
        assert_eq!(
            exit_status(&store, SEGMENT, &dest, FAST).await,
            EXIT_STORE_FAILED
        );
        assert!(!dest.exists());
    }

    fn me(uid: &str) -> Owner {
        Owner {
            uid: uid.into(),
            cluster: "pg".into(),
            claim: crate::backup::owner::Claim::Empty,
        }
    }

    /// A replica: an error is reported and answered "not in the archive" (a standby asks
    /// again; a status above 125 would stop it), and the report goes once the store answers.
    #[tokio::test]
    async fn a_replica_reports_a_store_error_and_keeps_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::Volume(VolumeStore::new(dir.path().join("store")));
        let seg = dir.path().join("seg");
        std::fs::write(&seg, b"wal").expect("write");
        store.ensure_owner(&me("a")).await.expect("owned");
        store.archive_wal(&seg, SEGMENT).await.expect("archived");
        let wals = dir.path().join("store").join("wals");
        let broken = "000000010000000000000004";
        std::fs::create_dir_all(wals.join(broken)).expect("mkdir");
        let report = dir.path().join("archive-failure");
        let dest = dir.path().join("RECOVERYXLOG");
        let a = me("a");
        let status = standby_exit_status(&store, Some(&a), broken, &dest, &report, FAST);
        assert_eq!(status.await, EXIT_NOT_IN_ARCHIVE);
        let why = std::fs::read_to_string(&report).expect("a report");
        assert!(why.contains(broken), "{why}");
        let status = standby_exit_status(&store, Some(&a), SEGMENT, &dest, &report, FAST);
        assert_eq!(status.await, 0);
        assert_eq!(std::fs::read(&dest).expect("restored"), b"wal");
        assert!(!report.exists(), "the report outlived the error");
    }

    /// Another cluster's store (recorded under another UID) gives a replica nothing.
    #[tokio::test]
    async fn a_replica_never_reads_another_clusters_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::Volume(VolumeStore::new(dir.path().join("store")));
        let seg = dir.path().join("seg");
        std::fs::write(&seg, b"theirs").expect("write");
        store.ensure_owner(&me("other")).await.expect("owned");
        store.archive_wal(&seg, SEGMENT).await.expect("archived");
        let report = dir.path().join("archive-failure");
        let dest = dir.path().join("RECOVERYXLOG");
        let a = me("a");
        let status = standby_exit_status(&store, Some(&a), SEGMENT, &dest, &report, FAST);
        assert_eq!(status.await, EXIT_NOT_IN_ARCHIVE);
        assert!(!dest.exists(), "another cluster's WAL was restored");
        let why = std::fs::read_to_string(&report).expect("a report");
        assert!(why.contains("another cluster"), "{why}");
    }

    #[tokio::test]
    async fn a_store_error_is_retried_until_it_passes() {
        let mut calls = 0;
        let got = retrying(FAST, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(StoreError::Remote("503 SlowDown".into()))
                } else {
                    Ok(true)
                }
            }
        })
        .await;
        assert!(matches!(got, Ok(true)), "{got:?}");
        assert_eq!(calls, 3);
        let mut calls = 0;
        let bad = retrying(FAST, || {
            calls += 1;
            async { Err::<bool, _>(StoreError::BadName("x".into())) }
        })
        .await;
        assert!(bad.is_err());
        assert_eq!(calls, 1, "a bad name is not retried");
    }
}
