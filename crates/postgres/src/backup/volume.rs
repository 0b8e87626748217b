//! The store on a directory (the backup claim, `<mount>/<cluster>`). Every write is atomic:
//! a temporary name, fsync, rename, fsync of the directory — a crash never leaves a segment
//! that looks archived but is short, nor a backup that looks complete.
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::catalog::BackupInfo;
use super::wal::is_archive_name;

/// The backup's record inside its directory.
pub const INFO_FILE: &str = "bosun-backup.json";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0:?} is not a WAL file name")]
    BadName(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{0} is already archived with different contents")]
    Conflict(String),
    #[error("object store: {0}")]
    Remote(String),
    /// The store belongs to another cluster (see [`super::owner`]).
    #[error("{0}")]
    NotOwner(String),
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { what, path, source }
}

#[derive(Clone, Debug)]
pub struct VolumeStore {
    root: PathBuf,
}

impl VolumeStore {
    pub fn new(root: impl Into<PathBuf>) -> VolumeStore {
        VolumeStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn wal_dir(&self) -> PathBuf {
        self.root.join("wals")
    }

    pub fn base_dir(&self) -> PathBuf {
        self.root.join("base")
    }

    /// Where a backup is made before it is complete.
    pub fn partial_dir(&self, id: &str) -> PathBuf {
        self.base_dir().join(format!("{id}.partial"))
    }

    pub fn backup_dir(&self, id: &str) -> PathBuf {
        self.base_dir().join(id)
    }

    /// Archives `src` as `name`. Archiving the same contents again succeeds (PostgreSQL
    /// retries after a crash between the copy and its own bookkeeping); different contents
    /// under an archived name is refused, never overwritten.
    pub fn archive_wal(&self, src: &Path, name: &str) -> Result<(), StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let dir = self.wal_dir();
        fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
        let dest = dir.join(name);
        if dest.exists() {
            let same = fs::read(&dest).map_err(io_err("reading", &dest))?
                == fs::read(src).map_err(io_err("reading", src))?;
            return if same {
                Ok(())
            } else {
                Err(StoreError::Conflict(name.into()))
            };
        }
        let tmp = dir.join(format!(".{name}.tmp"));
        {
            let mut from = File::open(src).map_err(io_err("opening", src))?;
            let mut to = File::create(&tmp).map_err(io_err("creating", &tmp))?;
            io::copy(&mut from, &mut to).map_err(io_err("writing", &tmp))?;
            to.flush().map_err(io_err("writing", &tmp))?;
            to.sync_all().map_err(io_err("syncing", &tmp))?;
        }
        fs::rename(&tmp, &dest).map_err(io_err("renaming to", &dest))?;
        sync_dir(&dir)
    }

    /// Copies archived `name` to `dest`; false when the archive does not hold it (the end of
    /// the archive, for PostgreSQL).
    pub fn restore_wal(&self, name: &str, dest: &Path) -> Result<bool, StoreError> {
        if !self.has_wal(name)? {
            return Ok(false);
        }
        let src = self.wal_dir().join(name);
        let tmp = dest.with_extension("bosun-tmp");
        fs::copy(&src, &tmp).map_err(io_err("copying to", &tmp))?;
        fs::rename(&tmp, dest).map_err(io_err("renaming to", dest))?;
        Ok(true)
    }

    /// Whether the archive holds `name`. Only "no such file" is "no": any other failure to
    /// read it (EACCES, EIO, not a file) is an error, or a restore would end early there.
    pub fn has_wal(&self, name: &str) -> Result<bool, StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let src = self.wal_dir().join(name);
        match fs::metadata(&src) {
            Ok(m) if m.is_file() => Ok(true),
            Ok(_) => Err(StoreError::Io {
                what: "reading",
                path: src,
                source: io::Error::other("not a regular file"),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err("reading", &src)(e)),
        }
    }

