//! Running PostgreSQL as an unprivileged user: it refuses to run as root, and we often are
//! root (in a container, in the test environment). The user's files (data directory, run
//! directory) are chowned to it, and its programs are started with its uid and gid (std drops
//! the supplementary groups when root changes uid).
use std::ffi::CString;
use std::path::Path;

use super::error::Error;

/// Users tried, in order, when none is configured: the one scripts/setup-postgres.sh creates,
/// then Debian's.
const DEFAULT_USERS: &[&str] = &["bosun-pg", "postgres"];

/// Who PostgreSQL runs as: None means "as the manager itself" (not root).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsUser {
    pub uid: u32,
    pub gid: u32,
}

/// The user to run PostgreSQL as, if a change from the current one is needed.
pub fn resolve(configured: Option<&str>) -> Result<Option<OsUser>, Error> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        // Not root: PostgreSQL runs as us; a configured user must be us.
        if let Some(name) = configured {
            match lookup(name) {
                Some(u) if u.uid == euid => {}
                _ => {
                    return Err(Error::User(format!(
                        "cannot run PostgreSQL as {name:?}: the manager is not root"
                    )))
                }
            }
        }
        return Ok(None);
    }
    match configured {
        Some(name) => lookup(name)
            .filter(|u| u.uid != 0)
            .map(Some)
            .ok_or_else(|| Error::User(format!("{name:?} is not an unprivileged user here"))),
        None => DEFAULT_USERS
            .iter()
            .find_map(|n| lookup(n))
            .filter(|u| u.uid != 0)
            .map(Some)
            .ok_or_else(|| {
                Error::User(
                    "PostgreSQL refuses to run as root and neither bosun-pg nor postgres exists: \
                     create one (scripts/setup-postgres.sh creates bosun-pg) or name one with --os-user"
                        .into(),
                )
            }),
    }
}

fn lookup(name: &str) -> Option<OsUser> {
    let c = CString::new(name).ok()?;
    // SAFETY: a zeroed passwd is a valid out-parameter; buf outlives the call and its length
    // is passed; result is only read when getpwnam_r says it points at pwd.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(
            c.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc != 0 || result.is_null() {
            return None;
        }
        Some(OsUser {
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
        })
    }
}

/// Creates `dir` (and its parents) if missing, gives it to `user` with mode 0700.
pub fn own_dir(dir: &Path, user: Option<OsUser>) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    if let Some(u) = user {
        chown_tree(dir, u)?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(Error::io("setting the mode of", dir))
}

/// Gives a file to `user`, when there is one.
pub fn own_file(path: &Path, user: Option<OsUser>) -> Result<(), Error> {
    if let Some(u) = user {
        std::os::unix::fs::lchown(path, Some(u.uid), Some(u.gid))
            .map_err(Error::io("changing the owner of", path))?;
    }
    Ok(())
}

/// Gives `dir` and everything below it to `user` (files copied by root).
pub fn chown_all(dir: &Path, user: Option<OsUser>) -> Result<(), Error> {
    let Some(u) = user else { return Ok(()) };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        std::os::unix::fs::lchown(&p, Some(u.uid), Some(u.gid))
            .map_err(Error::io("changing the owner of", &p))?;
        let m = std::fs::symlink_metadata(&p).map_err(Error::io("reading", &p))?;
        if m.is_dir() {
            for e in std::fs::read_dir(&p).map_err(Error::io("listing", &p))? {
                stack.push(e.map_err(Error::io("listing", &p))?.path());
            }
        }
    }
    Ok(())
}

/// Chowns `dir` and, when it is not already the user's, everything below it (data restored or
/// copied by root).
fn chown_tree(dir: &Path, u: OsUser) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).map_err(Error::io("reading", dir))?;
    if meta.uid() == u.uid && meta.gid() == u.gid {
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        std::os::unix::fs::lchown(&p, Some(u.uid), Some(u.gid))
            .map_err(Error::io("changing the owner of", &p))?;
        let m = std::fs::symlink_metadata(&p).map_err(Error::io("reading", &p))?;
        if m.is_dir() {
            for e in std::fs::read_dir(&p).map_err(Error::io("listing", &p))? {
                stack.push(e.map_err(Error::io("listing", &p))?.path());
            }
        }
    }
    Ok(())
}

/// Removes everything inside `dir`, keeping `dir` (it may be a volume's mount point).
pub fn empty_dir(dir: &Path) -> Result<(), Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("listing", dir)(e)),
    };
    for e in entries {
        let p = e.map_err(Error::io("listing", dir))?.path();
        let m = std::fs::symlink_metadata(&p).map_err(Error::io("reading", &p))?;
        if m.is_dir() {
            std::fs::remove_dir_all(&p).map_err(Error::io("removing", &p))?;
        } else {
            std::fs::remove_file(&p).map_err(Error::io("removing", &p))?;
        }
    }
    Ok(())
}

/// Makes room for new data (initdb, a base backup): removes what a PostgreSQL data directory
/// or a half-made one holds, keeping `lost+found`. Anything else is refused rather than
/// deleted: a data directory pointed at the wrong place must not wipe it.
pub fn clear_for_new_data(dir: &Path) -> Result<(), Error> {
    let entries: Vec<std::path::PathBuf> = match std::fs::read_dir(dir) {
        Ok(e) => e
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(Error::io("listing", dir))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("listing", dir)(e)),
    };
    let name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string()
    };
    let others: Vec<String> = entries
        .iter()
        .map(|p| name(p))
        .filter(|n| n != "lost+found")
        .collect();
    let looks_like_postgres = others.is_empty()
        || others
            .iter()
            .any(|n| ["PG_VERSION", "global", "base", "pg_wal"].contains(&n.as_str()));
    if !looks_like_postgres {
        return Err(Error::Config(format!(
            "{} holds files that are not PostgreSQL's ({}); refusing to delete them",
            dir.display(),
            others.join(", ")
        )));
    }
    for p in entries.iter().filter(|p| name(p) != "lost+found") {
        let m = std::fs::symlink_metadata(p).map_err(Error::io("reading", p))?;
        if m.is_dir() {
            std::fs::remove_dir_all(p).map_err(Error::io("removing", p))?;
        } else {
            std::fs::remove_file(p).map_err(Error::io("removing", p))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_postgres_data_is_cleared() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(d.path().join("lost+found")).expect("mkdir");
        std::fs::create_dir(d.path().join("base")).expect("mkdir");
        std::fs::write(d.path().join("postgresql.conf"), "x").expect("write");
        clear_for_new_data(d.path()).expect("a half-made data directory is cleared");
        let left: Vec<_> = std::fs::read_dir(d.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, ["lost+found"]);

        std::fs::write(d.path().join("notes.txt"), "mine").expect("write");
        let e = clear_for_new_data(d.path()).expect_err("someone else's files");
        assert!(e.to_string().contains("notes.txt"), "{e}");
        assert!(d.path().join("notes.txt").exists());
    }
}
