//! One ansible-runner invocation, as ansible-operator makes it: a private data directory
//! per custom resource (`<base>/<group>/<version>/<kind>/<namespace>/<name>/`) holding
//! `env/extravars`, `env/settings`, `inventory/hosts` and the run's `kubeconfig` (pointing at
//! the loopback [`crate::proxy`] with the run's token); ansible-runner keeps the last
//! `--rotate-artifacts` runs under `artifacts/<ident>/`, and bosun reads the job events from
//! there after the run ([`crate::events`]).
//!
//! Directories are created 0700 and files 0600. The kubeconfig, the extra vars (they hold
//! the spec) and ansible-runner's generated playbooks are removed after each run; the
//! token in the kubeconfig is revoked when the run ends either way.
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bosun_ansible::Outcome;
use serde_json::{json, Map, Value};
use tokio::io::AsyncReadExt;

use crate::engine::Installation;
use crate::events;
use crate::target::Target;

/// How many ansible-runner processes run at once in this operator, across entries: each
/// is an `ansible-playbook` process tree of about 100 MB (awx-operator measured 326 MiB
/// average at 3 concurrent runs; ansible-operator's default of one per CPU was OOM-killed on
/// large nodes). `BOSUN_ANSIBLE_MAX_RUNS`, default 4; reconciles beyond it wait.
pub const MAX_RUNS_ENV: &str = "BOSUN_ANSIBLE_MAX_RUNS";
const DEFAULT_MAX_RUNS: usize = 4;

/// The limit from the variable's value (a positive integer), else the default.
pub fn max_runs(value: Option<&str>) -> usize {
    value
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_RUNS)
}

fn slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        tokio::sync::Semaphore::new(max_runs(std::env::var(MAX_RUNS_ENV).ok().as_deref()))
    })
}

/// What one run needs.
pub struct Invocation<'a> {
    pub install: &'a Installation,
    pub target: &'a Target,
    /// The custom resource's private data directory.
    pub dir: &'a Path,
    pub extra_vars: &'a Map<String, Value>,
    /// The proxy's URL and this run's token.
    pub server: &'a str,
    pub token: &'a str,
    /// The context namespace (the CR's).
    pub namespace: Option<&'a str>,
    /// `ANSIBLE_COLLECTIONS_PATH` for the run.
    pub collections_paths: &'a [PathBuf],
    /// `ANSIBLE_ROLES_PATH` for the run (after a role target's own directory).
    pub roles_paths: &'a [PathBuf],
    /// `--rotate-artifacts` (0: keep every run).
    pub rotate: u32,
    /// ansible-runner's `job_timeout`; the process is killed shortly after.
    pub deadline: Duration,
}

/// A finished run.
#[derive(Debug)]
pub struct Finished {
    pub outcome: Outcome,
    pub ident: String,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("preparing the run directory {dir}: {source}")]
    Prepare {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("starting {runner}: {source}")]
    Spawn {
        runner: PathBuf,
        source: std::io::Error,
    },
}

fn prepare(dir: &Path) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |source| RunError::Prepare {
        dir: dir.to_path_buf(),
        source,
    }
}

/// Creates `dir` and its missing parents with mode 0700.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes `text` to `path` with mode 0600 (replacing what was there).
pub fn private_file(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text)
}

/// The run's kubeconfig: the proxy, the run's token, the CR's namespace.
pub fn kubeconfig(server: &str, token: &str, namespace: Option<&str>) -> String {
    let ctx = match namespace {
        Some(ns) => json!({"cluster": "bosun", "user": "run", "namespace": ns}),
        None => json!({"cluster": "bosun", "user": "run"}),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bosun", "cluster": {"server": server}}],
        "users": [{"name": "run", "user": {"token": token}}],
        "contexts": [{"name": "run", "context": ctx}],
        "current-context": "run",
    })
    .to_string()
}

