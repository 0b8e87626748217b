//! Which engine runs a watches entry, decided once at load.
//!
//! * `auto` (the default): the native engine when it loads the role (and the finalizer's);
//!   real Ansible when the native loader refuses a construct outside its subset — the log
//!   names the first such construct with its file:line; a role that is missing or does not
//!   parse is refused either way (real Ansible would refuse it too).
//! * `native`: the native engine or a load-time refusal naming the construct.
//! * `ansible`: real Ansible for every role and playbook entry.
//!
//! Real Ansible is found as `ansible-runner`: the `BOSUN_ANSIBLE_RUNNER` environment
//! variable (a path to the executable, typically `<venv>/bin/ansible-runner`), else the first
//! `ansible-runner` on `PATH`. The executable's directory comes first on the runs' `PATH`, so
//! `ansible-playbook` and Python are taken from the same installation (a venv need not be
//! activated). When an entry needs real Ansible and none is found, loading fails with
//! [`INSTALL_HINT`].
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// `--ansible-engine`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineFlag {
    #[default]
    Auto,
    Native,
    Ansible,
}

impl FromStr for EngineFlag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(EngineFlag::Auto),
            "native" => Ok(EngineFlag::Native),
            "ansible" => Ok(EngineFlag::Ansible),
            other => Err(format!(
                "unknown Ansible engine {other:?} (expected auto, native or ansible)"
            )),
        }
    }
}

impl fmt::Display for EngineFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineFlag::Auto => "auto",
            EngineFlag::Native => "native",
            EngineFlag::Ansible => "ansible",
        })
    }
}

/// The environment variable naming the `ansible-runner` executable.
pub const RUNNER_ENV: &str = "BOSUN_ANSIBLE_RUNNER";

/// What to do when real Ansible is needed and not found.
pub const INSTALL_HINT: &str = "real Ansible is not installed: install it with `python3 -m venv /opt/ansible && /opt/ansible/bin/pip install ansible==11.13.0 ansible-runner==2.4.3 kubernetes==33.1.0` (scripts/setup-ansible.sh does the same into ~/.cache/bosun/ansible-venv), then put its bin directory on PATH or set BOSUN_ANSIBLE_RUNNER=/opt/ansible/bin/ansible-runner; or use bosun's Ansible image variant";

/// A real Ansible installation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installation {
    /// The `ansible-runner` executable.
    pub runner: PathBuf,
}

impl Installation {
    /// From this process's environment.
    pub fn find() -> Option<Installation> {
        Installation::find_with(&|k| std::env::var(k).ok())
    }

    /// `BOSUN_ANSIBLE_RUNNER` (when it names an executable file), else `ansible-runner` on
    /// `PATH`.
    pub fn find_with(env: &dyn Fn(&str) -> Option<String>) -> Option<Installation> {
        if let Some(p) = env(RUNNER_ENV).filter(|p| !p.is_empty()) {
            let p = PathBuf::from(p);
            return executable(&p).then_some(Installation { runner: p });
        }
        let path = env("PATH")?;
        std::env::split_paths(&path)
            .map(|d| d.join("ansible-runner"))
            .find(|p| executable(p))
            .map(|runner| Installation { runner })
    }

    /// The installation's bin directory (put first on the runs' `PATH`).
    pub fn bin_dir(&self) -> PathBuf {
        self.runner
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The engine an entry runs on, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    Native,
    /// Real Ansible; `why` is the first construct the native engine refused (file:line), or
    /// the flag that forced it.
    Ansible {
        why: String,
    },
}

/// Why an entry cannot run.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The native loader's error stands: forced native, or not a subset question (missing
    /// role, YAML that does not parse).
    Native,
    /// Real Ansible is needed (`why`) and not installed.
    NotInstalled { why: String },
}

/// Whether a native load error is only the subset's limit (real Ansible may run the role)
/// rather than a role that no engine can run.
pub fn outside_subset(e: &bosun_ansible::Error) -> bool {
    e.is_outside_subset()
}

