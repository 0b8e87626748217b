//! The client's errors: a vSphere fault keeps its kind (a fixed category an operator can act
//! on and use as a metric label) and the server's message; transport and TLS errors stay apart
//! from faults, so "vCenter unreachable" and "vCenter refused" are told apart.

/// The vim25 faults an operator reacts to; every other fault is `Other` with its type name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The session is gone (expired or logged out): log in again.
    NotAuthenticated,
    /// Wrong user name or password.
    InvalidLogin,
    /// A path, file or managed object that does not exist (`FileNotFound`,
    /// `ManagedObjectNotFound`, or an inventory path that names nothing).
    NotFound,
    /// An object of that name already exists in the folder.
    DuplicateName,
    InvalidArgument,
    /// The operation is not allowed in the object's current state (e.g. powering on a VM
    /// that is on).
    InvalidState,
    Other(String),
}

impl FaultKind {
    /// Maps a vim25 fault type name (`xsi:type`, or the detail element without `Fault`).
    pub fn from_type(name: &str) -> Self {
        match name {
            "NotAuthenticated" => Self::NotAuthenticated,
            "InvalidLogin" => Self::InvalidLogin,
            "FileNotFound" | "ManagedObjectNotFound" => Self::NotFound,
            "DuplicateName" => Self::DuplicateName,
            "InvalidArgument" | "InvalidRequest" => Self::InvalidArgument,
            "InvalidState" | "InvalidPowerState" | "TaskInProgress" => Self::InvalidState,
            other => Self::Other(other.to_string()),
        }
    }

    /// A fixed, short name for metric labels and reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NotAuthenticated => "not_authenticated",
            Self::InvalidLogin => "invalid_login",
            Self::NotFound => "not_found",
            Self::DuplicateName => "duplicate_name",
            Self::InvalidArgument => "invalid_argument",
            Self::InvalidState => "invalid_state",
            Self::Other(_) => "other",
        }
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Other(name) => f.write_str(name),
            other => f.write_str(other.category()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with a fault (a SOAP fault or a task's error).
    #[error("vSphere refused {method} ({kind}): {message}")]
    Fault {
        kind: FaultKind,
        method: String,
        message: String,
    },
    /// TLS handshake or certificate verification failed.
    #[error("TLS to {url} failed: {message}")]
    Tls { url: String, message: String },
    /// Could not reach the server, or the connection broke.
    #[error("cannot reach vSphere at {url}: {message}")]
    Unreachable { url: String, message: String },
    /// An answer that is not the SOAP the call expects.
    #[error("unexpected answer to {method}: {message}")]
    Protocol { method: String, message: String },
    /// An answer larger than the client accepts.
    #[error("answer from {url} exceeds {limit} bytes")]
    TooLarge { url: String, limit: usize },
    /// The client's configuration is unusable (bad URL, unreadable CA bundle).
    #[error("vSphere client configuration: {0}")]
    Config(String),
    /// A task did not finish within the bound.
    #[error("task {task} ({method}) did not finish within {secs} s")]
    TaskTimeout {
        task: String,
        method: String,
        secs: u64,
    },
}

impl Error {
    pub fn fault_kind(&self) -> Option<&FaultKind> {
        match self {
            Self::Fault { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// A fixed category for metric labels and status reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Fault { kind, .. } => kind.category(),
            Self::Tls { .. } => "tls",
            Self::Unreachable { .. } => "unreachable",
            Self::Protocol { .. } => "protocol",
            Self::TooLarge { .. } => "protocol",
            Self::Config(_) => "config",
            Self::TaskTimeout { .. } => "task_timeout",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_types_map_to_kinds() {
        assert_eq!(
            FaultKind::from_type("ManagedObjectNotFound"),
            FaultKind::NotFound
        );
        assert_eq!(FaultKind::from_type("FileNotFound"), FaultKind::NotFound);
        assert_eq!(
            FaultKind::from_type("InvalidLogin"),
            FaultKind::InvalidLogin
        );
        assert_eq!(
            FaultKind::from_type("NoDiskSpace"),
            FaultKind::Other("NoDiskSpace".into())
        );
        assert_eq!(FaultKind::from_type("NoDiskSpace").category(), "other");
    }
}
