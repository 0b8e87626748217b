//! The Kubernetes releases bosun supports, and the check a manager makes before it starts.
//!
//! bosun relies on APIs an old server lacks (`policy/v1` PodDisruptionBudgets, CRD validation
//! rules, server-side apply as it works since 1.22); on such a server it would fail mid-
//! reconcile with a 404 deep in some child. It refuses at start instead, naming the server's
//! version and the supported range. A server newer than the newest tested one is run with a
//! warning: Kubernetes keeps its GA APIs.
use k8s_openapi::apimachinery::pkg::version::Info;

/// The oldest minor release supported (the suite's floor lane runs on it).
pub const MIN_MINOR: u32 = 33;
/// The newest minor release the suite runs on.
pub const MAX_TESTED_MINOR: u32 = 37;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VersionError {
    #[error(
        "the API server is Kubernetes {found}; bosun supports 1.{MIN_MINOR} to 1.{MAX_TESTED_MINOR} \
         (it relies on APIs older servers lack): upgrade the cluster, or use an older bosun"
    )]
    TooOld { found: String },
    #[error(
        "the API server reports a version bosun cannot read: major {major:?}, minor {minor:?}"
    )]
    Unreadable { major: String, minor: String },
}

/// What the server said, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    pub minor: u32,
    /// `gitVersion`, e.g. `v1.37.1`.
    pub git_version: String,
    /// Newer than the newest release bosun is tested on.
    pub newer_than_tested: bool,
}

/// Reads `/version` and decides. Managed distributions report minors like `33+`; the digits
/// are what count.
pub fn judge(info: &Info) -> Result<ServerVersion, VersionError> {
    let digits = |s: &str| -> Option<u32> {
        let d: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
        d.parse().ok()
    };
    let unreadable = || VersionError::Unreadable {
        major: info.major.clone(),
        minor: info.minor.clone(),
    };
    let (major, minor) = match (digits(&info.major), digits(&info.minor)) {
        (Some(a), Some(b)) => (a, b),
        // A server built without version stamps reports empty fields; its gitVersion may
        // still say v1.N.
        _ => parse_git_version(&info.git_version).ok_or_else(unreadable)?,
    };
    if major != 1 {
        return Err(unreadable());
    }
    if minor < MIN_MINOR {
        return Err(VersionError::TooOld {
            found: info.git_version.clone(),
        });
    }
    Ok(ServerVersion {
        minor,
        git_version: info.git_version.clone(),
        newer_than_tested: minor > MAX_TESTED_MINOR,
    })
}

fn parse_git_version(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.trim_start_matches('v').split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Asks the server and judges its version; a newer-than-tested server is logged once.
pub async fn check(client: &kube::Client) -> Result<ServerVersion, CheckError> {
    let info = client.apiserver_version().await?;
    let v = judge(&info)?;
    if v.newer_than_tested {
        tracing::warn!(
            server = %v.git_version,
            "the API server is newer than the newest Kubernetes bosun is tested on (1.{MAX_TESTED_MINOR})"
        );
    }
    Ok(v)
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("reading the API server's version: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Version(#[from] VersionError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str, git: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_supported_range_passes_and_says_when_newer_than_tested() {
        let v = judge(&info("1", "37", "v1.37.1")).expect("supported");
        assert_eq!((v.minor, v.newer_than_tested), (37, false));
        let v = judge(&info("1", "33+", "v1.33.5-eks-1")).expect("a managed 1.33");
        assert_eq!(v.minor, 33);
        let v = judge(&info("1", "40", "v1.40.0")).expect("newer runs");
        assert!(v.newer_than_tested);
    }

    #[test]
    fn an_older_server_is_refused_naming_both_versions() {
        let e = judge(&info("1", "20", "v1.20.2")).expect_err("too old");
        let msg = e.to_string();
        assert!(msg.contains("v1.20.2"), "{msg}");
        assert!(msg.contains(&format!("1.{MIN_MINOR}")), "{msg}");
        assert!(judge(&info("1", "32", "v1.32.9")).is_err());
    }

    #[test]
    fn empty_stamps_fall_back_to_git_version_and_garbage_is_unreadable() {
        assert_eq!(judge(&info("", "", "v1.36.3")).expect("from git").minor, 36);
        assert!(matches!(
            judge(&info("", "", "master")),
            Err(VersionError::Unreadable { .. })
        ));
        assert!(matches!(
            judge(&info("2", "0", "v2.0.0")),
            Err(VersionError::Unreadable { .. })
        ));
    }
}
