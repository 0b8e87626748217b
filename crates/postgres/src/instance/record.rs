//! The role record: the role an instance runs in and the primary it follows, kept on the
//! instance's own volume so that a restarted container learns what it is now, not what its pod
//! was created as.
//!
//! Why a record on the volume and not the pod's env: the operator changes roles through the
//! instance API (fence, promote, demote) without recreating the pod, so the env's role goes
//! stale at the first switchover. A container that restarted in its env's role came back a
//! second writable primary on the old timeline (issue 32, H1).
//!
//! The record lives beside the data directory (`<PGDATA>.bosun-role`), not inside it: a base
//! backup or a rewind copies the primary's data directory, and with it any record in there.
//!
//! When it is written:
//! - before a demotion, so that a restart at any point after the decision comes back a replica;
//! - after a promotion succeeded (`pg_promote` returned on the new timeline): a restart before
//!   that comes back a replica of the old primary, which accepts no writes, and the operator
//!   promotes again. Recording first would let a restart start the replica's data as a
//!   primary on the *old* timeline, the very defect this record exists for;
//! - at every start, with the role it starts in.
//!
//! Which wins at a start, the record or the pod's env: the record names the pod (its UID) that
//! wrote it. The same pod (a container restart) → the record, which is the newer. Another pod
//! (the pod was deleted and recreated on this claim) → the env: the operator built that pod
//! from its status after every role change the record could know of. A record that cannot be
//! read leaves the role unknown: the instance then starts nothing and reports `stopped`, and
//! the operator tells it whom to follow.
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config::Role;
use super::error::Error;
use super::os::OsUser;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RoleRecord {
    /// The UID of the pod whose container wrote it (None: not run in a pod).
    pub pod: Option<String>,
    pub role: Role,
    /// `host:port` of the primary a replica follows.
    pub primary: Option<String>,
}

/// What an instance starts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartAs {
    Known {
        role: Role,
        primary: Option<String>,
    },
    /// Nothing says what it is: it accepts no writes until the operator says.
    Unknown(String),
}

/// `<PGDATA>.bosun-role`, on the data's volume.
pub fn path(data: &Path) -> PathBuf {
    let mut name = data
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".bosun-role");
    data.with_file_name(name)
}

/// The record, None when there is none. Unreadable or unparsable: an error naming why.
pub fn read(path: &Path) -> Result<Option<RoleRecord>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("the role record {} is unreadable: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading the role record {}: {e}", path.display())),
    }
}

/// Replaces the record whole (a new file synced, renamed over the old, the directory
/// synced): a crash leaves the old record or the new one, never a torn one.
pub fn write(path: &Path, record: &RoleRecord, user: Option<OsUser>) -> Result<(), Error> {
    use std::io::Write;
    let text = serde_json::to_vec(record)
        .map_err(|e| Error::Config(format!("encoding the role record: {e}")))?;
    let tmp = path.with_extension("bosun-role-new");
    {
        let mut f = std::fs::File::create(&tmp).map_err(Error::io("creating", &tmp))?;
        f.write_all(&text).map_err(Error::io("writing", &tmp))?;
        f.sync_all().map_err(Error::io("syncing", &tmp))?;
    }
    super::os::own_file(&tmp, user)?;
    std::fs::rename(&tmp, path).map_err(Error::io("renaming to", path))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(Error::io("syncing", dir))?;
    }
    Ok(())
}

/// The role to start in, from the record (or why it cannot be read), this pod's UID and the
/// role and primary the pod was created with.
pub fn resolve(
    record: Result<Option<RoleRecord>, String>,
    pod: Option<&str>,
    env_role: Role,
    env_primary: Option<&str>,
) -> StartAs {
    let (role, primary) = match record {
        Err(why) => return StartAs::Unknown(why),
        Ok(Some(r)) if pod.is_none() || r.pod.as_deref() == pod => (r.role, r.primary),
        // No record, or one of an earlier pod on this claim: the pod's env is the newer.
        Ok(_) => (env_role, env_primary.map(str::to_string)),
    };
    // A replica with no primary to follow (the operator made its pod so when no primary
    // runs: issue 32, M12) starts read-only with no upstream, a failover candidate that
    // waits to be promoted or told whom to follow.
    match (role, primary) {
        (Role::Primary, _) => StartAs::Known {
            role: Role::Primary,
            primary: None,
        },
        (Role::Replica, primary) => StartAs::Known {
            role: Role::Replica,
            primary,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pod: &str, role: Role, primary: Option<&str>) -> RoleRecord {
        RoleRecord {
            pod: Some(pod.into()),
            role,
            primary: primary.map(str::to_string),
        }
    }

    fn known(role: Role, primary: Option<&str>) -> StartAs {
        StartAs::Known {
            role,
            primary: primary.map(str::to_string),
        }
    }

    #[test]
    fn a_container_restart_keeps_the_recorded_role_over_the_env() {
        // Born primary, demoted to follow pg-2: a restart of the same pod stays a replica.
        let r = rec("uid-1", Role::Replica, Some("10.0.0.2:5432"));
        assert_eq!(
            resolve(Ok(Some(r)), Some("uid-1"), Role::Primary, None),
            known(Role::Replica, Some("10.0.0.2:5432"))
        );
        // Born a replica of pg-1, promoted: a restart stays the primary.
        let r = rec("uid-2", Role::Primary, None);
        assert_eq!(
            resolve(
                Ok(Some(r)),
                Some("uid-2"),
                Role::Replica,
                Some("10.0.0.1:5432")
            ),
            known(Role::Primary, None)
        );
    }

    #[test]
    fn a_new_pod_on_the_claim_takes_the_role_it_was_created_with() {
        let r = rec("old-uid", Role::Primary, None);
        assert_eq!(
            resolve(
                Ok(Some(r)),
                Some("new-uid"),
                Role::Replica,
                Some("10.0.0.2:5432")
            ),
            known(Role::Replica, Some("10.0.0.2:5432"))
        );
        assert_eq!(
            resolve(Ok(None), Some("uid"), Role::Primary, None),
            known(Role::Primary, None)
        );
    }

    #[test]
    fn outside_a_pod_the_record_wins() {
        let r = RoleRecord {
            pod: None,
            role: Role::Replica,
            primary: Some("h:1".into()),
        };
        assert_eq!(
            resolve(Ok(Some(r)), None, Role::Primary, None),
            known(Role::Replica, Some("h:1"))
        );
    }

    #[test]
    fn an_unreadable_record_is_unknown_and_a_replica_without_primary_starts_read_only() {
        assert!(matches!(
            resolve(Err("torn".into()), Some("u"), Role::Primary, None),
            StartAs::Unknown(w) if w == "torn"
        ));
        let r = rec("u", Role::Replica, None);
        assert_eq!(
            resolve(Ok(Some(r)), Some("u"), Role::Primary, None),
            known(Role::Replica, None)
        );
        assert_eq!(
            resolve(Ok(None), Some("u"), Role::Replica, None),
            known(Role::Replica, None)
        );
    }

    #[test]
    fn the_record_is_written_whole_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("pgdata");
        let p = path(&data);
        assert_eq!(p, dir.path().join("pgdata.bosun-role"));
        assert_eq!(read(&p), Ok(None));
        let r = rec("u", Role::Replica, Some("h:5432"));
        write(&p, &r, None).expect("write");
        assert_eq!(read(&p), Ok(Some(r)));
        std::fs::write(&p, b"{\"role\":").expect("tear");
        let e = read(&p).expect_err("torn record");
        assert!(e.contains("unreadable"), "{e}");
    }
}
