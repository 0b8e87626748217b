//! The instance's side of backups: base backups of the running primary into the store — one
//! at a time, beside the request loop (a long copy must never hold up a failover) —
//! retention after each, the store's state for `/state`, and the restore of a new primary.
//!
//! `/state` never waits on the store: it reports the last listing, and a stale one is
//! refreshed in the background (on a blocking thread, as a volume store's reads are
//! synchronous and a hung NFS mount would otherwise take a runtime worker with it). A poll
//! that waited on S3 or NFS made a healthy primary look lost (issue 32, H4).
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use tracing::{info, warn};

use super::error::Error;
use super::os;
use super::pg::Pg;
use super::state::BackupState;
use crate::backup::catalog::{self, BackupInfo, Target};
use crate::backup::volume::{copy_tree, VolumeStore};
use crate::backup::Store;

/// Base backups of this instance into its store.
pub struct Backups {
    store: Store,
    /// Who this instance archives for (None: a pod made before owner records).
    owner: Option<crate::backup::owner::Owner>,
    pg: Pg,
    port: u16,
    retention_days: u32,
    run: Mutex<Run>,
    listing: Mutex<Listing>,
}

/// A listing older than this is refreshed at the next `/state`.
const LISTING_MAX_AGE: Duration = Duration::from_secs(30);

/// The store's backups as last listed.
#[derive(Default)]
struct Listing {
    /// None: no listing has succeeded yet.
    backups: Option<Vec<BackupInfo>>,
    /// The store is not this cluster's: why (its backups are then not reported).
    refused: Option<String>,
    /// When the last listing ended (None: refresh at the next `/state`).
    at: Option<Instant>,
    refreshing: bool,
}

#[derive(Default)]
struct Run {
    running: bool,
    last_failed: Option<String>,
    last_failure: Option<String>,
}

