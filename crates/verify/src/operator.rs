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
        let mut sh = tokio::process::Command::new("sh");
        sh.arg("-c")
            // `exec`: the signal reaches the operator itself, not a shell waiting on it.
            .arg(format!("exec {}", cmd.shell))
            .current_dir(&cmd.dir)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .env("KUBECONFIG", kubeconfig)
            .env("WATCH_NAMESPACE", ns)
            .env("POD_NAMESPACE", ns)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out));
        Process::spawn(sh)
            .map_err(|e| anyhow::anyhow!("starting the operator (`{}`): {e}", cmd.shell))
    }

    /// Starts `cmd` as an operator process: in a process group of its own (so that a kill
    /// takes its helpers), killed when dropped.
    pub fn spawn(mut cmd: tokio::process::Command) -> std::io::Result<Process> {
        let child = cmd.kill_on_drop(true).process_group(0).spawn()?;
        let pid = child.id().unwrap_or(0);
        Ok(Process { child, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `kill -9` of the operator and anything it started: no shutdown, requests cut mid-flight.
    pub async fn kill9(mut self) {
        // Helpers that left the process group (ansible-runner starts its playbooks in a
        // session of their own) would live on and write into the next scenario.
        for pid in descendants(self.pid) {
            // SAFETY: a plain signal to a process this one started (directly or not).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        self.signal(libc::SIGKILL);
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM and a wait for the exit (killed after `grace`); helpers it left behind are
    /// killed. How it exited, or None when it had to be killed.
    pub async fn stop(mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let helpers = descendants(self.pid);
        self.signal(libc::SIGTERM);
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                self.signal(libc::SIGKILL);
                let _ = self.child.wait().await;
                None
            }
        };
        for pid in helpers {
            // SAFETY: as in kill9.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        status
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

/// Every process started by `pid`, however deep, from /proc (parent ids).
fn descendants(pid: u32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The name (field 2) may hold spaces and parentheses: the fields after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|f| f.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((p, ppid));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid as i32];
    while let Some(parent) = frontier.pop() {
        for (p, pp) in &parent_of {
            if *pp == parent && !out.contains(p) {
                out.push(*p);
                frontier.push(*p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn kill9_takes_helpers_that_left_the_process_group() {
        let dir = std::env::temp_dir();
        let log = dir.join(format!("verify-operator-test-{}.log", std::process::id()));
        let cmd = super::Command {
            // `setsid` puts the helper in a session (and group) of its own.
            shell: "sh -c 'setsid sleep 300 & wait'".into(),
            dir: dir.clone(),
            env: vec![],
        };
        let p = super::Process::start(&cmd, &log, "ns", &log).expect("started");
        let pid = p.pid;
        let mut helpers = Vec::new();
        for _ in 0..100 {
            helpers = super::descendants(pid);
            if !helpers.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!helpers.is_empty(), "{helpers:?}");
        p.kill9().await;
        // Gone, or a zombie waiting for its reaper (a signal is delivered, not awaited).
        let state = |h: &i32| {
            std::fs::read_to_string(format!("/proc/{h}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .and_then(|(_, r)| r.trim().chars().next())
                })
        };
        let dead = |h: &i32| matches!(state(h), None | Some('Z'));
        for _ in 0..250 {
            if helpers.iter().all(dead) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        for h in &helpers {
            assert!(dead(h), "{h}: {:?}", state(h));
        }
        let _ = std::fs::remove_file(&log);
    }
}
