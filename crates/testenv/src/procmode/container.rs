//! One container's life: resolve its image, environment and root, start its process, run
//! its probes, and restart it by the pod's `restartPolicy` with a doubling back-off. Every
//! change of its status goes to the pod's task as a [`Report`]; the pod task alone writes.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use super::env::{self, expand, PodFacts};
use super::probe::{probe_loop, Kind, ProbeMsg};
use super::sandbox::{exit_code, kill_group, Mount, Proc, Sandbox};
use super::{now, Ctx, PodShared, Reason};

/// When a container is started again after it exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Always,
    OnFailure,
    Never,
}

impl Policy {
    pub fn of(pod: &Pod) -> Policy {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("Never") => Policy::Never,
            Some("OnFailure") => Policy::OnFailure,
            _ => Policy::Always,
        }
    }

    fn restarts(self, code: i32) -> bool {
        match self {
            Policy::Always => true,
            Policy::OnFailure => code != 0,
            Policy::Never => false,
        }
    }
}

/// What the pod asks of its running containers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM, then SIGKILL of the group after this long.
    Grace(Duration),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet (creating, or refused).
    Waiting,
    Running,
    /// Exited, to be started again.
    BackOff,
    /// Exited for good with this code.
    Done(i32),
}

pub struct Report {
    pub init: bool,
    pub idx: usize,
    pub status: Value,
    pub ready: bool,
    pub phase: Phase,
}

pub struct Spec {
    pub ctx: Arc<Ctx>,
    pub shared: Arc<PodShared>,
    pub pod: Arc<Pod>,
    pub container: Arc<Container>,
    pub init: bool,
    pub idx: usize,
    pub policy: Policy,
    pub pod_ip: String,
    pub mounts: Vec<(String, PathBuf)>,
    pub report: mpsc::UnboundedSender<Report>,
    pub stop: watch::Receiver<Option<Stop>>,
}

struct Status {
    restarts: i32,
    last: Value,
    /// The last configuration error reported in an Event (each new one is reported once).
    warned: Option<String>,
}

impl Spec {
    fn send(&self, st: &Status, state: Value, ready: bool, started: bool, phase: Phase) {
        let c = &self.container;
        let status = json!({
            "name": c.name, "image": c.image.clone().unwrap_or_default(),
            "imageID": format!("process://{}", c.image.clone().unwrap_or_default()),
            "ready": ready, "started": started, "restartCount": st.restarts,
            "state": state, "lastState": st.last,
        });
        let _ = self.report.send(Report {
            init: self.init,
            idx: self.idx,
            status,
            ready,
            phase,
        });
    }

    fn waiting(&self, st: &Status, reason: Reason, message: &str) {
        let state = json!({"waiting": {"reason": reason.as_str(), "message": message}});
        self.send(st, state, false, false, Phase::Waiting);
    }

    fn stopped(&self) -> bool {
        self.stop.borrow().is_some()
    }