impl Backups {
    pub fn new(
        location: &str,
        owner: Option<crate::backup::owner::Owner>,
        pg: Pg,
        port: u16,
        retention_days: u32,
    ) -> Result<Backups, Error> {
        Ok(Backups {
            store: Store::open(location)?,
            owner,
            pg,
            port,
            retention_days: if retention_days == 0 {
                30
            } else {
                retention_days
            },
            run: Mutex::new(Run::default()),
            listing: Mutex::new(Listing::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Run> {
        self.run.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a base backup in the background; false when one is already running.
    pub fn start(self: &Arc<Self>) -> bool {
        {
            let mut r = self.lock();
            if r.running {
                return false;
            }
            r.running = true;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let result = me.take().await;
            // The store changed: list it again at the next poll.
            me.listing().at = None;
            let mut r = me.lock();
            r.running = false;
            match result {
                Ok(id) => info!(backup = %id, "base backup complete"),
                Err(e) => {
                    warn!(error = %e, "base backup failed");
                    r.last_failed = Some(now());
                    r.last_failure = Some(e.to_string());
                }
            }
        });
        true
    }

    async fn take(&self) -> Result<String, Error> {
        if let Some(me) = &self.owner {
            self.store.ensure_owner(me).await?;
        }
        let started = Utc::now();
        let id = started.format("%Y%m%dT%H%M%S%.3fZ").to_string();
        match &self.store {
            Store::Volume(v) => self.take_to_volume(v, &id, started).await?,
            #[cfg(feature = "s3")]
            Store::S3(s) => self.take_to_s3(s, &id, started).await?,
        }
        self.apply_retention().await?;
        Ok(id)
    }

    /// Plain format into `base/<id>.partial`, then the record and the final name.
    async fn take_to_volume(
        &self,
        store: &VolumeStore,
        id: &str,
        started: chrono::DateTime<Utc>,
    ) -> Result<(), Error> {
        os::own_dir(store.root(), self.pg.user)?;
        os::own_dir(&store.base_dir(), self.pg.user)?;
        store.clean_partials()?;
        let partial = store.partial_dir(id);
        if let Err(e) = self.pg.base_backup_to(&partial, self.port, false).await {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
        let label = std::fs::read_to_string(partial.join("backup_label"))
            .map_err(Error::io("reading", partial.join("backup_label")))?;
        let info = record(id, started, &label, &partial.join("backup_manifest"))?;
        store.commit(&info)?;
        Ok(())
    }

    /// Tar format into a scratch directory beside the data directory (same volume), then
    /// each file uploaded and the record last.
    #[cfg(feature = "s3")]
    async fn take_to_s3(
        &self,
        store: &crate::backup::s3::S3Store,
        id: &str,
        started: chrono::DateTime<Utc>,
    ) -> Result<(), Error> {
        let scratch = self
            .pg
            .data
            .parent()
            .unwrap_or(&self.pg.data)
            .join("bosun-backup-scratch");
        os::own_dir(&scratch, self.pg.user)?;
        os::empty_dir(&scratch)?;
        let dir = scratch.join(id);
        let result = async {
            self.pg.base_backup_to(&dir, self.port, true).await?;
            let base = std::fs::File::open(dir.join("base.tar"))
                .map_err(Error::io("reading", dir.join("base.tar")))?;
            let label = label_in_tar(base)?;
            let info = record(id, started, &label, &dir.join("backup_manifest"))?;
            // Read from disk a part at a time: a base backup may be larger than memory.
            for f in ["base.tar", "pg_wal.tar", "backup_manifest"] {
                store
                    .put_file(&format!("base/{id}/{f}"), &dir.join(f))
                    .await?;
            }
            let text = serde_json::to_vec_pretty(&info).unwrap_or_default();
            store
                .put(
                    &format!("base/{id}/{}", crate::backup::volume::INFO_FILE),
                    text,
                )
                .await?;
            Ok::<_, Error>(())
        }
        .await;
        let _ = os::empty_dir(&scratch);
        result
    }

    /// Removes expired backups, then the WAL no kept backup needs.
    async fn apply_retention(&self) -> Result<(), Error> {
        let all = self.store.backups().await?;
        let expired = catalog::expired(&all, Utc::now(), self.retention_days);
        for id in &expired {
            info!(backup = %id, "removing an expired base backup");
            self.store.delete_backup(id).await?;
        }
        let kept: Vec<&BackupInfo> = all.iter().filter(|b| !expired.contains(&b.id)).collect();
        let names = self.store.wal_names().await?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        for n in catalog::unneeded_wal(&refs, &kept) {
            self.store.delete_wal(n).await?;
        }
        Ok(())
    }

    fn listing(&self) -> std::sync::MutexGuard<'_, Listing> {
        self.listing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last listing, starting a refresh in the background when it is stale.
    fn listed(self: &Arc<Self>) -> (Option<Vec<BackupInfo>>, Option<String>) {
        let mut l = self.listing();
        let stale = l.at.is_none_or(|at| at.elapsed() > LISTING_MAX_AGE);
        if stale && !l.refreshing {
            l.refreshing = true;
            let me = self.clone();
            let rt = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                let result = rt.block_on(async {
                    let refused = match &me.owner {
                        Some(o) => me.store.refusal(o).await?,
                        None => None,
                    };
                    Ok::<_, crate::backup::volume::StoreError>((me.store.backups().await?, refused))
                });
                let mut l = me.listing();
                l.refreshing = false;
                l.at = Some(Instant::now());
                match result {
                    Ok((b, refused)) => {
                        l.backups = Some(b);
                        l.refused = refused;
                    }
                    // The last good listing stays; the next refresh is one period later.
                    Err(e) => warn!(error = %e, "listing the backup store failed"),
                }
            });
        }
        (l.backups.clone(), l.refused.clone())
    }

    /// The store's state, with the archiver's from the running primary (`client`).
    pub async fn state(self: &Arc<Self>, client: Option<&tokio_postgres::Client>) -> BackupState {
        let (listed, refused) = self.listed();
        let listing_pending = listed.is_none();
        // Another cluster's backups are not this one's: none to report, none to restore.
        let backups = if refused.is_some() {
            Vec::new()
        } else {
            listed.unwrap_or_default()
        };
        let mut s = {
            let r = self.lock();
            BackupState {
                running: r.running,
                listing_pending,
                last_failed: r.last_failed.clone(),
                last_failure: r.last_failure.clone(),
                store_refused: refused,
                ..Default::default()
            }
        };
        s.backups = backups.len() as u32;
        s.first_recoverability_point = catalog::first_recoverability_point(&backups).map(rfc3339);
        s.last_successful = backups.iter().map(|b| b.finished).max().map(rfc3339);
        if let Some(c) = client {
            let row = c
                .query_one(
                    "SELECT last_archived_wal, \
                     to_char(last_archived_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
                     last_failed_wal, \
                     to_char(last_failed_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
                     FROM pg_stat_archiver",
                    &[],
                )
                .await;
            if let Ok(row) = row {
                s.last_archived_wal = row.get(0);
                s.last_archived_time = row.get(1);
                s.last_failed_wal = row.get(2);
                s.last_failed_time = row.get(3);
            }
        }
        s
    }
}

fn rfc3339(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn now() -> String {
    rfc3339(Utc::now())
}

/// The record of a backup made now from its label and manifest.
fn record(
    id: &str,
    started: chrono::DateTime<Utc>,
    label: &str,
    manifest: &Path,
) -> Result<BackupInfo, Error> {
    let manifest = std::fs::read(manifest).map_err(Error::io("reading", manifest))?;
    let (start_wal, timeline) = parse_label(label)
        .ok_or_else(|| Error::Config("backup_label without its start WAL".into()))?;
    let end_lsn = parse_manifest_end(&manifest)
        .ok_or_else(|| Error::Config("backup_manifest without its WAL range".into()))?;
    Ok(BackupInfo {
        id: id.to_string(),
        started,
        finished: Utc::now(),
        timeline,
        start_wal,
        end_lsn,
    })
}

/// `backup_label` inside a `base.tar`.
#[cfg(feature = "s3")]
fn label_in_tar(tar: impl std::io::Read) -> Result<String, Error> {
    use std::io::Read;
    let bad = |e: std::io::Error| Error::Config(format!("reading base.tar: {e}"));
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if entry.path().map_err(bad)?.as_os_str() == "backup_label" {
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(bad)?;
            return Ok(text);
        }
    }
    Err(Error::Config("base.tar holds no backup_label".into()))
}

/// The start segment and timeline of a `backup_label`.
fn parse_label(label: &str) -> Option<(String, u32)> {
    let wal = label
        .lines()
        .find_map(|l| l.strip_prefix("START WAL LOCATION:"))?
        .split("(file ")
        .nth(1)?
        .trim_end_matches(')')
        .trim()
        .to_string();
    let timeline = label
        .lines()
        .find_map(|l| l.strip_prefix("START TIMELINE:"))
        .and_then(|t| t.trim().parse().ok())
        .or_else(|| u32::from_str_radix(wal.get(..8)?, 16).ok())?;
    Some((wal, timeline))
}

/// The end of the last WAL range of a `backup_manifest`.
fn parse_manifest_end(manifest: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(manifest).ok()?;
    v["WAL-Ranges"]
        .as_array()?
        .last()?
        .get("End-LSN")?
        .as_str()
        .map(str::to_string)
}

/// Fills the (empty) data directory from the store's backup for `target`: the backup's
/// files, given to the OS user, and `recovery.signal`. PostgreSQL then replays the archived
/// WAL (restore_command) up to the target.
pub async fn restore(pg: &Pg, from: &str, target: Option<&Target>) -> Result<BackupInfo, Error> {
    let store = Store::open(from)?;
    let backups = store.backups().await?;
    let chosen = catalog::choose(&backups, target).cloned().ok_or_else(|| {
        Error::Restore(match (backups.is_empty(), target) {
            (true, _) => format!("no base backup in the store at {from}"),
            (false, Some(Target::Time(t))) => format!(
                "no base backup ends before the target time {}: the first recoverability point is {}",
                rfc3339(*t),
                catalog::first_recoverability_point(&backups)
                    .map(rfc3339)
                    .unwrap_or_default()
            ),
            (false, _) => "no base backup ends before the target position".into(),
        })
    })?;
    pg.begin_filling()?;
    match &store {
        Store::Volume(v) => copy_tree(&v.backup_dir(&chosen.id), &pg.data)
            .map_err(Error::io("copying the base backup into", &pg.data))?,
        #[cfg(feature = "s3")]
        Store::S3(s) => {
            for (object, into) in [
                ("base.tar", pg.data.clone()),
                ("pg_wal.tar", pg.data.join("pg_wal")),
            ] {
                let data = s
                    .get(&format!("base/{}/{object}", chosen.id))
                    .await?
                    .ok_or_else(|| {
                        Error::Restore(format!("backup {} has no {object}", chosen.id))
                    })?;
                std::fs::create_dir_all(&into).map_err(Error::io("creating", &into))?;
                tar::Archive::new(&data[..])
                    .unpack(&into)
                    .map_err(Error::io("unpacking the base backup into", &into))?;
            }
        }
    }
    os::chown_all(&pg.data, pg.user)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pg.data, std::fs::Permissions::from_mode(0o700))
            .map_err(Error::io("setting the mode of", &pg.data))?;
    }
    pg.set_fenced(false)?;
    pg.set_recovery()?;
    pg.write_hba()?;
    pg.end_filling()?;
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_label_and_manifest_are_read() {
        let label = "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n\
                     CHECKPOINT LOCATION: 0/2000060\nBACKUP METHOD: streamed\n\
                     START TIMELINE: 1\n";
        assert_eq!(
            parse_label(label),
            Some(("000000010000000000000002".into(), 1))
        );
        let manifest = br#"{"PostgreSQL-Backup-Manifest-Version": 1, "Files": [],
            "WAL-Ranges": [{ "Timeline": 1, "Start-LSN": "0/2000028", "End-LSN": "0/2000100" }]}"#;
        assert_eq!(parse_manifest_end(manifest).as_deref(), Some("0/2000100"));
        assert_eq!(parse_label("nothing"), None);
    }
}