/// Decides the engine of one entry from the flag, the native load's error (None: it loaded)
/// and whether real Ansible is installed.
pub fn choose(
    flag: EngineFlag,
    native: Option<&bosun_ansible::Error>,
    installed: bool,
) -> Result<Engine, Refusal> {
    let why = match (flag, native) {
        (EngineFlag::Native, None) | (EngineFlag::Auto, None) => return Ok(Engine::Native),
        (EngineFlag::Native, Some(_)) => return Err(Refusal::Native),
        (EngineFlag::Ansible, _) => "forced by --ansible-engine=ansible".to_string(),
        (EngineFlag::Auto, Some(e)) if outside_subset(e) => {
            // The first construct is reason enough; the native refusal lists them all.
            format!("the native engine does not support {}", e.first_construct())
        }
        (EngineFlag::Auto, Some(_)) => return Err(Refusal::Native),
    };
    if installed {
        Ok(Engine::Ansible { why })
    } else {
        Err(Refusal::NotInstalled { why })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsupported() -> bosun_ansible::Error {
        bosun_ansible::Error::Load {
            file: "roles/r/tasks/main.yml".into(),
            line: 5,
            col: 3,
            msg: "module 'shell' is not supported by bosun (supported: k8s)".into(),
        }
    }

    #[test]
    fn auto_falls_back_only_for_constructs_outside_the_subset() {
        assert_eq!(choose(EngineFlag::Auto, None, true), Ok(Engine::Native));
        assert_eq!(choose(EngineFlag::Auto, None, false), Ok(Engine::Native));
        match choose(EngineFlag::Auto, Some(&unsupported()), true) {
            Ok(Engine::Ansible { why }) => {
                assert!(why.contains("roles/r/tasks/main.yml:5:3"), "{why}");
                assert!(why.contains("'shell'"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Missing or malformed roles are refused by every engine.
        let missing = bosun_ansible::Error::Io("the role 'x' was not found".into());
        assert_eq!(
            choose(EngineFlag::Auto, Some(&missing), true),
            Err(Refusal::Native)
        );
        let malformed = bosun_ansible::Error::Load {
            file: "a.yml".into(),
            line: 1,
            col: 1,
            msg: "a playbook must be a list of plays".into(),
        };
        assert_eq!(
            choose(EngineFlag::Auto, Some(&malformed), true),
            Err(Refusal::Native)
        );
    }

    #[test]
    fn auto_without_ansible_names_the_construct() {
        match choose(EngineFlag::Auto, Some(&unsupported()), false) {
            Err(Refusal::NotInstalled { why }) => assert!(why.contains("main.yml:5:3"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_flag_forces_either_engine() {
        assert_eq!(
            choose(EngineFlag::Native, Some(&unsupported()), true),
            Err(Refusal::Native)
        );
        assert_eq!(choose(EngineFlag::Native, None, true), Ok(Engine::Native));
        assert!(matches!(
            choose(EngineFlag::Ansible, None, true),
            Ok(Engine::Ansible { why }) if why.contains("--ansible-engine=ansible")
        ));
        assert!(matches!(
            choose(EngineFlag::Ansible, None, false),
            Err(Refusal::NotInstalled { .. })
        ));
    }

    #[test]
    fn flag_parses_and_prints() {
        for f in [EngineFlag::Auto, EngineFlag::Native, EngineFlag::Ansible] {
            assert_eq!(f.to_string().parse::<EngineFlag>(), Ok(f));
        }
        assert!("python".parse::<EngineFlag>().is_err());
    }

    #[test]
    fn installation_from_the_variable_or_path() {
        let dir = tempfile::tempdir().expect("dir");
        let exe = dir.path().join("ansible-runner");
        std::fs::write(&exe, "#!/bin/sh\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let d = dir.path().display().to_string();
        let e = exe.display().to_string();
        let on_path =
            Installation::find_with(&|k| (k == "PATH").then(|| format!("/nonexistent:{d}")));
        assert_eq!(on_path.map(|i| i.runner), Some(exe.clone()));
        let named = Installation::find_with(&|k| (k == RUNNER_ENV).then(|| e.clone()));
        assert_eq!(
            named.as_ref().map(|i| i.bin_dir()),
            Some(dir.path().to_path_buf())
        );
        // A variable naming nothing runnable is not silently replaced by PATH.
        let wrong = Installation::find_with(&|k| match k {
            RUNNER_ENV => Some("/nonexistent/ansible-runner".into()),
            "PATH" => Some(d.clone()),
            _ => None,
        });
        assert_eq!(wrong, None);
        assert_eq!(Installation::find_with(&|_| None), None);
    }
}
