//! Where the control plane's binaries are.
use std::path::PathBuf;

use crate::controlplane::TestEnvError;

pub const K8S_VERSION: &str = "v1.20.2";

#[derive(Clone, Debug)]
pub struct Assets {
    pub dir: PathBuf,
}

/// `BOSUN_ASSETS`, else `~/.cache/bosun/assets/v1.20.2`.
pub fn assets_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BOSUN_ASSETS") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/bosun/assets").join(K8S_VERSION)
}

impl Assets {
    /// Finds the binaries, or says which script installs them.
    pub fn locate(need_controller_manager: bool) -> Result<Self, TestEnvError> {
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
