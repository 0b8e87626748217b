//! `stat` and `file` on the operator's own filesystem, as ansible-operator runs them (on
//! `localhost`, in the operator's container).
//!
//! `stat` returns the keys bosun computes exactly as Ansible does (see [`STAT_KEYS`]); the
//! ones that need external tools or libraries — `mimetype`/`charset` (`file`),
//! `attributes`/`attr_flags`/`version` (`lsattr`), `readable`/`writeable`/`executable`
//! (`access(2)`) — are left out. User and group names come from `/etc/passwd` and
//! `/etc/group` (the files NSS source, which is what an operator image has).
//!
//! `file` supports `state` `directory`, `file`, `touch` and `absent` with `mode` (octal, as a
//! string or a number); owner, group, links, `recurse` and symbolic modes are not options
//! bosun takes (a role using them is refused at load time).
use std::fs::{self, Metadata};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use serde_json::{json, Map, Value as Json};

type Args = Map<String, Json>;

/// The `stat` keys bosun returns, each equal to Ansible's.
pub const STAT_KEYS: &[&str] = &[
    "exists",
    "path",
    "mode",
    "isdir",
    "ischr",
    "isblk",
    "isreg",
    "isfifo",
    "islnk",
    "issock",
    "uid",
    "gid",
    "size",
    "inode",
    "dev",
    "nlink",
    "atime",
    "mtime",
    "ctime",
    "wusr",
    "rusr",
    "xusr",
    "wgrp",
    "rgrp",
    "xgrp",
    "woth",
    "roth",
    "xoth",
    "isuid",
    "isgid",
    "blocks",
    "block_size",
    "device_type",
    "pw_name",
    "gr_name",
    "checksum",
    "lnk_source",
    "lnk_target",
];

fn path_arg(a: &Args) -> Result<String, String> {
    a.get("path")
        .or(a.get("dest"))
        .or(a.get("name"))
        .and_then(|p| match p {
            Json::String(s) => Some(s.clone()),
            Json::Null => None,
            other => Some(other.to_string()),
        })
        .ok_or_else(|| "missing required arguments: path".to_string())
}

fn flag(a: &Args, k: &str, default: bool) -> bool {
    match a.get(k) {
        None | Some(Json::Null) => default,
        Some(Json::Bool(b)) => *b,
        Some(Json::String(s)) => matches!(
            s.to_lowercase().as_str(),
            "yes" | "on" | "1" | "true" | "y" | "t"
        ),
        Some(Json::Number(n)) => n.as_f64() == Some(1.0),
        Some(_) => default,
    }
}

/// The name of `id` in an `/etc/passwd`-format file (name:x:id:...).
fn name_of(file: &str, id: u32) -> Option<String> {
    let text = fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _ = f.next()?;
        (f.next()?.parse::<u32>().ok()? == id).then(|| name.to_string())
    })
}

/// Python's `st_?time`: seconds plus nanoseconds times 1e-9, in a double.
fn secs(s: i64, ns: i64) -> f64 {
    s as f64 + ns as f64 * 1e-9
}

fn checksum(path: &Path, algo: &str) -> Result<Option<String>, String> {
    use sha2::Digest;
    let Ok(mut f) = fs::File::open(path) else {
        return Ok(None);
    };
    let mut data = Vec::new();
    if f.read_to_end(&mut data).is_err() {
        return Ok(None);
    }
    Ok(Some(match algo {
        "sha1" => hex::encode(sha1::Sha1::digest(&data)),
        "md5" => hex::encode(md5::Md5::digest(&data)),
        "sha224" => hex::encode(sha2::Sha224::digest(&data)),
        "sha256" => hex::encode(sha2::Sha256::digest(&data)),
        "sha384" => hex::encode(sha2::Sha384::digest(&data)),
        "sha512" => hex::encode(sha2::Sha512::digest(&data)),
        other => return Err(format!("value of checksum_algorithm must be one of: md5, sha1, sha224, sha256, sha384, sha512, got: {other}")),
    }))
}