fn ident() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = chrono::Utc::now().format("%Y%m%d%H%M%S%6f");
    format!("{t}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// The command line (after `ansible-runner`).
pub fn args(inv: &Invocation, ident: &str) -> Vec<String> {
    let mut a = vec![
        "run".to_string(),
        inv.dir.display().to_string(),
        "--rotate-artifacts".into(),
        inv.rotate.to_string(),
        "-i".into(),
        ident.to_string(),
    ];
    match inv.target {
        Target::Role { name, roles_path } => a.extend([
            "--role".into(),
            name.clone(),
            "--roles-path".into(),
            roles_path.display().to_string(),
            "--hosts".into(),
            "localhost".into(),
            "--role-skip-facts".into(),
        ]),
        Target::CollectionRole(n) => a.extend([
            "--role".into(),
            n.clone(),
            "--hosts".into(),
            "localhost".into(),
            "--role-skip-facts".into(),
        ]),
        Target::Playbook(p) => a.extend(["-p".into(), p.display().to_string()]),
    }
    a
}

/// The end of a file, at most `max` bytes, as text.
fn tail(path: &Path, max: usize) -> String {
    let b = std::fs::read(path).unwrap_or_default();
    let s = &b[b.len().saturating_sub(max)..];
    String::from_utf8_lossy(s).trim().to_string()
}

/// Runs ansible-runner once and reads what happened.
pub async fn run(inv: &Invocation<'_>) -> Result<Finished, RunError> {
    let dir = inv.dir;
    let err = prepare(dir);
    for sub in ["env", "inventory"] {
        private_dir(&dir.join(sub)).map_err(&err)?;
    }
    let vars = serde_json::to_vec(inv.extra_vars).unwrap_or_default();
    private_file(&dir.join("env/extravars"), &vars).map_err(&err)?;
    let settings = json!({"job_timeout": inv.deadline.as_secs(), "suppress_ansible_output": true});
    private_file(&dir.join("env/settings"), settings.to_string().as_bytes()).map_err(&err)?;
    private_file(
        &dir.join("inventory/hosts"),
        b"localhost ansible_connection=local ansible_python_interpreter=\"{{ ansible_playbook_python }}\"\n",
    )
    .map_err(&err)?;
    let kc = dir.join("kubeconfig");
    private_file(
        &kc,
        kubeconfig(inv.server, inv.token, inv.namespace).as_bytes(),
    )
    .map_err(&err)?;

    let id = ident();
    let mut cmd = tokio::process::Command::new(&inv.install.runner);
    cmd.args(args(inv, &id))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Only this run's credentials reach the role.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("K8S_AUTH_") {
            cmd.env_remove(&k);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![inv.install.bin_dir()];
    paths.extend(std::env::split_paths(&path));
    if let Ok(p) = std::env::join_paths(paths) {
        cmd.env("PATH", p);
    }
    if let Ok(c) = std::env::join_paths(inv.collections_paths) {
        cmd.env("ANSIBLE_COLLECTIONS_PATH", c);
    }
    if let Some(r) = crate::roles_path_env(inv.target, inv.roles_paths) {
        cmd.env("ANSIBLE_ROLES_PATH", r);
    }
    if std::env::var_os("ANSIBLE_GATHERING").is_none() {
        cmd.env("ANSIBLE_GATHERING", "explicit");
    }
    cmd.env("K8S_AUTH_KUBECONFIG", &kc)
        .env("KUBECONFIG", &kc)
        .env_remove("KUBERNETES_SERVICE_HOST");
    // The semaphore is never closed; a run goes ahead if it were.
    let _slot = slots().acquire().await.ok();
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        runner: inv.install.runner.clone(),
        source,
    })?;
    let mut stderr = String::new();
    let waited = tokio::time::timeout(inv.deadline + Duration::from_secs(30), async {
        if let Some(mut e) = child.stderr.take() {
            let mut buf = Vec::new();
            let _ = (&mut e).take(64 * 1024).read_to_end(&mut buf).await;
            stderr = String::from_utf8_lossy(&buf).trim().to_string();
        }
        child.wait().await
    })
    .await;
    let exit = match waited {
        Ok(Ok(s)) => s.to_string(),
        Ok(Err(e)) => e.to_string(),
        Err(_) => {
            let _ = child.kill().await;
            format!("killed after the deadline of {:?}", inv.deadline)
        }
    };
    let elapsed = started.elapsed();
    let artifacts = dir.join("artifacts").join(&id);
    let evs = events::read_dir(&artifacts.join("job_events")).unwrap_or_default();
    log_events(&evs);
    let outcome = events::outcome(&evs, || {
        let status = tail(&artifacts.join("status"), 64);
        let out = tail(&artifacts.join("stdout"), 2048);
        let mut msg =
            format!("ansible-runner ended without a play recap ({exit}, status {status:?})");
        for t in [out, stderr.clone()] {
            if !t.is_empty() {
                msg.push_str(": ");
                msg.push_str(&t);
            }
        }
        msg
    });
    cleanup(dir);
    Ok(Finished {
        outcome,
        ident: id,
        elapsed,
    })
}

