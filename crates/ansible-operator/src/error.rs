//! The Ansible flavour's errors, each with a fixed category (the runtime's retry policy and
//! metric label).
use bosun_runtime::error::{Categorized, ErrorCategory};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The role (or finalizer role) failed: the failed tasks' messages, joined by newlines
    /// as in the `Failure` condition. Retried with exponential backoff, as ansible-operator's
    /// rate limiter does: a failing task may be waiting for something else (a CRD, a
    /// Secret, another controller).
    #[error("{0}")]
    Run(String),
    /// The reconcile-period annotation does not parse: the user must fix the object.
    #[error("{0}")]
    Annotation(String),
    /// No engine can run the entry (its role is missing, malformed, or needs real Ansible
    /// that is not installed): reported on the custom resource, retried only when it
    /// changes (the entry is fixed by fixing the role and restarting).
    #[error("{0}")]
    Refused(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Another writer kept changing the object while its status was written: retried
    /// with backoff like any API error.
    #[error("{0}")]
    Conflict(String),
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Run(_) => ErrorCategory::Transient,
            Error::Annotation(_) | Error::Refused(_) => ErrorCategory::InvalidSpec,
            Error::Kube(_) | Error::Conflict(_) => ErrorCategory::Api,
        }
    }
}
