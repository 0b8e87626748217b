//! vcsim, govmomi's vSphere API simulator: a real vim25 SOAP server for the vSphere client's
//! and the VmGroup operator's tests. Each `Vcsim` is its own process on a free loopback port,
//! with its own credentials and a TLS certificate signed by a CA generated for it; it dies on
//! drop and with the test binary.
//!
//! The binary comes from `scripts/setup-vcsim.sh` (`~/.cache/bosun/vcsim/0.24.2/vcsim`), or
//! `BOSUN_VCSIM`.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::process;

pub const VCSIM_VERSION: &str = "0.24.2";
const READY_SECS: u64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum VcsimError {
    #[error("vcsim not found at {0}; run `bash scripts/setup-vcsim.sh` (or set BOSUN_VCSIM)")]
    Missing(PathBuf),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("certificate generation: {0}")]
    Cert(String),
    #[error("vcsim did not start within {secs} s: {detail}")]
    NotReady { secs: u64, detail: String },
}

/// `BOSUN_VCSIM`, else `~/.cache/bosun/vcsim/0.24.2/vcsim`.
pub fn vcsim_path() -> PathBuf {
    if let Some(p) = std::env::var_os("BOSUN_VCSIM") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/bosun/vcsim")
        .join(VCSIM_VERSION)
        .join("vcsim")
}

/// A running vcsim (one datacenter `DC0`, a cluster of 3 hosts, template VMs such as
/// `/DC0/vm/DC0_H0_VM0`).
pub struct Vcsim {
    child: Child,
    dir: tempfile::TempDir,
    /// `https://127.0.0.1:<port>/sdk`
    pub url: String,
    pub user: String,
    pub password: String,
    ca_pem: String,
}

impl Vcsim {
    pub fn start() -> Result<Self, VcsimError> {
        Self::start_with(&[])
    }

    /// [`Self::start`] with more of vcsim's flags, e.g. `["-method-delay",
    /// "CloneVM_Task:500"]` to give its instant tasks a duration (benchmarks).
    pub fn start_with(extra: &[&str]) -> Result<Self, VcsimError> {
        let bin = vcsim_path();
        if !bin.is_file() {
            return Err(VcsimError::Missing(bin));
        }
        let dir = tempfile::Builder::new().prefix("bosun-vcsim-").tempdir()?;
        let ca_pem = write_certificates(dir.path())?;
        let (user, password) = ("bosun".to_string(), "vcsim-test-password".to_string());
        let log = std::fs::File::create(dir.path().join("vcsim.log"))?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-l")
            .arg("127.0.0.1:0")
            .arg("-username")
            .arg(&user)
            .arg("-password")
            .arg(&password)
            .arg("-tlscert")
            .arg(dir.path().join("cert.pem"))
            .arg("-tlskey")
            .arg(dir.path().join("key.pem"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let mut child = process::spawn(cmd)?;
        let stdout = child.stdout.take();
        // vcsim prints `export GOVC_URL=https://user:pass@127.0.0.1:PORT/sdk ...` once it listens.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(out) = stdout {
                let _ = BufReader::new(out).read_line(&mut line);
            }
            let _ = tx.send(line);
        });
        let not_ready = |detail: String| VcsimError::NotReady {
            secs: READY_SECS,
            detail,
        };
        let line = match rx.recv_timeout(Duration::from_secs(READY_SECS)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(not_ready("no address printed".into()));
            }
        };
        let Some(addr) = listen_address(&line) else {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.path().join("vcsim.log")).unwrap_or_default();
            return Err(not_ready(format!("printed {line:?}; log: {log}")));
        };
        Ok(Vcsim {
            child,
            dir,
            url: format!("https://{addr}/sdk"),
            user,
            password,
            ca_pem,
        })
    }

    /// The PEM of the CA that signed vcsim's certificate (IP SAN 127.0.0.1, `localhost`).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The vcsim process id, for tests that need to signal it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Freezes vcsim (SIGSTOP): the kernel still accepts connections but nothing answers, as
    /// with a vCenter that hangs. Its inventory is kept (vcsim has no persistence, so a
    /// restart would lose it). [`Vcsim::resume`] thaws it.
    /// Stops vcsim (SIGSTOP) and returns once every one of its threads is stopped: the
    /// signal is delivered asynchronously, and a Go thread running at that moment could still
    /// answer a request sent right after `kill` returned.
    pub fn pause(&self) -> std::io::Result<()> {
        self.signal(libc::SIGSTOP)?;
        let tasks = format!("/proc/{}/task", self.child.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let mut all_stopped = true;
            for t in std::fs::read_dir(&tasks)? {
                let stat = std::fs::read_to_string(t?.path().join("stat")).unwrap_or_default();
                // The state follows the parenthesised command name: "pid (comm) S ...".
                let state = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim().chars().next());
                if !matches!(state, Some('T') | Some('t')) {
                    all_stopped = false;
                }
            }
            if all_stopped {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(std::io::Error::other("vcsim did not stop within 10 s"));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn resume(&self) -> std::io::Result<()> {
        self.signal(libc::SIGCONT)
    }

    fn signal(&self, sig: i32) -> std::io::Result<()> {
        let pid = i32::try_from(self.child.id()).map_err(std::io::Error::other)?;
        // SAFETY: signals a child this struct owns and has not reaped.
        if unsafe { libc::kill(pid, sig) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Vcsim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `127.0.0.1:PORT` from vcsim's `GOVC_URL=https://user:pass@127.0.0.1:PORT/sdk` line.
fn listen_address(line: &str) -> Option<String> {
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("GOVC_URL="))?;
    let rest = url.strip_prefix("https://")?;
    let host_port = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host_port = host_port.split('/').next()?;
    (!host_port.is_empty()).then(|| host_port.to_string())
}

/// Writes `cert.pem` and `key.pem` (signed by a fresh CA) into `dir`; returns the CA's PEM.
fn write_certificates(dir: &std::path::Path) -> Result<String, VcsimError> {
    let err = |e: rcgen::Error| VcsimError::Cert(e.to_string());
    let ca_key = rcgen::KeyPair::generate().map_err(err)?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "bosun test vcsim CA");
    let ca = ca_params.self_signed(&ca_key).map_err(err)?;
    let key = rcgen::KeyPair::generate().map_err(err)?;
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(err)?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(err)?;
    std::fs::write(dir.join("cert.pem"), cert.pem())?;
    std::fs::write(dir.join("key.pem"), key.serialize_pem())?;
    Ok(ca.pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listen_address_is_read_from_govc_url() {
        assert_eq!(
            listen_address("export GOVC_URL=https://u:p@127.0.0.1:44373/sdk GOVC_SIM_PID=1\n"),
            Some("127.0.0.1:44373".into())
        );
        assert_eq!(listen_address("something else"), None);
    }
}