    /// Waits `d`, or less when the pod stops; true when it stopped.
    async fn pause(&self, d: Duration) -> bool {
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => self.stopped(),
            _ = stop.wait_for(|s| s.is_some()) => true,
        }
    }

    /// Runs until the container is done for good (its last exit code), or stopped (None).
    pub async fn run(self) -> Option<i32> {
        let mut st = Status {
            restarts: 0,
            last: json!({}),
            warned: None,
        };
        let mut backoff = self.ctx.cfg.restart_backoff;
        loop {
            if self.stopped() || self.shared.lost.load(Ordering::SeqCst) {
                return None;
            }
            let (argv, envs, sandbox) = match self.prepare(&mut st).await {
                Ok(p) => p,
                Err(Halt::Refused) => {
                    // An image never appears here: wait for the pod's deletion.
                    let _ = self.stop.clone().wait_for(|s| s.is_some()).await;
                    return None;
                }
                Err(Halt::Retry) => {
                    if self.pause(backoff).await {
                        return None;
                    }
                    continue;
                }
            };
            let started_at = now();
            let since = Instant::now();
            let spawned = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.shared.log_path(&self.container.name))
                .and_then(|log| sandbox.command(&argv, &envs, Some(&log)))
                .and_then(Proc::spawn);
            let (code, signal, reason, message) = match spawned {
                Err(e) => {
                    let msg = format!("starting {argv:?}: {e}");
                    self.ctx.warn(&self.pod, Reason::Failed, &msg).await;
                    (128, None, "StartError", Some(msg))
                }
                Ok(proc) => {
                    let envs = Arc::new(envs);
                    match self
                        .supervise(proc, &st, &sandbox, &envs, &started_at)
                        .await
                    {
                        Exit::Stopped => return None,
                        Exit::Exited(code, signal) => (
                            code,
                            signal,
                            if code == 0 { "Completed" } else { "Error" },
                            None,
                        ),
                    }
                }
            };
            if self.shared.lost.load(Ordering::SeqCst) {
                // The node is gone: nobody reports, nobody restarts.
                return None;
            }
            let terminated = json!({"terminated": {
                "exitCode": code, "signal": signal, "reason": reason, "message": message,
                "startedAt": started_at, "finishedAt": now(),
            }});
            if !self.policy.restarts(code) || (self.init && code == 0) {
                self.send(&st, terminated, false, false, Phase::Done(code));
                return Some(code);
            }
            st.last = terminated;
            st.restarts += 1;
            if since.elapsed() > Duration::from_secs(10) {
                backoff = self.ctx.cfg.restart_backoff;
            }
            let msg = format!(
                "back-off {backoff:?} restarting failed container={} pod={}",
                self.container.name, self.shared.name
            );
            let state =
                json!({"waiting": {"reason": Reason::CrashLoopBackOff.as_str(), "message": msg}});
            self.send(&st, state, false, false, Phase::BackOff);
            if self.pause(backoff).await {
                return None;
            }
            backoff = (backoff * 2).min(self.ctx.cfg.max_restart_backoff);
        }
    }

    /// The argv, environment and root of the next start — or why there is none.
    async fn prepare(
        &self,
        st: &mut Status,
    ) -> Result<(Vec<String>, Vec<(String, String)>, Arc<Sandbox>), Halt> {
        let image_ref = self.container.image.clone().unwrap_or_default();
        let image = match self.ctx.cfg.images.resolve(&image_ref) {
            Ok(i) => i,
            Err(msg) => {
                self.waiting(st, Reason::ErrImageNeverPull, &msg);
                self.ctx
                    .warn(&self.pod, Reason::ErrImageNeverPull, &msg)
                    .await;
                return Err(Halt::Refused);
            }
        };
        let facts = PodFacts {
            pod: &self.pod,
            pod_ip: &self.pod_ip,
            host_ip: "127.0.0.1",
        };
        let envs = match env::build(&self.ctx.client, &facts, &self.container, &image.env).await {
            Ok(e) => e,
            Err(msg) => {
                self.config_error(st, &msg).await;
                return Err(Halt::Retry);
            }
        };
        let defined: BTreeMap<&str, &str> =
            envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let ex = |v: &Option<Vec<String>>| -> Vec<String> {
            v.iter().flatten().map(|s| expand(s, &defined)).collect()
        };
        let argv = image.argv(&ex(&self.container.command), &ex(&self.container.args));
        match self.sandbox(&image, st.restarts) {
            Ok(s) => Ok((argv, envs, Arc::new(s))),
            Err(msg) => {
                self.config_error(st, &msg).await;
                Err(Halt::Retry)
            }
        }
    }

    async fn config_error(&self, st: &mut Status, msg: &str) {
        self.waiting(st, Reason::CreateContainerConfigError, msg);
        if st.warned.as_deref() != Some(msg) {
            st.warned = Some(msg.to_string());
            self.ctx
                .warn(&self.pod, Reason::CreateContainerConfigError, msg)
                .await;
        }
    }

    fn sandbox(&self, image: &super::images::Image, n: i32) -> Result<Sandbox, String> {
        let dir = self.shared.dir.join(&self.container.name);
        // The previous start's root: only empty mount points on the host's side.
        if n > 0 {
            let _ = super::sandbox::remove_tree(&dir.join(format!("rootfs-{}", n - 1)));
        }
        let rootfs = dir.join(format!("rootfs-{n}"));
        let _ = super::sandbox::remove_tree(&rootfs);
        let mounts: Vec<Mount> = self
            .mounts
            .iter()
            .map(|(c, h)| Mount {
                host: h.clone(),
                container: c.clone(),
            })
            .collect();
        Sandbox::build(
            &rootfs,
            image,
            &mounts,
            self.container.working_dir.as_deref(),
            &self.hostname(),
            self.ctx.user,
        )
        .map_err(|e| format!("preparing the container's root: {e}"))
    }

    /// Watches a running process: its exit, its probes, the pod's stop.
    async fn supervise(
        &self,
        mut proc: Proc,
        st: &Status,
        sandbox: &Arc<Sandbox>,
        envs: &Arc<Vec<(String, String)>>,
        started_at: &str,
    ) -> Exit {
        self.shared.add_group(proc.pgid);
        self.shared
            .set_running(&self.container.name, Some((sandbox.clone(), envs.clone())));
        let running = json!({"running": {"startedAt": started_at}});
        let c = self.container.clone();
        let (ptx, mut prx) = mpsc::unbounded_channel();
        let mut probes = tokio::task::JoinSet::new();
        let spawn_probe = |probes: &mut tokio::task::JoinSet<()>, kind: Kind, p: &Probe| {
            probes.spawn(probe_loop(
                kind,
                p.clone(),
                sandbox.clone(),
                envs.clone(),
                self.pod_ip.clone(),
                c.clone(),
                ptx.clone(),
            ));
        };
        let mut started = true;
        let mut ready = false;
        if self.init {
            // Init containers have no probes; they are never "ready".
        } else if let Some(p) = &c.startup_probe {
            started = false;
            spawn_probe(&mut probes, Kind::Startup, p);
        } else {
            if let Some(p) = &c.readiness_probe {
                spawn_probe(&mut probes, Kind::Readiness, p);
            }
            if let Some(p) = &c.liveness_probe {
                spawn_probe(&mut probes, Kind::Liveness, p);
            }
            ready = c.readiness_probe.is_none();
        }
        self.send(st, running.clone(), ready, started, Phase::Running);
        let mut stop = self.stop.clone();
        let exit = loop {
            tokio::select! {
                status = proc.wait() => {
                    let (code, signal) = match status {
                        Ok(s) => exit_code(&s),
                        Err(_) => (-1, None),
                    };
                    break Exit::Exited(code, signal);
                }
                Some(msg) = prx.recv() => match msg {
                    ProbeMsg::Started => {
                        started = true;
                        if let Some(p) = &c.readiness_probe {
                            spawn_probe(&mut probes, Kind::Readiness, p);
                        }
                        if let Some(p) = &c.liveness_probe {
                            spawn_probe(&mut probes, Kind::Liveness, p);
                        }
                        ready = c.readiness_probe.is_none();
                        self.send(st, running.clone(), ready, started, Phase::Running);
                    }
                    ProbeMsg::Ready(r, why) => {
                        ready = r;
                        if !r {
                            self.ctx.warn(&self.pod, Reason::Unhealthy, &format!("Readiness probe failed: {why}")).await;
                        }
                        self.send(st, running.clone(), ready, started, Phase::Running);
                    }
                    ProbeMsg::Dead(why) => {
                        probes.abort_all();
                        self.ctx.warn(&self.pod, Reason::Unhealthy, &why).await;
                        let msg = format!("Container {} failed its probe, will be restarted", c.name);
                        self.ctx.normal(&self.pod, Reason::Killing, &msg).await;
                        let grace = self.pod_grace();
                        if let Some(s) = terminate(&mut proc, grace, &mut stop).await {
                            let (code, signal) = exit_code(&s);
                            break Exit::Exited(code, signal);
                        }
                    }
                },
                got = async { stop.wait_for(|s| s.is_some()).await.map(|r| *r) } => {
                    let grace = match got {
                        Ok(Some(Stop::Grace(g))) => g,
                        _ => Duration::ZERO,
                    };
                    let status = terminate(&mut proc, grace, &mut stop).await;
                    let (code, signal) = status.as_ref().map(exit_code).unwrap_or((137, Some(9)));
                    let terminated = json!({"terminated": {
                        "exitCode": code, "signal": signal,
                        "reason": if code == 0 { "Completed" } else { "Error" },
                        "startedAt": started_at, "finishedAt": now(),
                    }});
                    self.send(st, terminated, false, false, Phase::Done(code));
                    break Exit::Stopped;
                }
            }
        };
        probes.abort_all();
        // What the container left behind dies with it, as with a container's cgroup.
        kill_group(proc.pgid);
        self.shared.remove_group(proc.pgid);
        self.shared.set_running(&self.container.name, None);
        exit
    }

    /// `spec.hostname`, else the pod's name (Kubernetes' rule).
    fn hostname(&self) -> String {
        let spec = self.pod.spec.as_ref();
        spec.and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| self.shared.name.clone())
    }

    fn pod_grace(&self) -> Duration {
        let s = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        Duration::from_secs(s.max(0) as u64)
    }
}

