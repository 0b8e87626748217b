//! The instance's side of backups: base backups of the running primary into the store — one
//! at a time, beside the request loop (a long copy must never hold up a failover) —
//! retention after each, the store's state for `/state`, and the restore of a new primary.
//!
//! `/state` never waits on the store: it reports the last listing, and a stale one is
//! refreshed in the background (on a blocking thread, as a volume store's reads are
//! synchronous and a hung NFS mount would otherwise take a runtime worker with it). A poll
//! that waited on S3 or NFS made a healthy primary look lost (issue 32, H4).
#[cfg(feature = "s3")]
use std::path::{Path, PathBuf};
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
        if let Err(e) = self.pg.base_backup_to(&partial, self.port).await {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
        let label = std::fs::read_to_string(partial.join("backup_label"))
            .map_err(Error::io("reading", partial.join("backup_label")))?;
        let manifest_path = partial.join("backup_manifest");
        let manifest =
            std::fs::read(&manifest_path).map_err(Error::io("reading", &manifest_path))?;
        let info = record(id, started, &label, &manifest)?;
        store.commit(&info)?;
        Ok(())
    }

    /// `pg_basebackup`'s gzipped tar read from its stdout as it comes and uploaded a part at
    /// a time as `base/<id>/base.tar.gz` (the WAL and the manifest inside), the record
    /// last. Nothing is written on the data volume: a copy staged there could fill the volume
    /// that holds `pg_wal` (H11). An upload that fails, or whose tar is not whole, is aborted.
    #[cfg(feature = "s3")]
    async fn take_to_s3(
        &self,
        store: &crate::backup::s3::S3Store,
        id: &str,
        started: chrono::DateTime<Utc>,
    ) -> Result<(), Error> {
        // Earlier versions staged the backup here; one cut short left a copy of the database.
        let staged = self
            .pg
            .data
            .parent()
            .unwrap_or(&self.pg.data)
            .join("bosun-backup-scratch");
        if staged.exists() {
            let _ = std::fs::remove_dir_all(&staged);
        }
        // `-X fetch` reads the backup's WAL from pg_wal at its end: a temporary slot keeps
        // it there until then, whatever wal_keep_size says. It ends with this session.
        let session = super::sql::connect_local(&self.pg.run_dir, self.port).await?;
        let slot = format!(
            "bosun_backup_{}",
            id.to_ascii_lowercase()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        );
        session
            .execute(
                "SELECT pg_create_physical_replication_slot($1, true, true)",
                &[&slot],
            )
            .await
            .map_err(Error::sql(
                "reserving the backup's WAL with a temporary slot",
            ))?;
        let child = self.pg.base_backup_stream(self.port)?;
        let (writer, parts) = store.part_channel();
        let reader = tokio::task::spawn_blocking(move || upload_backup_stream(child, writer));
        let uploaded = store
            .upload_parts(&format!("base/{id}/{BASE_ARCHIVE}"), parts)
            .await;
        let read = reader
            .await
            .unwrap_or_else(|e| Err(Error::Config(format!("the backup's reader: {e}"))));
        let (label, manifest) = match (uploaded, read) {
            (Ok(upload), Ok(found)) => {
                upload.complete().await?;
                found
            }
            (Ok(upload), Err(e)) => {
                upload.abort().await;
                return Err(e);
            }
            // The reader then failed only because the upload stopped.
            (Err(e), _) => return Err(e.into()),
        };
        drop(session);
        let info = record(id, started, &label, &manifest)?;
        let text = serde_json::to_vec_pretty(&info).unwrap_or_default();
        store
            .put(
                &format!("base/{id}/{}", crate::backup::volume::INFO_FILE),
                text,
            )
            .await?;
        Ok(())
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
    manifest: &[u8],
) -> Result<BackupInfo, Error> {
    let (start_wal, timeline) = parse_label(label)
        .ok_or_else(|| Error::Config("backup_label without its start WAL".into()))?;
    let end_lsn = parse_manifest_end(manifest)
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

/// The base backup's object in an S3 store: `pg_basebackup`'s tar, gzipped. A backup
/// without it is in the layout before streaming: `base.tar` and `pg_wal.tar`, uncompressed.
#[cfg(feature = "s3")]
const BASE_ARCHIVE: &str = "base.tar.gz";

/// Passes what it reads on to `out`.
#[cfg(feature = "s3")]
struct Tee<R, W> {
    inner: R,
    out: W,
}

#[cfg(feature = "s3")]
impl<R: std::io::Read, W: std::io::Write> std::io::Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.write_all(&buf[..n])?;
        Ok(n)
    }
}

