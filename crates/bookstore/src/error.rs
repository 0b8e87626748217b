//! The BookStore controller's errors, each with a fixed category.
use bosun_runtime::error::{Categorized, ErrorCategory};

use crate::reason::Reason;

/// A problem the user must see: a condition reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub reason: Reason,
    pub message: String,
}

impl Problem {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Problem {
            reason,
            message: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec passed the schema but cannot work.
    #[error("invalid spec ({}): {}", .0.reason, .0.message)]
    InvalidSpec(Problem),
    /// A child's name is held by another owner, or old data would be reused.
    #[error("conflict ({}): {}", .0.reason, .0.message)]
    Conflict(Problem),
    /// A requested change that bosun refuses to carry out (shrinking a volume, say).
    #[error("refused ({}): {}", .0.reason, .0.message)]
    Refused(Problem),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl Error {
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::InvalidSpec(p) | Error::Conflict(p) | Error::Refused(p) => Some(p),
            Error::Kube(_) => None,
        }
    }
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::InvalidSpec(_) | Error::Refused(_) => ErrorCategory::InvalidSpec,
            Error::Conflict(_) => ErrorCategory::Conflict,
            // The API server's validation of a child refused what the spec produced.
            Error::Kube(kube::Error::Api(s)) if s.code == 422 => ErrorCategory::InvalidSpec,
            Error::Kube(_) => ErrorCategory::Api,
        }
    }
}
