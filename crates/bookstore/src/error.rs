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
    /// The API server refused a request (a quota, an admission webhook, RBAC): reported with
    /// its message, retried with backoff.
    #[error("API server refused ({}): {}", .0.reason, .0.message)]
    ApiRefused(Problem),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl Error {
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::InvalidSpec(p)
            | Error::Conflict(p)
            | Error::Refused(p)
            | Error::ApiRefused(p) => Some(p),
            Error::Kube(_) => None,
        }
    }

    /// An API error the user must see becomes [`Error::ApiRefused`], `doing` saying what was
    /// refused; conflicts, missing objects, throttling and unavailability stay plain
    /// (transient: retried, not reported), as do errors that never reached the API server.
    pub fn reported(self, doing: Option<&str>) -> Error {
        let Error::Kube(kube::Error::Api(s)) = &self else {
            return self;
        };
        if matches!(s.code, 404 | 409 | 410 | 429 | 503 | 504) {
            return self;
        }
        let reason =
            if s.message.contains("admission webhook") || s.message.contains("calling webhook") {
                Reason::AdmissionDenied
            } else if s.code == 403 {
                Reason::Forbidden
            } else {
                Reason::ApiError
            };
        let mut message = match doing {
            Some(d) => format!("the API server refused {d}: {}", s.message),
            None => format!("the API server refused a request: {}", s.message),
        };
        if message.len() > 1000 {
            let mut cut = 1000;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        Error::ApiRefused(Problem::new(reason, message))
    }
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::InvalidSpec(_) | Error::Refused(_) => ErrorCategory::InvalidSpec,
            Error::Conflict(_) => ErrorCategory::Conflict,
            Error::ApiRefused(_) => ErrorCategory::Api,
            // The API server's validation of a child refused what the spec produced.
            Error::Kube(kube::Error::Api(s)) if s.code == 422 => ErrorCategory::InvalidSpec,
            Error::Kube(_) => ErrorCategory::Api,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, message: &str) -> Error {
        Error::Kube(kube::Error::Api(
            Status::failure(message, "").with_code(code).boxed(),
        ))
    }

    fn reason(e: Error) -> Option<Reason> {
        match e.reported(Some("Service s")) {
            Error::ApiRefused(p) => Some(p.reason),
            _ => None,
        }
    }

    #[test]
    fn refusals_are_reported_transient_errors_are_not() {
        assert_eq!(
            reason(api(403, "services \"s\" is forbidden: exceeded quota")),
            Some(Reason::Forbidden)
        );
        assert_eq!(
            reason(api(
                400,
                "admission webhook \"v.example.com\" denied the request: no"
            )),
            Some(Reason::AdmissionDenied)
        );
        assert_eq!(
            reason(api(500, "Internal error occurred: failed calling webhook")),
            Some(Reason::AdmissionDenied)
        );
        assert_eq!(reason(api(400, "bad")), Some(Reason::ApiError));
        for transient in [404, 409, 429, 503, 504] {
            assert_eq!(reason(api(transient, "x")), None, "{transient}");
        }
        let e = api(403, "nope").reported(Some("Service s"));
        assert_eq!(e.category(), ErrorCategory::Api);
        assert_eq!(
            e.problem().map(|p| p.message.as_str()),
            Some("the API server refused Service s: nope")
        );
    }
}
