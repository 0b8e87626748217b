//! The operator under test as a process: started by a shell command with `KUBECONFIG` pointing
//! at the scenario's proxy and `WATCH_NAMESPACE` at its namespace, its output appended to one
//! log per scenario; `kill -9` or SIGTERM.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How to start the operator.
#[derive(Clone, Debug)]
pub struct Command {
    /// Run with `sh -c`.
    pub shell: String,
    /// Working directory.
    pub dir: PathBuf,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

pub struct Process {
    child: tokio::process::Child,
    pid: u32,
}

impl Process {
    pub fn start(
        cmd: &Command,
        kubeconfig: &Path,
        ns: &str,
        log: &Path,
    ) -> anyhow::Result<Process> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let child = tokio::process::Command::new("sh")
            .arg("-c")
            // `exec`: the signal reaches the operator itself, not a shell waiting on it.
            .arg(format!("exec {}", cmd.shell))
            .current_dir(&cmd.dir)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .env("KUBECONFIG", kubeconfig)
            .env("WATCH_NAMESPACE", ns)
            .env("POD_NAMESPACE", ns)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting the operator (`{}`): {e}", cmd.shell))?;
        let pid = child.id().unwrap_or(0);
        Ok(Process { child, pid })
    }

    /// `kill -9` of the operator and anything it started: no shutdown, requests cut mid-flight.
    pub async fn kill9(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM and a wait for the exit (killed after 30 s).
    pub async fn stop(mut self) {
        self.signal(libc::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait().await;
        }
    }

    /// Exited on its own (a crash, a refusal to start)?
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn signal(&self, sig: i32) {
        if self.pid > 0 {
            // SAFETY: signalling the process group of a child this process started (its own
            // group, so helpers such as ansible-runner go with it).
            unsafe {
                libc::kill(-(self.pid as i32), sig);
            }
        }
    }
}
