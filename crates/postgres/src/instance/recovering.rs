//! How far a starting PostgreSQL's recovery has come, read from its startup process's title
//! (`postgres: startup recovering 000000010000000000000005`), the only progress it shows
//! before it accepts connections: crash recovery refuses every connection until it ends.
//! A start that keeps replaying is never cut short (issue 32, H7); one whose title stops
//! moving is, after the start timeout.
use std::path::Path;

/// The segment the startup process of postmaster `pid` is replaying, as a number that grows
/// with the WAL position (the timeline left out); None when no child says "recovering".
pub fn position(pid: u32) -> Option<u64> {
    position_in(Path::new("/proc"), pid)
}

fn position_in(proc: &Path, pid: u32) -> Option<u64> {
    for e in std::fs::read_dir(proc).ok()?.flatten() {
        let name = e.file_name();
        let Some(child) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        if parent_of(&stat) != Some(pid) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let _ = child;
        if let Some(p) = parse_title(&String::from_utf8_lossy(&cmdline)) {
            return Some(p);
        }
    }
    None
}

/// The parent pid from `/proc/<pid>/stat` (the command may hold spaces and parentheses: the
/// fields follow the last `)`).
fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `... recovering <24 hex digits>` → the log and segment numbers as one number.
pub fn parse_title(title: &str) -> Option<u64> {
    let at = title.find("recovering ")? + "recovering ".len();
    let name = title.get(at..at + 24)?;
    if !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(&name[8..], 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_startup_title_gives_the_segment_being_replayed() {
        let a = parse_title("postgres: startup recovering 000000010000000000000005\0");
        let b = parse_title("postgres: startup recovering 000000010000000100000002");
        assert_eq!(a, Some(5));
        assert!(b > a, "log 1 comes after log 0");
        // Another timeline, the same position: the same number.
        assert_eq!(
            parse_title("postgres: startup recovering 000000020000000000000005"),
            a
        );
        assert_eq!(
            parse_title("postgres: startup waiting for 0000000100"),
            None
        );
        assert_eq!(parse_title("postgres: startup recovering 00000001zz"), None);
        assert_eq!(parse_title("postgres: checkpointer"), None);
    }

    #[test]
    fn a_child_is_found_by_its_parent_in_proc() {
        let d = tempfile::tempdir().expect("tempdir");
        let child = d.path().join("4242");
        std::fs::create_dir(&child).expect("mkdir");
        std::fs::write(child.join("stat"), "4242 (postgres: a (b)) S 77 4242 0").expect("w");
        std::fs::write(
            child.join("cmdline"),
            "postgres: startup recovering 00000001000000000000000A\0",
        )
        .expect("w");
        let other = d.path().join("4243");
        std::fs::create_dir(&other).expect("mkdir");
        std::fs::write(other.join("stat"), "4243 (x) S 1 1 0").expect("w");
        std::fs::write(
            other.join("cmdline"),
            "postgres: startup recovering 0000000100000000000000FF",
        )
        .expect("w");
        assert_eq!(position_in(d.path(), 77), Some(10));
        assert_eq!(position_in(d.path(), 5), None);
    }
}
