//! Fixed error categories, used as metric labels and to choose a retry policy.

/// Every operator error maps to one of these; metric labels never carry free text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCategory {
    /// The user's spec cannot work; wait for it to change.
    InvalidSpec,
    /// Another owner holds an object we would write; wait for a change.
    Conflict,
    /// The API server refused or failed a request; retry with backoff.
    Api,
    /// Anything else that should be retried.
    Transient,
}

impl ErrorCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::InvalidSpec => "invalid_spec",
            ErrorCategory::Conflict => "conflict",
            ErrorCategory::Api => "api",
            ErrorCategory::Transient => "transient",
        }
    }
}

/// Implemented by each operator's error type.
pub trait Categorized {
    fn category(&self) -> ErrorCategory;
}

impl Categorized for kube::Error {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Api
    }
}
