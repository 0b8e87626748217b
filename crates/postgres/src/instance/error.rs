//! The instance manager's errors: each names what failed; none carries a secret.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("configuration: {0}")]
    Config(String),
    #[error("OS user: {0}")]
    User(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{program} failed ({status}): {stderr}")]
    Command {
        program: String,
        status: String,
        stderr: String,
    },
    #[error("{what}: {source}")]
    Sql {
        what: &'static str,
        source: tokio_postgres::Error,
    },
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    #[error("postgres exited unexpectedly ({0})")]
    PostgresExited(String),
    #[error("HTTP API on {addr}: {source}")]
    Http {
        addr: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Refused(String),
    /// The restore of a new instance cannot succeed as things are (no backup, a target
    /// before every backup, recovery failing): reported, not retried.
    #[error("restore: {0}")]
    Restore(String),
    #[error("backup store: {0}")]
    Store(#[from] crate::backup::volume::StoreError),
}

impl Error {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { what, path, source }
    }

    pub(crate) fn sql(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Error {
        move |source| Error::Sql { what, source }
    }
}
