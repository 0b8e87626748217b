//! The Helm flavour's errors, each with a fixed category (the runtime's retry policy and
//! metric label).
use bosun_runtime::error::{Categorized, ErrorCategory};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec cannot become values (not a map, a bad override).
    #[error("{0}")]
    Values(#[from] crate::values::ValuesError),
    /// The chart does not render with these values (a template error, `required`, `fail`,
    /// a schema refusal): the message names the template's file:line.
    #[error("{0}")]
    Render(String),
    /// A rendered document is not an object, or its kind is not served.
    #[error("{0}")]
    Manifest(String),
    /// An object the release would write belongs to someone else, or the release name is
    /// another chart's.
    #[error("{0}")]
    Conflict(String),
    /// A hook failed or timed out.
    #[error("{0}")]
    Hook(#[from] crate::hooks::HookError),
    #[error("{0}")]
    Storage(#[from] crate::storage::StorageError),
    #[error("{0}")]
    Children(#[from] bosun_runtime::dynamic::ChildCacheError),
    /// The API server refused to store an object built from the values.
    #[error("{0}")]
    Rejected(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Keeping a deployed release in place failed (nothing was being installed or
    /// upgraded): reported as `Irreconcilable`, as helm-operator does.
    #[error("{0}")]
    Sync(Box<Error>),
    /// The render that failed last time as invalid, unchanged: not tried again (the
    /// previous failure's message).
    #[error("{0}")]
    FailedBefore(String),
    /// `upgradeCRDs`: a CRD of the chart's `crds/` no longer lists a version the existing
    /// CRD's objects are stored at; nothing of the release was applied.
    #[error(
        "CustomResourceDefinition {crd}: the chart's CRD drops version {version}, which its \
         status.storedVersions still lists: nothing was applied. Migrate the stored objects \
         to a version the chart keeps and remove {version} from status.storedVersions, or \
         keep {version} in the chart (served: false)"
    )]
    StoredVersionDropped { crd: String, version: String },
    /// A `valuesFrom` source is missing or holds no values.
    #[error("{0}")]
    ValuesFrom(Box<crate::values_from::SourceError>),
    /// An error whose message quoted a string a `valuesFrom` Secret gave, with it masked.
    #[error("{message}")]
    Masked {
        category: ErrorCategory,
        /// Reported as `Irreconcilable` (else `ReleaseFailed`), as the original error was.
        irreconcilable: bool,
        message: String,
    },
    /// What the Helm flavour does not do (a cluster-scoped custom resource: a release lives
    /// in a namespace).
    #[error("{0}")]
    Unsupported(String),
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Values(_) | Error::Render(_) | Error::Manifest(_) | Error::Rejected(_) => {
                ErrorCategory::InvalidSpec
            }
            Error::Conflict(_) => ErrorCategory::Conflict,
            Error::Hook(_) => ErrorCategory::Transient,
            Error::Storage(_) | Error::Children(_) | Error::Kube(_) => ErrorCategory::Api,
            Error::Sync(inner) => inner.category(),
            Error::ValuesFrom(e) if e.is_transient() => ErrorCategory::Api,
            Error::ValuesFrom(_) => ErrorCategory::InvalidSpec,
            Error::Masked { category, .. } => *category,
            Error::Unsupported(_) | Error::FailedBefore(_) | Error::StoredVersionDropped { .. } => {
                ErrorCategory::InvalidSpec
            }
        }
    }
}

impl From<crate::values_from::SourceError> for Error {
    fn from(e: crate::values_from::SourceError) -> Self {
        Error::ValuesFrom(Box::new(e))
    }
}

impl Error {
    /// Whether it is reported as `Irreconcilable` (the release could not be built or kept in
    /// place) rather than `ReleaseFailed`.
    pub fn irreconcilable(&self) -> bool {
        match self {
            Error::Values(_) | Error::Sync(_) | Error::Unsupported(_) | Error::ValuesFrom(_) => {
                true
            }
            Error::Masked { irreconcilable, .. } => *irreconcilable,
            _ => false,
        }
    }

    /// The error with every string `sourced` took from a Secret masked in its message.
    pub fn masked(self, sourced: &crate::values_from::Sourced) -> Error {
        let message = self.to_string();
        if !sourced.reveals(&message) {
            return self;
        }
        Error::Masked {
            category: self.category(),
            irreconcilable: self.irreconcilable(),
            message: sourced.mask(&message),
        }
    }
}

/// A write the API server refused as invalid is the user's to fix; anything else is
/// retried.
/// (Kubernetes 1.20 answers some malformed numbers — `replicas: 1.5` — with a 500 "failed
/// to convert" rather than a 422: that too is the values' fault, not a transient error.)
pub fn write_error(what: &str, e: kube::Error) -> Error {
    match e {
        kube::Error::Api(s)
            if s.code == 422
                || s.code == 400
                || s.code == 413
                || (s.code == 500 && s.message.contains("convert")) =>
        {
            Error::Rejected(format!("the API server refused {what}: {}", s.message))
        }
        other => Error::Kube(other),
    }
}