/// What must not stay on disk after a run.
fn cleanup(dir: &Path) {
    let _ = std::fs::remove_file(dir.join("kubeconfig"));
    let _ = std::fs::remove_file(dir.join("env/extravars"));
    // ansible-runner writes a generated playbook per role run.
    if let Ok(rd) = std::fs::read_dir(dir.join("project")) {
        for e in rd.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The tasks, logged as ansible-operator logs them (task starts at debug; failures as
/// warnings with the task's file:line).
fn log_events(evs: &[events::JobEvent]) {
    for e in evs {
        match e.event.as_str() {
            "playbook_on_task_start" => {
                tracing::debug!(task = e.task(), action = e.action(), "task")
            }
            "runner_on_failed" if e.data["ignore_errors"].as_bool() != Some(true) => {
                tracing::warn!(
                    task = e.task(),
                    action = e.action(),
                    at = e.task_path(),
                    msg = e.data["res"]["msg"].as_str().unwrap_or_default(),
                    "task failed"
                )
            }
            "runner_on_ok" if e.action().ends_with("debug") => tracing::info!(
                task = e.task(),
                msg = %e.data["res"]["msg"],
                "debug"
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn concurrent_runs_are_bounded() {
        assert_eq!(max_runs(None), 4);
        assert_eq!(max_runs(Some(" 2 ")), 2);
        assert_eq!(max_runs(Some("0")), 4);
        assert_eq!(max_runs(Some("many")), 4);
    }

    #[test]
    fn private_files_and_dirs_are_owner_only() {
        let d = tempfile::tempdir().expect("dir");
        let sub = d.path().join("a/b");
        private_dir(&sub).expect("mkdir");
        let f = sub.join("kubeconfig");
        private_file(&f, b"x").expect("write");
        private_file(&f, b"y").expect("rewrite");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&sub), 0o700);
        assert_eq!(mode(&d.path().join("a")), 0o700);
        assert_eq!(mode(&f), 0o600);
        assert_eq!(std::fs::read(&f).expect("read"), b"y");
    }

    #[test]
    fn the_kubeconfig_points_at_the_proxy_with_the_run_token() {
        let k: Value = serde_json::from_str(&kubeconfig("http://127.0.0.1:9", "tok", Some("ns")))
            .expect("json is yaml");
        assert_eq!(k["clusters"][0]["cluster"]["server"], "http://127.0.0.1:9");
        assert_eq!(k["users"][0]["user"]["token"], "tok");
        assert_eq!(k["contexts"][0]["context"]["namespace"], "ns");
    }

    #[test]
    fn role_and_playbook_command_lines() {
        let install = Installation {
            runner: "/v/bin/ansible-runner".into(),
        };
        let vars = Map::new();
        let role = Target::Role {
            name: "web".into(),
            roles_path: "/r".into(),
        };
        let inv = Invocation {
            install: &install,
            target: &role,
            dir: Path::new("/d"),
            extra_vars: &vars,
            server: "",
            token: "",
            namespace: None,
            collections_paths: &[],
            roles_paths: &[],
            rotate: 20,
            deadline: Duration::from_secs(1),
        };
        assert_eq!(
            args(&inv, "7").join(" "),
            "run /d --rotate-artifacts 20 -i 7 --role web --roles-path /r --hosts localhost --role-skip-facts"
        );
        let pb = Target::Playbook("/p/site.yml".into());
        let inv = Invocation { target: &pb, ..inv };
        assert_eq!(
            args(&inv, "7").join(" "),
            "run /d --rotate-artifacts 20 -i 7 -p /p/site.yml"
        );
    }
}
