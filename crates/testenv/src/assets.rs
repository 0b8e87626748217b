//! Where the control plane's binaries are, and which Kubernetes release they are.
//!
//! The releases come from `scripts/assets/versions.env`, the one list the asset script reads
//! too: `current` (the default everywhere) and `floor` (the oldest minor bosun supports).
//! `BOSUN_KUBE_VERSION` (`current`, `floor` or one of those two versions) selects a set.
use std::path::PathBuf;

use crate::controlplane::TestEnvError;

const VERSIONS: &str = include_str!("../../../scripts/assets/versions.env");

fn pinned(key: &str) -> &'static str {
    VERSIONS
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .unwrap_or("unknown")
}

/// The Kubernetes release the suite runs on by default.
pub fn current_version() -> &'static str {
    pinned("KUBE_CURRENT")
}

/// The oldest Kubernetes release bosun supports, a lane of the suite.
pub fn floor_version() -> &'static str {
    pinned("KUBE_FLOOR")
}

/// The release `BOSUN_KUBE_VERSION` selects (`current` when unset): its `vX.Y.Z`.
pub fn selected_version() -> Result<&'static str, TestEnvError> {
    let want = std::env::var("BOSUN_KUBE_VERSION").unwrap_or_default();
    match want.as_str() {
        "" | "current" => Ok(current_version()),
        "floor" => Ok(floor_version()),
        v if v == current_version() => Ok(current_version()),
        v if v == floor_version() => Ok(floor_version()),
        other => Err(TestEnvError::Setup(format!(
            "BOSUN_KUBE_VERSION={other}: choose current ({}) or floor ({})",
            current_version(),
            floor_version()
        ))),
    }
}

#[derive(Clone, Debug)]
pub struct Assets {
    pub dir: PathBuf,
}

/// `BOSUN_ASSETS`, else `~/.cache/bosun/assets/<selected version>`.
pub fn assets_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BOSUN_ASSETS") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    // An unknown selection is reported by `Assets::locate`; the path only has to be stable.
    let version = selected_version().unwrap_or("unknown");
    home.join(".cache/bosun/assets").join(version)
}

impl Assets {
    /// Finds the binaries, or says which script installs them.
    pub fn locate(need_controller_manager: bool) -> Result<Self, TestEnvError> {
        selected_version()?;
        let dir = assets_dir();
        let mut needed = vec!["etcd", "kube-apiserver"];
        if need_controller_manager {
            needed.push("kube-controller-manager");
        }
        let missing: Vec<&str> = needed
            .into_iter()
            .filter(|b| !dir.join(b).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(TestEnvError::AssetsMissing {
                dir,
                missing: missing.join(", "),
            });
        }
        Ok(Assets { dir })
    }

    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_releases_are_versions() {
        for v in [current_version(), floor_version()] {
            let parts: Vec<&str> = v.trim_start_matches('v').split('.').collect();
            assert!(v.starts_with("v1."), "{v}");
            assert_eq!(parts.len(), 3, "{v}");
            assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{v}");
        }
        assert_ne!(current_version(), floor_version());
    }
}