/// Why a container does not start now.
enum Halt {
    /// Never (its image is not mapped).
    Refused,
    /// Not yet (its configuration is not there yet): try again after the back-off.
    Retry,
}

enum Exit {
    Exited(i32, Option<i32>),
    Stopped,
}

/// SIGTERM, then SIGKILL of the whole group once `grace` has passed — or sooner, when the
/// pod's stop comes again with a shorter grace period (a forced deletion); the exit status.
async fn terminate(
    proc: &mut Proc,
    grace: Duration,
    stop: &mut watch::Receiver<Option<Stop>>,
) -> Option<std::process::ExitStatus> {
    proc.signal(libc::SIGTERM);
    let start = tokio::time::Instant::now();
    let mut deadline = start + grace;
    stop.borrow_and_update();
    loop {
        tokio::select! {
            s = proc.wait() => return s.ok(),
            _ = tokio::time::sleep_until(deadline) => {
                kill_group(proc.pgid);
                return proc.wait().await.ok();
            }
            changed = stop.changed() => {
                if changed.is_err() {
                    deadline = tokio::time::Instant::now();
                } else if let Some(Stop::Grace(g)) = *stop.borrow_and_update() {
                    deadline = deadline.min(start + g);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Policy;

    #[test]
    fn restart_policies() {
        assert!(Policy::Always.restarts(0) && Policy::Always.restarts(1));
        assert!(!Policy::OnFailure.restarts(0) && Policy::OnFailure.restarts(137));
        assert!(!Policy::Never.restarts(0) && !Policy::Never.restarts(1));
    }
}
