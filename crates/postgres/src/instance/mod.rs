//! The instance manager: the entry point of every instance's pod (`bosun pg instance`).
//!
//! It owns one PostgreSQL data directory and the `postgres` process on it:
//! 1. prepare: find the unprivileged OS user PostgreSQL runs as (it refuses root), give it the
//!    data directory and a private run directory (unix socket, password file);
//! 2. initialise (`initdb`) or join (`pg_basebackup` from the primary, through a replication
//!    slot made for this instance) when the data directory is empty;
//! 3. start `postgres` as a child with the per-instance settings on its command line (they
//!    win over any file a base backup or a rewind copied from another instance): it listens on
//!    the pod IP only, never `*`;
//! 4. serve its state over HTTP on the pod IP ([`http`]), and carry out the operator's
//!    requests one at a time: promote, demote (rejoin a new primary with `pg_rewind`, falling
//!    back to a fresh clone), fence and unfence. Mutating requests need the API token.
//!
//! If `postgres` dies when it was not asked to stop, the manager exits with an error: the
//! kubelet restarts the pod on the same volume, and the operator sees it.
mod backup;
mod catchup;
pub mod client;
mod config;
mod error;
pub mod http;
mod isolation;
mod manager;
mod os;
mod pg;
mod progress;
pub mod record;
mod recovering;
pub(crate) mod sql;
mod state;
pub mod timeline;

pub use config::{slot_name, AppDb, Args, BackupOptions, Config, Credentials, InitDbOptions, Role};
pub use error::Error;
/// How often a primary checks that it is not isolated (its replicas or the operator seen).
pub use isolation::CHECK_EVERY as ISOLATION_CHECK_EVERY;
pub use manager::run;
pub use sql::connect_remote;
pub use state::{parse_lsn, BackupState, InstanceState, ParameterState, Rejoin, StateRole};

/// How long the manager gives PostgreSQL's fast shutdown before SIGKILL; the pod's grace
/// period must outlast it, or the kubelet kills first and unsent WAL is lost as in a crash.
pub const STOP_DEADLINE_SECS: u64 = 60;

/// The database superuser (also used by `pg_rewind` on a source server).
pub const SUPERUSER: &str = "postgres";
/// The role replicas stream with.
pub const REPLICATION_USER: &str = "streaming_replica";

/// `bosun pg install DEST`: copies the running `bosun` binary to `DEST` (mode 0755). The
/// init container of an instance's pod runs it from bosun's image into a volume shared with
/// the PostgreSQL image's container, which then runs `bosun pg instance` from there.
pub fn install_self(dest: &std::path::Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let me = std::env::current_exe().map_err(Error::io("finding", "the running binary"))?;
    let tmp = dest.with_extension("partial");
    std::fs::copy(&me, &tmp).map_err(Error::io("copying to", &tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .map_err(Error::io("setting the mode of", &tmp))?;
    std::fs::rename(&tmp, dest).map_err(Error::io("renaming to", dest))
}