/// Reads the running `pg_basebackup`'s gzipped tar to its end into `parts`, and returns the
/// backup's label and manifest, read on the way. The tar must be whole and the program
/// must succeed: otherwise an error, and the caller aborts the upload.
#[cfg(feature = "s3")]
fn upload_backup_stream(
    mut child: std::process::Child,
    parts: crate::backup::s3::PartWriter,
) -> Result<(String, Vec<u8>), Error> {
    use std::io::Read;
    let program = || PathBuf::from("pg_basebackup");
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Error::Config(
            "pg_basebackup started without its pipes".into(),
        ));
    };
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::BufReader::new(stderr).read_to_string(&mut text);
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    });
    // Uploaded as pg_basebackup compressed it; decompressed here only to read the label and
    // the manifest on the way (inflating costs a fraction of deflating).
    let mut tee = Tee {
        inner: stdout,
        out: parts,
    };
    let found = {
        let mut tar = flate2::read::GzDecoder::new(&mut tee);
        label_and_manifest(&mut tar).and_then(|found| {
            // The tar's end marker and padding, then the gzip trailer (checked here).
            std::io::copy(&mut tar, &mut std::io::sink())?;
            Ok(found)
        })
    }
    .and_then(|found| {
        std::io::copy(&mut tee, &mut std::io::sink())?;
        Ok(found)
    });
    if found.is_err() {
        // It may be blocked writing to a pipe nobody reads any more.
        let _ = child.kill();
    }
    let status = child.wait().map_err(Error::io("waiting for", program()))?;
    let stderr = errors.join().unwrap_or_default();
    if !status.success() {
        return Err(Error::Command {
            program: "pg_basebackup".into(),
            status: status.to_string(),
            stderr,
        });
    }
    let (label, manifest) = found.map_err(Error::io("reading the base backup from", program()))?;
    tee.out
        .finish()
        .map_err(Error::io("uploading the base backup from", program()))?;
    match (label, manifest) {
        (Some(l), Some(m)) => Ok((l, m)),
        (None, _) => Err(Error::Config(
            "the base backup holds no backup_label".into(),
        )),
        (_, None) => Err(Error::Config(
            "the base backup holds no backup_manifest".into(),
        )),
    }
}

/// The `backup_label` and `backup_manifest` members of a tar, reading it to its end marker.
/// The manifest is kept whole: its size follows the number of files, not their bytes.
#[cfg(feature = "s3")]
fn label_and_manifest(
    tar: impl std::io::Read,
) -> std::io::Result<(Option<String>, Option<Vec<u8>>)> {
    use std::io::Read;
    let (mut label, mut manifest) = (None, None);
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?;
        let name = path.to_str().unwrap_or_default().trim_start_matches("./");
        if name == "backup_label" {
            let mut text = String::new();
            entry.read_to_string(&mut text)?;
            label = Some(text);
        } else if name == "backup_manifest" {
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            manifest = Some(bytes);
        }
    }
    Ok((label, manifest))
}

/// Fills `data` from an S3 backup, reading each object as it arrives (H10: never a whole
/// object in memory).
#[cfg(feature = "s3")]
async fn restore_s3(
    store: &crate::backup::s3::S3Store,
    id: &str,
    data: &Path,
) -> Result<(), Error> {
    if let Some(body) = store
        .get_reader(&format!("base/{id}/{BASE_ARCHIVE}"))
        .await?
    {
        return unpack(body, data.to_path_buf(), true).await;
    }
    for (object, into) in [
        ("base.tar", data.to_path_buf()),
        ("pg_wal.tar", data.join("pg_wal")),
    ] {
        let body = store
            .get_reader(&format!("base/{id}/{object}"))
            .await?
            .ok_or_else(|| {
                Error::Restore(format!(
                    "backup {id} has neither {BASE_ARCHIVE} nor {object}"
                ))
            })?;
        unpack(body, into, false).await?;
    }
    Ok(())
}