fn describe(path: &str, m: &Metadata) -> Map<String, Json> {
    let mode = m.mode();
    let ft = m.file_type();
    use std::os::unix::fs::FileTypeExt;
    let bit = |b: u32| mode & b != 0;
    let mut s = Map::new();
    let mut put = |k: &str, v: Json| {
        s.insert(k.to_string(), v);
    };
    put("exists", json!(true));
    put("path", json!(path));
    put("mode", json!(format!("{:04o}", mode & 0o7777)));
    put("isdir", json!(ft.is_dir()));
    put("ischr", json!(ft.is_char_device()));
    put("isblk", json!(ft.is_block_device()));
    put("isreg", json!(ft.is_file()));
    put("isfifo", json!(ft.is_fifo()));
    put("islnk", json!(ft.is_symlink()));
    put("issock", json!(ft.is_socket()));
    put("uid", json!(m.uid()));
    put("gid", json!(m.gid()));
    put("size", json!(m.size()));
    put("inode", json!(m.ino()));
    put("dev", json!(m.dev()));
    put("nlink", json!(m.nlink()));
    put("atime", json!(secs(m.atime(), m.atime_nsec())));
    put("mtime", json!(secs(m.mtime(), m.mtime_nsec())));
    put("ctime", json!(secs(m.ctime(), m.ctime_nsec())));
    put("wusr", json!(bit(0o200)));
    put("rusr", json!(bit(0o400)));
    put("xusr", json!(bit(0o100)));
    put("wgrp", json!(bit(0o020)));
    put("rgrp", json!(bit(0o040)));
    put("xgrp", json!(bit(0o010)));
    put("woth", json!(bit(0o002)));
    put("roth", json!(bit(0o004)));
    put("xoth", json!(bit(0o001)));
    put("isuid", json!(bit(0o4000)));
    put("isgid", json!(bit(0o2000)));
    put("blocks", json!(m.blocks()));
    put("block_size", json!(m.blksize()));
    put("device_type", json!(m.rdev()));
    if let Some(n) = name_of("/etc/passwd", m.uid()) {
        put("pw_name", json!(n));
    }
    if let Some(n) = name_of("/etc/group", m.gid()) {
        put("gr_name", json!(n));
    }
    s
}

/// `ansible.builtin.stat`.
pub fn stat(a: &Args) -> Result<Json, String> {
    let path = path_arg(a)?;
    let p = Path::new(&path);
    let follow = flag(a, "follow", false);
    let meta = if follow {
        fs::metadata(p)
    } else {
        fs::symlink_metadata(p)
    };
    let m = match meta {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(json!({"changed": false, "stat": {"exists": false}}))
        }
        Err(e) => return Err(format!("Failed to stat {path}: {e}")),
    };
    let mut s = describe(&path, &m);
    if m.file_type().is_symlink() {
        if let Ok(real) = fs::canonicalize(p) {
            s.insert("lnk_source".into(), json!(real.display().to_string()));
        }
        if let Ok(t) = fs::read_link(p) {
            s.insert("lnk_target".into(), json!(t.display().to_string()));
        }
    }
    if m.file_type().is_file() && flag(a, "get_checksum", true) {
        let algo = a
            .get("checksum_algorithm")
            .or(a.get("checksum"))
            .or(a.get("checksum_algo"))
            .and_then(Json::as_str)
            .unwrap_or("sha1");
        if let Some(c) = checksum(p, algo)? {
            s.insert("checksum".into(), json!(c));
        }
    }
    Ok(json!({"changed": false, "stat": s}))
}

/// The mode asked for: octal text (`"0750"`, `"750"`) or a number (YAML `0750` is 488).
fn mode_arg(a: &Args) -> Result<Option<u32>, String> {
    match a.get("mode") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Number(n)) => n
            .as_u64()
            .filter(|m| *m <= 0o7777)
            .map(|m| Some(m as u32))
            .ok_or_else(|| format!("mode must be in octal or symbolic form: {n}")),
        Some(Json::String(s)) => u32::from_str_radix(s.trim(), 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "mode {s:?}: bosun takes octal modes only (symbolic modes are not supported)"
                )
            }),
        Some(other) => Err(format!("mode must be in octal or symbolic form: {other}")),
    }
}

/// Sets the mode when it differs; whether it did.
fn chmod(p: &Path, mode: Option<u32>) -> Result<bool, String> {
    let Some(want) = mode else { return Ok(false) };
    let m = fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
    if m.mode() & 0o7777 == want {
        return Ok(false);
    }
    fs::set_permissions(p, fs::Permissions::from_mode(want))
        .map_err(|e| format!("chmod failed: {}: {e}", p.display()))?;
    Ok(true)
}