    /// Archived WAL file names.
    pub fn wal_names(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.wal_dir();
        let mut out: Vec<String> = match fs::read_dir(&dir) {
            Ok(it) => it
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| is_archive_name(n))
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("listing", &dir)(e)),
        };
        out.sort();
        Ok(out)
    }

    /// Complete backups, oldest first (a directory without its record, or still partial, is
    /// not one).
    pub fn backups(&self) -> Result<Vec<BackupInfo>, StoreError> {
        let dir = self.base_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(it) => it,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("listing", &dir)(e)),
        };
        let mut out = Vec::new();
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".partial") || name.starts_with('.') {
                continue;
            }
            let info = e.path().join(INFO_FILE);
            let Ok(text) = fs::read(&info) else { continue };
            if let Ok(b) = serde_json::from_slice::<BackupInfo>(&text) {
                if b.id == name {
                    out.push(b);
                }
            }
        }
        out.sort_by(|a, b| a.finished.cmp(&b.finished).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Completes a backup made in [`Self::partial_dir`]: its record, then its final name.
    pub fn commit(&self, info: &BackupInfo) -> Result<(), StoreError> {
        let partial = self.partial_dir(&info.id);
        let record = partial.join(INFO_FILE);
        let text = serde_json::to_vec_pretty(info).unwrap_or_default();
        {
            let mut f = File::create(&record).map_err(io_err("creating", &record))?;
            f.write_all(&text).map_err(io_err("writing", &record))?;
            f.sync_all().map_err(io_err("syncing", &record))?;
        }
        let dest = self.backup_dir(&info.id);
        fs::rename(&partial, &dest).map_err(io_err("renaming to", &dest))?;
        sync_dir(&self.base_dir())
    }

    /// Removes a backup: its final name first, so it stops being one at once.
    pub fn delete_backup(&self, id: &str) -> Result<(), StoreError> {
        let dir = self.backup_dir(id);
        let gone = self.base_dir().join(format!(".{id}.deleting"));
        fs::rename(&dir, &gone).map_err(io_err("renaming", &dir))?;
        fs::remove_dir_all(&gone).map_err(io_err("removing", &gone))
    }

    /// Removes partial backups (an interrupted `pg_basebackup`).
    pub fn clean_partials(&self) -> Result<(), StoreError> {
        let dir = self.base_dir();
        let Ok(entries) = fs::read_dir(&dir) else {
            return Ok(());
        };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".partial") || name.ends_with(".deleting") {
                fs::remove_dir_all(e.path()).map_err(io_err("removing", &e.path()))?;
            }
        }
        Ok(())
    }

    /// A small file at the store's root (None: there is none).
    pub fn read_root(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let p = self.root.join(name);
        match fs::read(&p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("reading", &p)(e)),
        }
    }

    /// Writes a small file at the store's root, atomically.
    pub fn write_root(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        fs::create_dir_all(&self.root).map_err(io_err("creating", &self.root))?;
        let dest = self.root.join(name);
        let tmp = self.root.join(format!(".{name}.tmp"));
        {
            let mut f = File::create(&tmp).map_err(io_err("creating", &tmp))?;
            f.write_all(bytes).map_err(io_err("writing", &tmp))?;
            f.sync_all().map_err(io_err("syncing", &tmp))?;
        }
        fs::rename(&tmp, &dest).map_err(io_err("renaming to", &dest))?;
        sync_dir(&self.root)
    }

    /// No archived WAL and no backup directory (complete or not).
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        if !self.wal_names()?.is_empty() {
            return Ok(false);
        }
        let dir = self.base_dir();
        match fs::read_dir(&dir) {
            Ok(mut it) => Ok(it.next().is_none()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(io_err("listing", &dir)(e)),
        }
    }

    pub fn delete_wal(&self, name: &str) -> Result<(), StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let p = self.wal_dir().join(name);
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("removing", &p)(e)),
        }
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_err("syncing", dir))
}

/// Copies a backup's tree into `dest` (an empty data directory), leaving out the record.
pub fn copy_tree(src: &Path, dest: &Path) -> io::Result<()> {
    fs::create_dir_all(dest)?;
    for e in fs::read_dir(src)? {
        let e = e?;
        let from = e.path();
        let to = dest.join(e.file_name());
        let t = e.file_type()?;
        if t.is_dir() {
            copy_tree(&from, &to)?;
            fs::set_permissions(&to, fs::metadata(&from)?.permissions())?;
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if e.file_name() != INFO_FILE {
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archiving_is_atomic_idempotent_and_never_overwrites() {
        let d = tempfile::tempdir().expect("tempdir");
        let store = VolumeStore::new(d.path().join("pg"));
        let seg = d.path().join("seg");
        fs::write(&seg, b"wal bytes").expect("write");
        let name = "000000010000000000000001";
        store.archive_wal(&seg, name).expect("archived");
        store
            .archive_wal(&seg, name)
            .expect("the same again is fine");
        fs::write(&seg, b"other bytes").expect("write");
        assert!(matches!(
            store.archive_wal(&seg, name),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            store.archive_wal(&seg, "../x"),
            Err(StoreError::BadName(_))
        ));
        assert_eq!(store.wal_names().expect("names"), [name]);
        let back = d.path().join("back");
        assert!(store.restore_wal(name, &back).expect("restored"));
        assert_eq!(fs::read(&back).expect("read"), b"wal bytes");
        assert!(!store
            .restore_wal("000000010000000000000002", &back)
            .expect("absent"));
    }

    #[test]
    fn a_backup_counts_only_once_committed() {
        let d = tempfile::tempdir().expect("tempdir");
        let store = VolumeStore::new(d.path());
        let info = BackupInfo {
            id: "20260101T000000Z".into(),
            started: "2026-01-01T00:00:00Z".parse().expect("t"),
            finished: "2026-01-01T00:00:05Z".parse().expect("t"),
            timeline: 1,
            start_wal: "000000010000000000000002".into(),
            end_lsn: "0/2000100".into(),
        };
        fs::create_dir_all(store.partial_dir(&info.id).join("base")).expect("mkdir");
        fs::write(store.partial_dir(&info.id).join("PG_VERSION"), "15").expect("w");
        assert!(store.backups().expect("list").is_empty());
        store.commit(&info).expect("commit");
        assert_eq!(store.backups().expect("list"), std::slice::from_ref(&info));
        let dest = d.path().join("restored");
        copy_tree(&store.backup_dir(&info.id), &dest).expect("copy");
        assert!(dest.join("PG_VERSION").is_file() && dest.join("base").is_dir());
        assert!(!dest.join(INFO_FILE).exists());
        store.delete_backup(&info.id).expect("delete");
        assert!(store.backups().expect("list").is_empty());
    }
}