/// Unpacks a tar read from `body` (gzipped or not) into `into`, on a blocking thread. A
/// stream cut short, a gzip trailer that does not match, or a tar that breaks off is an
/// error: the filling mark then stays, and the next start fills the directory again.
#[cfg(feature = "s3")]
async fn unpack(
    body: impl std::io::Read + Send + 'static,
    into: PathBuf,
    gzip: bool,
) -> Result<(), Error> {
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&into).map_err(Error::io("creating", &into))?;
        let failure = Failure::default();
        let body = Recording {
            inner: body,
            failure: failure.clone(),
        };
        let mut input: Box<dyn std::io::Read> = if gzip {
            Box::new(flate2::read::GzDecoder::new(body))
        } else {
            Box::new(body)
        };
        // The tar reader replaces a read error with its own words ("failed to iterate over
        // archive"): the store's (a body cut short, a stall) is the one worth saying.
        let said = |what: &'static str, into: &Path| {
            let failure = failure.clone();
            let into = into.to_path_buf();
            move |e: std::io::Error| {
                let source = match failure.lock().ok().and_then(|f| f.clone()) {
                    Some((kind, text)) => std::io::Error::new(kind, text),
                    None => e,
                };
                Error::Io {
                    what,
                    path: into,
                    source,
                }
            }
        };
        tar::Archive::new(&mut input)
            .unpack(&into)
            .map_err(said("unpacking the base backup into", &into))?;
        // The tar's end marker is not the stream's end: read the rest, so that the gzip
        // trailer (its CRC and length) is checked and a body cut short is an error.
        std::io::copy(&mut input, &mut std::io::sink())
            .map_err(said("reading the end of the base backup for", &into))?;
        Ok(())
    })
    .await
    .unwrap_or_else(|e| Err(Error::Config(format!("unpacking the base backup: {e}"))))
}

/// The first read error of a body, kept for the message (shared with the unpacking side).
#[cfg(feature = "s3")]
type Failure = std::sync::Arc<std::sync::Mutex<Option<(std::io::ErrorKind, String)>>>;

/// A reader that keeps its first error's kind and words.
#[cfg(feature = "s3")]
struct Recording<R> {
    inner: R,
    failure: Failure,
}

#[cfg(feature = "s3")]
impl<R: std::io::Read> std::io::Read for Recording<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let r = self.inner.read(buf);
        if let Err(e) = &r {
            if let Ok(mut f) = self.failure.lock() {
                if f.is_none() {
                    *f = Some((e.kind(), e.to_string()));
                }
            }
        }
        r
    }
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
        Store::S3(s) => restore_s3(s, &chosen.id, &pg.data).await?,
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

    /// A gzipped tar of one file.
    #[cfg(feature = "s3")]
    fn archive(content: &[u8]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o600);
        tar.append_data(&mut header, "base/1/16384", content)
            .expect("append");
        let tar = tar.into_inner().expect("tar");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).expect("gzip");
        gz.finish().expect("gzip")
    }

    /// A body cut short is an error, also where the tar itself looks whole: the gzip
    /// trailer (after the tar's end marker) is read and checked.
    #[cfg(feature = "s3")]
    #[tokio::test]
    async fn a_restore_stream_cut_short_is_an_error_even_past_the_tars_end() {
        let content: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let whole = archive(&content);
        let d = tempfile::tempdir().expect("tempdir");
        unpack(
            std::io::Cursor::new(whole.clone()),
            d.path().join("ok"),
            true,
        )
        .await
        .expect("a whole archive unpacks");
        assert_eq!(
            std::fs::read(d.path().join("ok/base/1/16384")).expect("unpacked"),
            content
        );
        for cut in [whole.len() / 2, whole.len() - 4] {
            let e = unpack(
                std::io::Cursor::new(whole[..cut].to_vec()),
                d.path().join(format!("cut{cut}")),
                true,
            )
            .await;
            assert!(e.is_err(), "{cut} of {} bytes unpacked", whole.len());
        }
    }

    /// The label and the manifest are found in pg_basebackup's tar, wherever they are.
    #[cfg(feature = "s3")]
    #[test]
    fn the_label_and_manifest_are_read_from_the_stream() {
        let mut tar = tar::Builder::new(Vec::new());
        for (name, body) in [
            (
                "backup_label",
                &b"START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n"[..],
            ),
            ("base/1/1", &[0u8; 3000][..]),
            ("backup_manifest", &b"{}"[..]),
        ] {
            let mut h = tar::Header::new_ustar();
            h.set_size(body.len() as u64);
            tar.append_data(&mut h, name, body).expect("append");
        }
        let bytes = tar.into_inner().expect("tar");
        let (label, manifest) = label_and_manifest(&bytes[..]).expect("read");
        assert!(label.expect("label").starts_with("START WAL LOCATION"));
        assert_eq!(manifest.as_deref(), Some(&b"{}"[..]));
    }
}