/// The file attributes Ansible adds to a `file` result.
fn attributes(p: &Path, out: &mut Map<String, Json>) {
    if let Ok(m) = fs::symlink_metadata(p) {
        out.insert("mode".into(), json!(format!("{:04o}", m.mode() & 0o7777)));
        out.insert("uid".into(), json!(m.uid()));
        out.insert("gid".into(), json!(m.gid()));
        out.insert("size".into(), json!(m.size()));
        if let Some(n) = name_of("/etc/passwd", m.uid()) {
            out.insert("owner".into(), json!(n));
        }
        if let Some(n) = name_of("/etc/group", m.gid()) {
            out.insert("group".into(), json!(n));
        }
    }
}

/// `ansible.builtin.file`.
pub fn file(a: &Args) -> Result<Json, String> {
    let path = path_arg(a)?;
    let p = Path::new(&path);
    let mode = mode_arg(a)?;
    if flag(a, "recurse", false) {
        return Err("file: recurse is not supported by bosun".into());
    }
    let current = fs::symlink_metadata(p).ok();
    let state = match a.get("state").and_then(Json::as_str) {
        Some(s) => s.to_string(),
        None => match &current {
            Some(m) if m.is_dir() => "directory".into(),
            _ => "file".into(),
        },
    };
    let mut out = Map::new();
    let changed = match state.as_str() {
        "absent" => {
            out.insert("path".into(), json!(path));
            out.insert("state".into(), json!("absent"));
            match &current {
                None => false,
                Some(m) => {
                    if m.is_dir() {
                        fs::remove_dir_all(p)
                    } else {
                        fs::remove_file(p)
                    }
                    .map_err(|e| format!("rmtree failed: {e}"))?;
                    true
                }
            }
        }
        "directory" => {
            if current.as_ref().is_some_and(|m| !m.is_dir()) {
                return Err(format!("{path} already exists as a file"));
            }
            // Every missing component is made with the mode asked for, as Ansible does.
            let mut changed = false;
            let mut cur = std::path::PathBuf::new();
            for c in p.components() {
                cur.push(c);
                if fs::symlink_metadata(&cur).is_err() {
                    fs::create_dir(&cur).map_err(|e| {
                        format!(
                            "There was an issue creating {} as requested: {e}",
                            cur.display()
                        )
                    })?;
                    changed = true;
                    chmod(&cur, mode)?;
                }
            }
            changed |= chmod(p, mode)?;
            out.insert("path".into(), json!(path));
            out.insert("state".into(), json!("directory"));
            attributes(p, &mut out);
            changed
        }
        "file" => {
            let Some(m) = &current else {
                return Ok(
                    json!({"changed": false, "failed": true, "path": path, "state": "absent",
                    "msg": format!("file ({path}) is absent, cannot continue")}),
                );
            };
            if m.is_dir() {
                return Err(format!("{path} is a directory, not a file"));
            }
            let changed = chmod(p, mode)?;
            out.insert("path".into(), json!(path));
            out.insert("state".into(), json!("file"));
            attributes(p, &mut out);
            changed
        }
        "touch" => {
            let f = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("Error, could not touch target: {e}"))?;
            let now = std::time::SystemTime::now();
            f.set_times(fs::FileTimes::new().set_accessed(now).set_modified(now))
                .map_err(|e| format!("Error while touching existing target: {e}"))?;
            chmod(p, mode)?;
            out.insert("dest".into(), json!(path));
            let is_dir = fs::metadata(p).is_ok_and(|m| m.is_dir());
            out.insert(
                "state".into(),
                json!(if is_dir { "directory" } else { "file" }),
            );
            attributes(p, &mut out);
            true
        }
        other => {
            return Err(format!(
                "file: state {other} is not supported by bosun (directory, file, touch, absent)"
            ))
        }
    };
    out.insert("changed".into(), json!(changed));
    Ok(Json::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Json) -> Args {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn modes_are_octal_text_or_numbers() {
        assert_eq!(mode_arg(&args(json!({"mode": "0750"}))), Ok(Some(0o750)));
        assert_eq!(mode_arg(&args(json!({"mode": "644"}))), Ok(Some(0o644)));
        assert_eq!(mode_arg(&args(json!({"mode": 488}))), Ok(Some(0o750)));
        assert!(mode_arg(&args(json!({"mode": "u+x"}))).is_err());
    }

    #[test]
    fn a_missing_path_does_not_exist() {
        let r = stat(&args(json!({"path": "/nonexistent/bosun/x"}))).expect("stat");
        assert_eq!(r["stat"], json!({"exists": false}));
    }
}
