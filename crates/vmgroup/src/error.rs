//! The VmGroup controller's errors, each with a fixed category for the runtime's retry
//! policy: a spec that cannot work waits for a change; anything vCenter or the API server
//! refused, or could not do, is retried with exponential backoff (a missing template or a
//! wrong password may be fixed outside Kubernetes, where no watch sees it).
use bosun_runtime::error::{Categorized, ErrorCategory};
use bosun_vsphere::FaultKind;

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

    /// A vSphere error met while `doing` something, in words a vSphere admin acts on.
    pub fn vsphere(doing: &str, e: &bosun_vsphere::Error) -> Problem {
        use bosun_vsphere::Error as E;
        let (reason, hint) = match e {
            E::Fault {
                kind: FaultKind::InvalidLogin,
                ..
            } => (
                Reason::LoginFailed,
                "; check VC_USER and VC_PASS in the credentials Secret",
            ),
            E::Unreachable { .. } | E::TaskTimeout { .. } => (
                Reason::VCenterUnreachable,
                "; check VC_HOST and that vCenter is up (retried with backoff)",
            ),
            E::Tls { .. } => (
                Reason::TlsFailed,
                "; give the vCenter's CA in the Secret's ca.crt (or the operator's CA file), or set the operator's insecure option for a lab",
            ),
            E::Config(_) => (Reason::TlsFailed, ""),
            _ => (Reason::VCenterRefused, ""),
        };
        Problem::new(reason, format!("{doing}: {e}{hint}"))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec passed the schema but cannot work.
    #[error("invalid spec ({}): {}", .0.reason, .0.message)]
    InvalidSpec(Problem),
    /// vCenter, or the credentials to reach it, stand in the way: retried with backoff.
    #[error("vCenter ({}): {}", .0.reason, .0.message)]
    VCenter(Problem),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl Error {
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::InvalidSpec(p) | Error::VCenter(p) => Some(p),
            Error::Kube(_) => None,
        }
    }

    pub fn vsphere(doing: &str, e: &bosun_vsphere::Error) -> Error {
        Error::VCenter(Problem::vsphere(doing, e))
    }
}

impl Categorized for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::InvalidSpec(_) => ErrorCategory::InvalidSpec,
            Error::VCenter(_) => ErrorCategory::Transient,
            Error::Kube(_) => ErrorCategory::Api,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vsphere_errors_become_reasons_a_person_acts_on() {
        let login = bosun_vsphere::Error::Fault {
            kind: FaultKind::InvalidLogin,
            method: "Login".into(),
            message: "Login failure".into(),
        };
        let p = Problem::vsphere("logging in to vCenter", &login);
        assert_eq!(p.reason, Reason::LoginFailed);
        assert!(p.message.contains("VC_USER and VC_PASS"), "{}", p.message);
        let down = bosun_vsphere::Error::Unreachable {
            url: "https://vc/sdk".into(),
            message: "connection refused".into(),
        };
        let p = Problem::vsphere("connecting", &down);
        assert_eq!(p.reason, Reason::VCenterUnreachable);
        assert!(p.message.contains("https://vc/sdk"), "{}", p.message);
        assert_eq!(
            Error::vsphere("x", &down).category(),
            ErrorCategory::Transient
        );
    }
}
