//! The scenarios and their checks (see the crate doc for the list).
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bosun_testenv::{ControlPlane, NodeAgent, NodeAgentConfig, Options as CpOptions};
use http::Method;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::operator::Process;
use crate::proxy::{Proxy, Write};
use crate::report::{check, Fault, Report};
use crate::state::{self, Collection, Snapshot};
use crate::{schema, Options, Rng, Target};

/// No write for this long (and the custom resources ready) is "converged".
const QUIET: Duration = Duration::from_secs(3);
const POLL: Duration = Duration::from_millis(250);

struct Env<'a> {
    cp: Mutex<ControlPlane>,
    admin: Client,
    target: &'a Target,
    opts: &'a Options,
    user: String,
    groups: Vec<String>,
    /// The custom resources' collections (their status is compared; others' is not).
    custom: BTreeSet<Collection>,
    /// The reference run's custom resources reported readiness (a Ready-like condition): from
    /// then on one without any is not converged yet, it is still waiting for the operator.
    reports_readiness: std::sync::atomic::AtomicBool,
    _agent: NodeAgent,
}

/// Runs every scenario against `target`.
pub async fn verify(target: &Target, opts: &Options) -> anyhow::Result<Report> {
    anyhow::ensure!(
        !target.samples.is_empty(),
        "nothing to apply: give custom resources with --cr FILE (or config/samples in a project)"
    );
    std::fs::create_dir_all(&opts.logs)?;
    say(format!(
        "verifying {} (seed {}, {} run)",
        target.name,
        opts.seed,
        if opts.quick { "quick" } else { "full" }
    ));
    let cp = ControlPlane::start(CpOptions {
        controller_manager: true,
    })
    .await?;
    let admin = cp.client().await?;
    say(format!("control plane up at {}", cp.server()));
    setup(&admin, target).await?;
    let (sa_ns, sa) = &target.service_account;
    let user = format!("system:serviceaccount:{sa_ns}:{sa}");
    let custom = target
        .crds
        .iter()
        .flat_map(|c| {
            let s = &c.spec;
            s.versions
                .iter()
                .filter(|v| v.served)
                .map(|v| {
                    (
                        format!("/apis/{}/{}", s.group, v.name),
                        s.names.plural.clone(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let env = Env {
        cp: Mutex::new(cp),
        _agent: NodeAgent::start(admin.clone(), NodeAgentConfig::default()),
        admin,
        target,
        opts,
        user,
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{sa_ns}"),
            "system:authenticated".into(),
        ],
        custom,
        reports_readiness: std::sync::atomic::AtomicBool::new(false),
    };
    let mut report = Report {
        operator: target.name.clone(),
        seed: opts.seed,
        replay: opts.replay.clone(),
        logs: Some(opts.logs.clone()),
        ..Default::default()
    };
    let rng = Rng::new(opts.seed);
    let t0 = Instant::now();
    let reference = reference(&env, &mut report).await?;
    report
        .timings
        .push(("reference".into(), t0.elapsed().as_secs_f64()));
    for &scenario in &crate::SCENARIOS[1..] {
        if !opts.wanted(scenario) {
            continue;
        }
        let t = Instant::now();
        let mut rng = rng.fork(scenario);
        say(format!("scenario {scenario}"));
        let r = match scenario {
            "crash" => crash(&env, &mut report, &reference, &mut rng).await,
            "apiserver-restart" => apiserver(&env, &mut report, &reference, &mut rng).await,
            "stale" => stale(&env, &mut report, &reference, &mut rng).await,
            "time-travel" => time_travel(&env, &mut report, &reference).await,
            "drift" => drift(&env, &mut report, &reference, &mut rng).await,
            "spec-change" => spec_change(&env, &mut report, &reference, &mut rng).await,
            "failure" => failure(&env, &mut report, &reference, &mut rng).await,
            _ => Ok(()),
        };
        if let Err(e) = r {
            // The harness itself failed (not the operator): say so as this scenario's result.
            report.record(
                scenario,
                check::CONVERGES,
                vec![format!("the scenario could not run: {e:#}")],
            );
        }
        report
            .timings
            .push((scenario.into(), t.elapsed().as_secs_f64()));
    }
    Ok(report)
}

fn say(msg: impl AsRef<str>) {
    eprintln!("\x1b[1m==>\x1b[0m {}", msg.as_ref());
}

/// CRDs served, the default StorageClass the simulated node agent binds, RBAC granted.
async fn setup(admin: &Client, target: &Target) -> anyhow::Result<()> {
    bosun_testenv::kit::install_crds(admin, target.crds.clone()).await?;
    crate::simulated_storage_class(admin).await?;
    let (ns, sa) = &target.service_account;
    bosun_testenv::kit::grant(
        admin,
        "bosun-verify-operator",
        target.rules.clone(),
        &format!("system:serviceaccount:{ns}:{sa}"),
    )
    .await?;
    Ok(())
}

/// One scenario: a namespace, a proxy, the operator process.
struct Run<'a> {
    env: &'a Env<'a>,
    scenario: &'static str,
    ns: String,
    proxy: Proxy,
    kubeconfig: PathBuf,
    log: PathBuf,
    op: Option<Process>,
    started: Instant,
    /// When the scenario began (the writes file counts from here).
    begun: Instant,
    /// The samples as applied: (resource, name).
    applied: Vec<(ApiResource, String)>,
}

impl<'a> Run<'a> {
    async fn new(env: &'a Env<'a>, scenario: &'static str) -> anyhow::Result<Run<'a>> {
        let ns = bosun_testenv::test_namespace(&env.admin, &format!("verify-{scenario}")).await?;
        let groups: Vec<&str> = env.groups.iter().map(String::as_str).collect();
        let proxy = {
            let cp = env.cp.lock().await;
            Proxy::start(&cp, &env.user, &groups).await?
        };
        let kubeconfig = env.opts.logs.join(format!("kubeconfig-{scenario}"));
        std::fs::write(&kubeconfig, proxy.kubeconfig(&ns))?;
        let log = env.opts.logs.join(format!("{scenario}.log"));
        let _ = std::fs::remove_file(&log);
        Ok(Run {
            env,
            scenario,
            ns,
            proxy,
            kubeconfig,
            log,
            op: None,
            started: Instant::now(),
            begun: Instant::now(),
            applied: Vec::new(),
        })
    }

    fn start(&mut self) -> anyhow::Result<()> {
        self.op = Some(Process::start(
            &self.env.target.command,
            &self.kubeconfig,
            &self.ns,
            &self.log,
        )?);
        self.started = Instant::now();
        Ok(())
    }

    async fn kill9(&mut self) {
        if let Some(p) = self.op.take() {
            p.kill9().await;
        }
    }

    async fn stop(&mut self) {
        if let Some(p) = self.op.take() {
            p.stop(Duration::from_secs(30)).await;
        }
    }

    /// Applies the samples (server-side, as a user would with kubectl), `replace` instead of
    /// the sample of the same kind and name.
    async fn apply(&mut self, replace: Option<&Value>) -> anyhow::Result<()> {
        let mut applied = Vec::new();
        for sample in &self.env.target.samples {
            let obj = match replace {
                Some(r) if same_object(r, sample) => r,
                _ => sample,
            };
            let (ar, name) = apply_one(&self.env.admin, &self.ns, obj).await?;
            applied.push((ar, name));
        }
        self.applied = applied;
        Ok(())
    }

    /// The custom resources among the applied samples, as they are now.
    async fn customs(&self) -> anyhow::Result<Vec<DynamicObject>> {
        let mut out = Vec::new();
        for (ar, name) in &self.applied {
            if self.is_custom(ar) {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.env.admin.clone(), &self.ns, ar);
                if let Some(o) = api.get_opt(name).await? {
                    out.push(o);
                }
            }
        }
        Ok(out)
    }

    fn is_custom(&self, ar: &ApiResource) -> bool {
        self.env
            .custom
            .contains(&(format!("/apis/{}", ar.api_version), ar.plural.clone()))
    }

    /// Waits until every custom resource reports ready for its spec (when it reports at all)
    /// and the operator has written nothing for [`QUIET`] since `since`.
    async fn converged(&mut self, since: Instant) -> Result<(), String> {
        let limit = self.env.opts.timeout;
        let t0 = Instant::now();
        loop {
            if let Some(p) = self.op.as_mut() {
                if let Some(status) = p.exited() {
                    return Err(format!(
                        "the operator exited ({status}); its log: {}",
                        self.log.display()
                    ));
                }
            }
            let customs = self.customs().await.map_err(|e| e.to_string())?;
            // A custom resource without any readiness is pending until the operator has shown
            // it is at work: an operator slow to start (a loaded machine) wrote nothing for
            // the quiet window, and its untouched objects looked converged.
            let writes = self.proxy.writes();
            let wrote = writes.iter().any(|w| w.counts());
            let reports = self
                .env
                .reports_readiness
                .load(std::sync::atomic::Ordering::Relaxed);
            // Likewise an operator that writes its custom resources (a finalizer, a status) has
            // not got to one it has not written yet: on a loaded machine it reconciled the
            // first sample, went quiet for the window while it was slow to start on the next,
            // and the reference run "converged" with the others untouched.
            let written = |o: &DynamicObject| {
                writes.iter().any(|w| {
                    (200..300).contains(&w.status)
                        && w.object.as_ref().is_some_and(|(kind, _, name)| {
                            *kind == kind_of(o) && *name == o.name_any()
                        })
                })
            };
            let writes_customs = customs.iter().any(written);
            // And one of a kind whose others report readiness has not been reconciled yet.
            let kind_reports = |o: &DynamicObject| {
                customs
                    .iter()
                    .any(|c| kind_of(c) == kind_of(o) && readiness(c).is_some())
            };
            let pending: Vec<String> = customs
                .iter()
                .filter(|o| match readiness(o) {
                    Some(ready) => !ready,
                    None => reports || !wrote || kind_reports(o) || (writes_customs && !written(o)),
                })
                .map(|o| format!("{} {}: {}", kind_of(o), o.name_any(), conditions_text(o)))
                .collect();
            let last = self
                .proxy
                .writes()
                .iter()
                .filter(|w| w.counts())
                .map(|w| w.at)
                .max()
                .unwrap_or(since)
                .max(since);
            if pending.is_empty() && last.elapsed() >= QUIET {
                return Ok(());
            }
            if t0.elapsed() > limit {
                let recent = summarize(&self.proxy.writes_since(Instant::now() - QUIET));
                let mut why = Vec::new();
                if !pending.is_empty() {
                    why.push(format!("not ready: {}", pending.join("; ")));
                }
                if !recent.is_empty() {
                    why.push(format!("still writing: {}", recent.join(", ")));
                }
                return Err(format!(
                    "not converged within {} s ({})",
                    limit.as_secs(),
                    why.join("; ")
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the crash point armed before this incarnation started is hit (the operator
    /// then frozen, its create committed and unanswered), or the operator shows it will not get
    /// there: it went quiet ([`QUIET`], nothing in flight) after its own first request, exited,
    /// or the timeout passed. Says where the operator was.
    async fn crash_point(
        &mut self,
        mut hit: tokio::sync::oneshot::Receiver<Write>,
        n: usize,
    ) -> String {
        let t0 = Instant::now();
        loop {
            match tokio::time::timeout(POLL, &mut hit).await {
                Ok(Ok(w)) => return format!("after create #{n}, {}", w.describe()),
                Ok(Err(_)) => return "disarmed".into(),
                Err(_) => {}
            }
            if let Some(status) = self.op.as_mut().and_then(|p| p.exited()) {
                return format!("after it exited ({status})");
            }
            // The quiet must be this incarnation's: the refused requests of the one killed
            // before are answered just as it starts, and a slow start sends nothing for a while.
            let started = self.started;
            let own = self.proxy.activity().0.is_some_and(|l| l > started);
            let quiet = self
                .proxy
                .quiet_since()
                .is_some_and(|q| q > started && q.elapsed() >= QUIET);
            if own && quiet {
                return format!("at rest (fewer than {n} creates since its start)");
            }
            if t0.elapsed() > self.env.opts.timeout {
                return format!(
                    "after {} s without create #{n}",
                    self.env.opts.timeout.as_secs()
                );
            }
        }
    }

    /// Waits until the pause point armed before this incarnation started is hit (the operator
    /// then paused right after its `k`-th write), or the operator shows it will not get there
    /// (as [`Run::crash_point`]: quiet after its own first request, exited, or the timeout):
    /// the fault then lands where it is, after its last write, and says so.
    async fn mid_point(
        &mut self,
        mut hit: tokio::sync::oneshot::Receiver<crate::proxy::Write>,
        k: usize,
        of: usize,
    ) -> Fault {
        let t0 = Instant::now();
        let fault = |write: Option<String>, fallback: Option<String>, after: usize| Fault {
            scenario: self.scenario.to_string(),
            after,
            wanted: k,
            of,
            write,
            fallback,
            later: 0,
        };
        loop {
            match tokio::time::timeout(POLL, &mut hit).await {
                Ok(Ok(w)) => {
                    return fault(Some(w.describe()), None, self.proxy.work_writes());
                }
                Ok(Err(_)) => {
                    return fault(None, Some("disarmed".into()), self.proxy.work_writes())
                }
                Err(_) => {}
            }
            let why = if let Some(status) = self.op.as_mut().and_then(|p| p.exited()) {
                Some(format!("the operator exited ({status})"))
            } else {
                let started = self.started;
                let own = self.proxy.activity().0.is_some_and(|l| l > started);
                let quiet = self
                    .proxy
                    .quiet_since()
                    .is_some_and(|q| q > started && q.elapsed() >= QUIET);
                if own && quiet {
                    Some("it was at rest, having written fewer times".to_string())
                } else if t0.elapsed() > self.env.opts.timeout {
                    Some(format!("{} s passed", self.env.opts.timeout.as_secs()))
                } else {
                    None
                }
            };
            if let Some(why) = why {
                // Disarmed under the lock that counts writes: none can hit it from here on.
                self.proxy.resume();
                let after = self.proxy.work_writes();
                let last = self
                    .proxy
                    .writes()
                    .iter()
                    .rev()
                    .find(|w| (200..300).contains(&w.status) && w.counts())
                    .map(|w| w.describe());
                return fault(last, Some(why), after);
            }
        }
    }

    /// When the operator first wrote at or after `since`; now, if it went quiet, exited or
    /// the timeout passed without writing.
    async fn first_write_since(&mut self, since: Instant) -> Instant {
        let t0 = Instant::now();
        loop {
            if let Some(w) = self.proxy.writes_since(since).first() {
                return w.at;
            }
            let quiet = self
                .proxy
                .quiet_since()
                .is_some_and(|q| q > since && q.elapsed() >= QUIET);
            let exited = self.op.as_mut().and_then(|p| p.exited()).is_some();
            if quiet || exited || t0.elapsed() > self.env.opts.timeout {
                return Instant::now();
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the operator has sent no request at all for 2 s (its caches synced and
    /// its first reconciles done), at least `min` after it started.
    async fn idle(&self, min: Duration) {
        let t0 = Instant::now();
        loop {
            let (last, _) = self.proxy.activity();
            let quiet = last.is_none_or(|l| l.elapsed() >= Duration::from_secs(2));
            if (self.started.elapsed() >= min && quiet && last.is_some_and(|l| l > self.started))
                || t0.elapsed() > min + Duration::from_secs(20)
            {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn snapshot(&self, kinds: &BTreeSet<Collection>) -> anyhow::Result<Snapshot> {
        let mut kinds = kinds.clone();
        kinds.extend(state::kinds_written(&self.proxy.writes()));
        for (ar, _) in &self.applied {
            if self.is_custom(ar) {
                kinds.insert((format!("/apis/{}", ar.api_version), ar.plural.clone()));
            }
        }
        state::snapshot(&self.env.admin, &self.ns, &kinds, &self.env.custom).await
    }

    /// The objects the operator created in this namespace (its children), custom resources
    /// left out: (collection, name).
    fn created(&self) -> Vec<(Collection, String)> {
        let mut out = Vec::new();
        for w in self.proxy.writes() {
            if !w.created() || !w.counts() {
                continue;
            }
            let (Some((c, true)), Some((_, ns, name))) = (state::collection_of(&w.path), &w.object)
            else {
                continue;
            };
            if *ns != self.ns || c.1 == "events" || self.env.custom.contains(&c) {
                continue;
            }
            let item = (c, name.clone());
            if !out.contains(&item) {
                out.push(item);
            }
        }
        out
    }

    async fn get_raw(&self, c: &Collection, name: &str) -> Option<Value> {
        let url = format!("{}/namespaces/{}/{}/{name}", c.0, self.ns, c.1);
        let req = http::Request::get(&url).body(Vec::new()).ok()?;
        self.env.admin.request::<Value>(req).await.ok()
    }

    /// Children the operator created that no owner reference ties to a parent.
    async fn unowned(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (c, name) in self.created() {
            if let Some(o) = self.get_raw(&c, &name).await {
                let owned = o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty());
                if !owned {
                    out.push(format!(
                        "{}/{name}: created by the operator with no owner reference (it outlives its parent)",
                        c.1
                    ));
                }
            }
        }
        out
    }

    /// No Secret value of the namespace appears in the operator's log.
    async fn secret_log(&self, report: &mut Report) {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.env.admin.clone(), &self.ns);
        let Ok(list) = secrets.list(&Default::default()).await else {
            report.skip(self.scenario, check::SECRET_LOG, "could not list Secrets");
            return;
        };
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut values = 0;
        let mut problems = Vec::new();
        for s in &list.items {
            for (k, v) in s.data.iter().flatten() {
                let Ok(text) = std::str::from_utf8(&v.0) else {
                    continue;
                };
                // Short values ("true", a port) would match by chance.
                if text.len() < 8 {
                    continue;
                }
                values += 1;
                let b64 = base64(text.as_bytes());
                if log.contains(text) || log.contains(&b64) {
                    // The value itself stays out of the report: it is a secret.
                    problems.push(format!(
                        "the value of Secret {} key {k} appears in the operator's log ({})",
                        s.name_any(),
                        self.log.display()
                    ));
                }
            }
        }
        if values == 0 {
            report.skip(
                self.scenario,
                check::SECRET_LOG,
                "no Secret value in the namespace",
            );
        } else {
            report.record(self.scenario, check::SECRET_LOG, problems);
        }
    }

    /// Ends the scenario: the operator killed, its writes listed beside its log, the
    /// namespace deleted (not waited for).
    async fn finish(mut self) {
        self.kill9().await;
        // Writes elsewhere escape the scenario's namespace and its checks (and meet the
        // other scenarios' objects there): say so, naming where.
        let elsewhere: BTreeSet<String> = self
            .proxy
            .writes()
            .iter()
            .filter(|w| w.counts())
            .filter_map(|w| crate::proxy::namespace_of(&w.path).map(str::to_string))
            .filter(|ns| *ns != self.ns)
            .collect();
        if !elsewhere.is_empty() {
            say(format!(
                "  warning: the operator wrote in namespace(s) {} besides the scenario's ({}): the checks cover the scenario's only (does a sample name a namespace?)",
                elsewhere.into_iter().collect::<Vec<_>>().join(", "),
                self.ns
            ));
        }
        let lines: Vec<String> = self
            .proxy
            .writes()
            .iter()
            .map(|w| {
                format!(
                    "{:>8.3} s  {:<6} {} {}",
                    w.at.saturating_duration_since(self.begun).as_secs_f64(),
                    w.method.as_str(),
                    w.status,
                    w.path
                )
            })
            .collect();
        let _ = std::fs::write(
            self.env
                .opts
                .logs
                .join(format!("{}-writes.txt", self.scenario)),
            lines.join("\n") + "\n",
        );
        for o in self.customs().await.unwrap_or_default() {
            clear_finalizers(&self.env.admin, &self.ns, &o).await;
        }
        let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(self.env.admin.clone())
            .delete(&self.ns, &DeleteParams::background())
            .await;
    }
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn same_object(a: &Value, b: &Value) -> bool {
    a["kind"] == b["kind"]
        && a["apiVersion"] == b["apiVersion"]
        && a["metadata"]["name"] == b["metadata"]["name"]
}

async fn apply_one(admin: &Client, ns: &str, obj: &Value) -> anyhow::Result<(ApiResource, String)> {
    let api_version = obj["apiVersion"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("a sample without apiVersion"))?;
    let kind = obj["kind"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("a sample without kind"))?;
    let name = obj["metadata"]["name"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("sample {kind}: metadata.name is required"))?
        .to_string();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (ar, _) = kube::discovery::pinned_kind(admin, &GroupVersionKind::gvk(group, version, kind))
        .await
        .map_err(|e| anyhow::anyhow!("sample {kind} {name}: kind not served ({e})"))?;
    let mut obj: DynamicObject = serde_json::from_value(obj.clone())?;
    obj.metadata.namespace = Some(ns.to_string());
    Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &ar)
        .patch(
            &name,
            &PatchParams::apply("bosun-verify").force(),
            &Patch::Apply(&obj),
        )
        .await
        .map_err(|e| anyhow::anyhow!("applying sample {kind} {name}: {e}"))?;
    Ok((ar, name))
}

async fn clear_finalizers(admin: &Client, ns: &str, o: &DynamicObject) {
    let Some(types) = &o.types else { return };
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", &types.api_version));
    let Ok((ar, _)) =
        kube::discovery::pinned_kind(admin, &GroupVersionKind::gvk(group, version, &types.kind))
            .await
    else {
        return;
    };
    let _ = Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &ar)
        .patch(
            &o.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
}

fn kind_of(o: &DynamicObject) -> String {
    o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default()
}

/// The condition types operators report readiness with: bosun's and controller-runtime's
/// (Ready), operator-sdk's Helm (Deployed) and Ansible (Successful) flavours.
const READY_TYPES: &[&str] = &["Ready", "Deployed", "Successful", "Available"];

/// Some(true) when a readiness condition is True for the current generation, Some(false)
/// when one is there but not (yet) true, None when the resource reports none.
fn readiness(o: &DynamicObject) -> Option<bool> {
    let st = &o.data["status"];
    let cs = st["conditions"].as_array()?;
    let ready: Vec<&Value> = cs
        .iter()
        .filter(|c| READY_TYPES.contains(&c["type"].as_str().unwrap_or("")))
        .collect();
    if ready.is_empty() {
        // operator-sdk's Ansible flavour says Running (True) while its playbook runs and adds
        // Successful only at the end: a run in progress is not converged.
        let running = cs.iter().any(|c| {
            ["Running", "Progressing"].contains(&c["type"].as_str().unwrap_or(""))
                && c["status"] == "True"
        });
        return running.then_some(false);
    }
    let current = st["observedGeneration"]
        .as_i64()
        .is_none_or(|g| Some(g) == o.metadata.generation);
    Some(current && ready.iter().all(|c| c["status"] == "True"))
}

/// A condition that says a reconcile failed.
fn shows_failure(o: &DynamicObject) -> bool {
    o.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            let t = c["type"].as_str().unwrap_or("").to_ascii_lowercase();
            let bad_type = ["fail", "error", "degraded", "irreconcilable"]
                .iter()
                .any(|w| t.contains(w));
            (bad_type && c["status"] == "True")
                || (READY_TYPES.iter().any(|r| r.eq_ignore_ascii_case(&t))
                    && c["status"] == "False")
        })
}

fn conditions_text(o: &DynamicObject) -> String {
    let cs: Vec<String> = o.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} {}",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .collect();
    if cs.is_empty() {
        "no conditions".into()
    } else {
        cs.join(", ")
    }
}

/// "3× PATCH bookstores/x/status" lines, most frequent first.
fn summarize(writes: &[Write]) -> Vec<String> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for w in writes {
        let what = match (&w.object, w.path.ends_with("/status")) {
            (Some((kind, _, name)), true) => format!("{} {kind}/{name} status", w.method),
            (Some((kind, _, name)), false) => format!("{} {kind}/{name}", w.method),
            (None, _) => format!("{} {}", w.method, w.path),
        };
        *counts.entry(what).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v.into_iter()
        .take(5)
        .map(|(w, n)| format!("{n}× {w}"))
        .collect()
}

/// What the fault-free run leaves: its end state and the kinds the operator wrote.
struct Reference {
    snap: Snapshot,
    kinds: BTreeSet<Collection>,
    converged: bool,
    /// The children it created (the crash scenario's kill points are among their creates).
    creates: usize,
    /// The writes of its work until it converged (the mid-convergence faults land after one
    /// of them).
    writes: usize,
}

/// The converges and children checks of a scenario against the reference.
async fn compare(
    run: &mut Run<'_>,
    report: &mut Report,
    reference: &Reference,
    converged: Result<(), String>,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let mut d = state::diff(&reference.snap, &run.snapshot(&reference.kinds).await?);
    // A repair that comes late is still a repair: the state is polled until it is the
    // reference's or the time is up (an operator may back off for seconds after an error).
    if converged.is_ok() && reference.converged {
        while !d.is_empty() && t0.elapsed() < run.env.opts.timeout {
            tokio::time::sleep(Duration::from_secs(1)).await;
            d = state::diff(&reference.snap, &run.snapshot(&reference.kinds).await?);
        }
    }
    let mut conv = Vec::new();
    if let Err(e) = converged {
        conv.push(e);
    }
    if reference.converged {
        conv.extend(
            d.content
                .iter()
                .map(|c| format!("differs from the reference: {c}")),
        );
    }
    report.record(run.scenario, check::CONVERGES, conv);
    let mut children: Vec<String> = d.counts.clone();
    children.extend(run.unowned().await);
    report.record(run.scenario, check::CHILDREN, children);
    Ok(())
}

async fn reference(env: &Env<'_>, report: &mut Report) -> anyhow::Result<Reference> {
    say("scenario reference (no fault)");
    let mut run = Run::new(env, "reference").await?;
    run.start()?;
    run.apply(None).await?;
    let converged = run.converged(run.started).await;
    let ok = converged.is_ok();
    if ok {
        let reports = run.customs().await?.iter().any(|o| readiness(o).is_some());
        env.reports_readiness
            .store(reports, std::sync::atomic::Ordering::Relaxed);
    }
    report.record(
        "reference",
        check::CONVERGES,
        converged.err().into_iter().collect(),
    );
    let kinds = state::kinds_written(&run.proxy.writes());
    let snap = run.snapshot(&kinds).await?;
    let creates = run.created().len();
    let writes = run.proxy.work_writes();
    report.record("reference", check::CHILDREN, run.unowned().await);

    // At rest: nothing written for the whole window.
    let t = Instant::now();
    tokio::time::sleep(env.opts.rest).await;
    let rest = run.proxy.writes_since(t);
    report.record(
        "reference",
        check::REST_WRITES,
        if rest.is_empty() {
            vec![]
        } else {
            vec![format!(
                "{} writes in {} s at rest: {}",
                rest.len(),
                env.opts.rest.as_secs(),
                summarize(&rest).join(", ")
            )]
        },
    );

    // A restart over the converged objects: nothing to write.
    run.stop().await;
    let t = Instant::now();
    run.start()?;
    run.idle(Duration::from_secs(if env.opts.quick { 5 } else { 15 }))
        .await;
    let restart = run.proxy.writes_since(t);
    report.record(
        "reference",
        check::RESTART_WRITES,
        if restart.is_empty() {
            vec![]
        } else {
            vec![format!(
                "{} writes after a restart over converged objects: {}",
                restart.len(),
                summarize(&restart).join(", ")
            )]
        },
    );
    run.secret_log(report).await;
    delete(&mut run, report).await?;
    run.finish().await;
    Ok(Reference {
        snap,
        kinds,
        converged: ok,
        creates,
        writes,
    })
}

/// Deletes the custom resources: their finalizers must clear, and no child may outlive them.
/// Reported as the scenario `delete` (of the reference run's objects).
async fn delete(run: &mut Run<'_>, report: &mut Report) -> anyhow::Result<()> {
    let children = run.created();
    let limit = Duration::from_secs(if run.env.opts.quick { 30 } else { 60 });
    for (ar, name) in run.applied.clone() {
        if run.is_custom(&ar) {
            let api: Api<DynamicObject> = Api::namespaced_with(run.env.admin.clone(), &run.ns, &ar);
            let _ = api.delete(&name, &DeleteParams::background()).await;
        }
    }
    let t0 = Instant::now();
    let mut left = run.customs().await?;
    while !left.is_empty() && t0.elapsed() < limit {
        tokio::time::sleep(POLL).await;
        left = run.customs().await?;
    }
    let stuck: Vec<String> = left
        .iter()
        .map(|o| {
            format!(
                "{} {} still there {} s after its delete, finalizers {:?}",
                kind_of(o),
                o.name_any(),
                limit.as_secs(),
                o.finalizers()
            )
        })
        .collect();
    report.record("delete", check::FINALIZERS, stuck);
    for o in &left {
        clear_finalizers(&run.env.admin, &run.ns, o).await;
    }
    // Garbage collection removes what owner references tie to the deleted parents.
    let t0 = Instant::now();
    let mut survivors = Vec::new();
    loop {
        survivors.clear();
        for (c, name) in &children {
            if let Some(o) = run.get_raw(c, name).await {
                if o["metadata"]["deletionTimestamp"].is_null() {
                    survivors.push(format!(
                        "{}/{name} survived the deletion of its parent",
                        c.1
                    ));
                }
            }
        }
        if survivors.is_empty() || t0.elapsed() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    report.record("delete", check::CHILDREN, survivors);
    Ok(())
}

async fn crash(
    env: &Env<'_>,
    report: &mut Report,
    reference: &Reference,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let kills = if env.opts.quick { 3 } else { 10 };
    let creates = reference.creates.max(1) as u64;
    let mut run = Run::new(env, "crash").await?;
    let mut points = Vec::new();
    // Each kill lands right after a create of the operator is committed, before it has the
    // answer (so before it can record the child anywhere): the window a create that is not
    // idempotent needs, found by the proxy, not by a sleep that a loaded machine's slow
    // operator outlasts or undershoots. Which of its creates is seeded.
    for i in 0..kills {
        let n = rng.range(1, creates + 1) as usize;
        let hit = run.proxy.crash_after(n);
        run.start()?;
        if i == 0 {
            run.apply(None).await?;
        }
        let point = run.crash_point(hit, n).await;
        run.kill9().await;
        run.proxy.thaw();
        points.push(point);
    }
    run.start()?;
    say(format!("  {kills} kill -9: {}", points.join("; ")));
    let since = Instant::now();
    let converged = run.converged(since).await;
    compare(&mut run, report, reference, converged).await?;
    run.secret_log(report).await;
    run.finish().await;
    Ok(())
}

/// Where a mid-convergence fault lands: after the operator's k-th write of its work, k seeded
/// in 1..N-1 for the N writes of the fault-free run (after the last one it has converged, and
/// the fault would test nothing mid-way).
fn mid_write(rng: &mut Rng, reference_writes: usize) -> usize {
    rng.range(1, reference_writes.max(2) as u64) as usize
}

/// The API server killed and started again mid-convergence: right after the operator's k-th
/// write is committed, the operator paused (the write's answer held) until the API server is
/// down, so that what it sends next meets the outage whatever the load or its start time.
async fn apiserver(
    env: &Env<'_>,
    report: &mut Report,
    reference: &Reference,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let k = mid_write(rng, reference.writes);
    let mut run = Run::new(env, "apiserver-restart").await?;
    let hit = run.proxy.pause_after(k);
    run.start()?;
    let applied = run.apply(None).await;
    if let Err(e) = applied {
        run.proxy.resume();
        return Err(e);
    }
    let mut fault = run.mid_point(hit, k, reference.writes).await;
    let down = Duration::from_secs(if env.opts.quick { 3 } else { 10 });
    let restarted = {
        let mut cp = env.cp.lock().await;
        let addr = cp
            .server()
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let restart = cp.restart("kube-apiserver", down);
        let resume = async {
            // The operator goes on once the API server no longer answers.
            let t0 = Instant::now();
            while tokio::net::TcpStream::connect(&addr).await.is_ok()
                && t0.elapsed() < Duration::from_secs(30)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            run.proxy.resume();
        };
        tokio::join!(restart, resume).0
    };
    run.proxy.resume();
    restarted?;
    say(format!("  API server restarted {}", fault.point()));
    let since = Instant::now();
    let converged = run.converged(since).await;
    fault.later = run.proxy.work_writes().saturating_sub(fault.after);
    report.faults.push(fault);
    compare(&mut run, report, reference, converged).await?;
    run.secret_log(report).await;
    run.finish().await;
    Ok(())
}

/// The children to drift or delete: Secrets only when there is nothing else (an operator's
/// Secret is often its storage, such as Helm's release records, which it does not recreate).
fn workload_first(children: Vec<(Collection, String)>) -> Vec<(Collection, String)> {
    let workload: Vec<_> = children
        .iter()
        .filter(|(c, _)| c.1 != "secrets")
        .cloned()
        .collect();
    if workload.is_empty() {
        children
    } else {
        workload
    }
}

/// The kinds of the operator's children (what it wrote that is not a custom resource).
fn child_plurals(env: &Env<'_>, reference: &Reference) -> Vec<String> {
    reference
        .kinds
        .iter()
        .filter(|c| !env.custom.contains(c))
        .map(|c| c.1.clone())
        .collect()
}

async fn stale(
    env: &Env<'_>,
    report: &mut Report,
    reference: &Reference,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let plurals = child_plurals(env, reference);
    if plurals.is_empty() {
        report.skip(
            "stale",
            check::CONVERGES,
            "the operator wrote no children in the reference run",
        );
        return Ok(());
    }
    let hold = Duration::from_secs(if env.opts.quick { 6 } else { 15 });
    let mut run = Run::new(env, "stale").await?;
    run.start()?;
    // The operator's first view is fresh (it lists), then goes stale while it converges: the
    // hold starts once it watches every child kind (a loaded machine may start it late; a
    // fixed wait then held its list's watch before it had acted, and nothing was stale), and a
    // seeded moment after that. An operator that never watches a kind is held after the bound.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && !plurals.iter().all(|p| run.proxy.watches(p)) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(rng.range(500, 1500))).await;
    for p in &plurals {
        run.proxy.perturb.stale(p, true);
    }
    // The window opens with the operator's first write on the held view (its first act on
    // the stale view), not at the apply: a loaded machine's operator may take seconds to get
    // there, and a window that closed meanwhile tested nothing. It may act on the first sample
    // while the others are still being applied.
    let applied = Instant::now();
    run.apply(None).await?;
    let first = run.first_write_since(applied).await;
    say(format!(
        "  watch events of {} held for {} s from its first write ({:.1} s after the apply)",
        plurals.join(", "),
        hold.as_secs(),
        first.saturating_duration_since(applied).as_secs_f64()
    ));
    tokio::time::sleep_until((first + hold).into()).await;
    for p in &plurals {
        run.proxy.perturb.stale(p, false);
    }
    let since = Instant::now();
    let converged = run.converged(since).await;
    compare(&mut run, report, reference, converged).await?;
    run.secret_log(report).await;
    run.finish().await;
    Ok(())
}

/// Sieve's time travel. The samples converge; the custom resources are deleted (each as the
/// DELETE left it: being deleted, its finalizers pending, or gone) and, once gone (and the
/// claims they left deleted), applied again and converged. Then the operator is restarted and its first read of their kind is
/// the view of the delete, with their watch events held back: the old objects being deleted,
/// while their namesakes live. An operator that acts on that view destructively (its cleanup
/// deletes the new objects' children by name, a finalizer is removed without a precondition)
/// fails `old-view`; all of them must then converge to the reference.
async fn time_travel(
    env: &Env<'_>,
    report: &mut Report,
    reference: &Reference,
) -> anyhow::Result<()> {
    const S: &str = "time-travel";
    let hold = Duration::from_secs(if env.opts.quick { 6 } else { 15 });
    let limit = Duration::from_secs(if env.opts.quick { 30 } else { 60 });
    let mut run = Run::new(env, S).await?;
    run.start()?;
    run.apply(None).await?;
    if let Err(e) = run.converged(run.started).await {
        report.record(S, check::CONVERGES, vec![format!("before the delete: {e}")]);
        run.finish().await;
        return Ok(());
    }
    let children = run.created();
    // The view of the delete, per kind: (resource, objects, the latest resourceVersion).
    let mut views: Vec<(ApiResource, Vec<Value>, u64)> = Vec::new();
    for (ar, name) in run.applied.clone() {
        if !run.is_custom(&ar) {
            continue;
        }
        let url = format!(
            "{}/namespaces/{}/{}/{name}",
            api_root(&ar.api_version),
            run.ns,
            ar.plural
        );
        let before = env
            .admin
            .request::<Value>(http::Request::get(&url).body(Vec::new())?)
            .await?;
        let answer = env
            .admin
            .request::<Value>(http::Request::delete(&url).body(Vec::new())?)
            .await?;
        // An object with finalizers comes back being deleted; one deleted at once as a
        // Status, or as it was.
        let old = if answer["metadata"]["uid"].is_string() {
            answer
        } else {
            before
        };
        let rv = old["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        match views.iter_mut().find(|(a, _, _)| a.plural == ar.plural) {
            Some(v) => {
                v.1.push(old);
                v.2 = v.2.max(rv);
            }
            None => views.push((ar.clone(), vec![old], rv)),
        }
    }
    // Gone (their finalizers cleared: the delete scenario judges that), children collected.
    let t0 = Instant::now();
    while !run.customs().await?.is_empty() && t0.elapsed() < limit {
        tokio::time::sleep(POLL).await;
    }
    for o in run.customs().await? {
        clear_finalizers(&env.admin, &run.ns, &o).await;
    }
    let t0 = Instant::now();
    loop {
        let mut left = 0;
        for (c, name) in &children {
            left += usize::from(run.get_raw(c, name).await.is_some());
        }
        if left == 0 || t0.elapsed() > limit {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    // What a delete keeps on purpose (volume claims: data) is the old objects'; their
    // namesakes start afresh, as a user who deletes and recreates would want (a careful
    // operator refuses to adopt another owner's data).
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(env.admin.clone(), &run.ns);
    let _ = claims
        .delete_collection(&DeleteParams::background(), &Default::default())
        .await;
    let t0 = Instant::now();
    while t0.elapsed() < limit
        && !claims
            .list_metadata(&Default::default())
            .await
            .map(|l| l.items.is_empty())
            .unwrap_or(true)
    {
        tokio::time::sleep(POLL).await;
    }
    run.apply(None).await?;
    if let Err(e) = run.converged(Instant::now()).await {
        report.record(
            S,
            check::CONVERGES,
            vec![format!("applied again after the delete: {e}")],
        );
        run.finish().await;
        return Ok(());
    }
    run.stop().await;
    let mut plurals = Vec::new();
    for (ar, items, rv) in &views {
        run.proxy.old_view(
            &ar.plural,
            &ar.api_version,
            &ar.kind,
            &rv.to_string(),
            items.clone(),
        );
        run.proxy.perturb.stale(&ar.plural, true);
        plurals.push(ar.plural.clone());
    }
    let t = Instant::now();
    run.start()?;
    // The window opens when the operator has read the old view (a loaded machine may start it
    // seconds late: a window from its start then closed before it read anything) and lasts
    // until it has had `hold` to act on it and has gone quiet.
    let t0 = Instant::now();
    loop {
        let started = run.started;
        let own = run.proxy.activity().0.is_some_and(|l| l > started);
        let quiet = run
            .proxy
            .quiet_since()
            .is_some_and(|q| q > started && q.elapsed() >= QUIET);
        let exited = run.op.as_mut().and_then(|p| p.exited()).is_some();
        if run.proxy.old_views_pending() == 0
            || (own && quiet)
            || exited
            || t0.elapsed() > env.opts.timeout
        {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let read = run.proxy.old_view_served().filter(|s| *s >= t);
    let from = read.unwrap_or_else(Instant::now);
    say(format!(
        "  restarted on the view of the delete of its {} ({}), held for {} s from then and until it is quiet",
        plurals.join(", "),
        match read {
            Some(r) => format!("read {:.1} s after its start", (r - t).as_secs_f64()),
            None => "not read".into(),
        },
        hold.as_secs()
    ));
    loop {
        let quiet = run
            .proxy
            .quiet_since()
            .is_some_and(|q| q.elapsed() >= QUIET);
        let exited = run.op.as_mut().and_then(|p| p.exited()).is_some();
        if (from.elapsed() >= hold && quiet) || exited || from.elapsed() >= hold + env.opts.timeout
        {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    for p in &plurals {
        run.proxy.perturb.stale(p, false);
    }
    let released = Instant::now();
    let served = run.proxy.old_views_pending() < views.len();
    let acted: Vec<Write> = run
        .proxy
        .writes_since(t)
        .into_iter()
        .filter(|w| w.at <= released && (200..300).contains(&w.status))
        .filter(|w| {
            w.method == Method::DELETE
                || state::collection_of(&w.path)
                    .is_some_and(|(c, _)| env.custom.contains(&c) && !w.path.ends_with("/status"))
        })
        .collect();
    if !served {
        report.skip(
            S,
            check::OLD_VIEW,
            "the operator read its custom resources in no way the old view can answer (a LIST, or a watch from nothing, in JSON)",
        );
    } else {
        let mut seen: Vec<(String, usize)> = Vec::new();
        for w in &acted {
            let d = w.describe();
            match seen.iter_mut().find(|(s, _)| *s == d) {
                Some(e) => e.1 += 1,
                None => seen.push((d, 1)),
            }
        }
        report.record(
            S,
            check::OLD_VIEW,
            seen.iter()
                .map(|(d, n)| {
                    format!(
                        "{n}× {d} while served the view of before the delete: it acted on objects that were gone"
                    )
                })
                .collect(),
        );
    }
    let converged = run.converged(released).await;
    compare(&mut run, report, reference, converged).await?;
    run.secret_log(report).await;
    run.finish().await;
    Ok(())
}

/// `/api/v1` or `/apis/<group>/<version>`.
fn api_root(api_version: &str) -> String {
    if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    }
}

/// A leaf of `o` to change behind the operator's back, the way people do: replicas scaled,
/// a data value edited, a label changed. The merge patch and what it does.
fn drift_edit(o: &Value) -> Option<(Value, String)> {
    if let Some(r) = o["spec"]["replicas"].as_i64() {
        return Some((
            json!({"spec": {"replicas": r + 1}}),
            format!("spec.replicas {r} → {}", r + 1),
        ));
    }
    if let Some((k, _)) = o["data"].as_object().and_then(|d| d.iter().next()) {
        let field = if o["kind"] == "Secret" {
            "stringData"
        } else {
            "data"
        };
        return Some((
            json!({field: {k: "edited-by-bosun-verify"}}),
            format!("data.{k} edited"),
        ));
    }
    if let Some((k, v)) = o["metadata"]["labels"]
        .as_object()
        .and_then(|d| d.iter().next())
    {
        return Some((
            json!({"metadata": {"labels": {k: "edited-by-bosun-verify"}}}),
            format!("label {k}={} edited", v.as_str().unwrap_or("")),
        ));
    }
    None
}

async fn drift(
    env: &Env<'_>,
    report: &mut Report,
    reference: &Reference,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let mut run = Run::new(env, "drift").await?;
    run.start()?;
    run.apply(None).await?;
    let converged = run.converged(run.started).await;
    if let Err(e) = converged {
        report.record(
            "drift",
            check::CONVERGES,
            vec![format!("before any drift: {e}")],
        );
        run.finish().await;
        return Ok(());
    }
    let children = workload_first(run.created());
    if children.is_empty() {
        report.skip(
            "drift",
            check::CONVERGES,
            "the operator created no children",
        );
        run.finish().await;
        return Ok(());
    }
    let i = rng.range(0, children.len() as u64) as usize;
    let mut done = Vec::new();
    let (c, name) = &children[i];
    if let Some(o) = run.get_raw(c, name).await {
        if let Some((patch, what)) = drift_edit(&o) {
            let url = format!(
                "{}/namespaces/{}/{}/{name}?fieldManager=bosun-verify-drift",
                c.0, run.ns, c.1
            );
            let req = http::Request::patch(&url)
                .header("content-type", "application/merge-patch+json")
                .body(serde_json::to_vec(&patch)?)?;
            env.admin.request::<Value>(req).await?;
            done.push(format!("{}/{name}: {what}", c.1));
        }
    }
    let j = if children.len() > 1 {
        (i + 1) % children.len()
    } else {
        i
    };
    let (c, name) = &children[j];
    let url = format!("{}/namespaces/{}/{}/{name}", c.0, run.ns, c.1);
    let req = http::Request::delete(&url).body(Vec::new())?;
    if env.admin.request::<Value>(req).await.is_ok() {
        done.push(format!("{}/{name} deleted", c.1));
    }
    say(format!("  behind the operator's back: {}", done.join(", ")));
    let since = Instant::now();
    let converged = run.converged(since).await;
    compare(&mut run, report, reference, converged).await?;
    run.secret_log(report).await;
    run.finish().await;
    Ok(())
}

async fn spec_change(
    env: &Env<'_>,
    report: &mut Report,
    first: &Reference,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let Some((changed, what)) = env.target.samples.iter().find_map(|s| {
        let crd = env.target.crds.iter().find(|c| {
            c.spec.names.kind == s["kind"].as_str().unwrap_or("")
                && s["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with(&format!("{}/", c.spec.group)))
        })?;
        let version = s["apiVersion"].as_str()?.rsplit('/').next()?;
        let schema = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == version)?
            .schema
            .as_ref()?
            .open_api_v3_schema
            .as_ref()?;
        let schema = serde_json::to_value(schema).ok()?;
        let (out, what) = schema::mutate(&schema, s, rng)?;
        Some((
            out,
            format!(
                "{} {}: {what}",
                s["kind"].as_str().unwrap_or(""),
                s["metadata"]["name"].as_str().unwrap_or("")
            ),
        ))
    }) else {
        report.skip(
            "spec-change",
            check::CONVERGES,
            "no field of the samples can get another value the schema allows (see the rules in crates/verify/src/schema.rs)",
        );
        return Ok(());
    };
    say(format!("  second spec: {what}"));
    let k = mid_write(rng, first.writes);
    // The changed spec applied mid-convergence (right after the operator's k-th write, the
    // operator paused until it is applied), and, beside it, once the first has converged:
    // the operator must end where that fault-free run ends (the same history: an operator
    // that records revisions, as Helm's, has two in both).
    let mid = async {
        let mut run = Run::new(env, "spec-change").await?;
        let hit = run.proxy.pause_after(k);
        run.start()?;
        let applied = run.apply(None).await;
        let fault = match applied {
            Ok(()) => {
                let fault = run.mid_point(hit, k, first.writes).await;
                let second = run.apply(Some(&changed)).await;
                run.proxy.resume();
                second.map(|()| fault)
            }
            Err(e) => Err(e),
        };
        run.proxy.resume();
        let mut fault = fault?;
        say(format!("  second spec applied {}", fault.point()));
        let since = Instant::now();
        let c = run.converged(since).await;
        fault.later = run.proxy.work_writes().saturating_sub(fault.after);
        anyhow::Ok((run, c, fault))
    };
    let direct = async {
        let mut run = Run::new(env, "spec-change-reference").await?;
        run.start()?;
        run.apply(None).await?;
        let first = run.converged(run.started).await;
        run.apply(Some(&changed)).await?;
        let since = Instant::now();
        let c = run.converged(since).await;
        anyhow::Ok((run, first.and(c)))
    };
    let (mid, direct) = tokio::join!(mid, direct);
    let (mut run, converged, fault) = mid?;
    report.faults.push(fault);
    let (direct, direct_converged) = direct?;
    let kinds = state::kinds_written(&direct.proxy.writes());
    let reference = Reference {
        snap: direct.snapshot(&kinds).await?,
        creates: direct.created().len(),
        writes: direct.proxy.work_writes(),
        kinds,
        converged: direct_converged.is_ok(),
    };
    let converged = converged.map_err(|e| format!("{e} (second spec: {what})"));
    compare(&mut run, report, &reference, converged).await?;
    run.secret_log(report).await;
    run.finish().await;
    direct.finish().await;
    Ok(())
}

async fn failure(
    env: &Env<'_>,
    report: &mut Report,
    reference: &Reference,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let plurals = child_plurals(env, reference);
    let mut run = Run::new(env, "failure").await?;
    run.start()?;
    run.apply(None).await?;
    if let Err(e) = run.converged(run.started).await {
        report.skip(
            "failure",
            check::FAILURE_STATUS,
            format!("never converged before the fault: {e}"),
        );
        run.finish().await;
        return Ok(());
    }
    let children = workload_first(run.created());
    if children.is_empty() || plurals.is_empty() {
        report.skip(
            "failure",
            check::FAILURE_STATUS,
            "the operator created no children",
        );
        run.finish().await;
        return Ok(());
    }
    for p in &plurals {
        for m in [Method::POST, Method::PUT, Method::PATCH] {
            run.proxy.perturb.fail(m, p);
        }
    }
    let (c, name) = &children[rng.range(0, children.len() as u64) as usize];
    let url = format!("{}/namespaces/{}/{}/{name}", c.0, run.ns, c.1);
    env.admin
        .request::<Value>(http::Request::delete(&url).body(Vec::new())?)
        .await?;
    say(format!(
        "  {}/{name} deleted; the operator's writes of {} refused",
        c.1,
        plurals.join(", ")
    ));
    let t = Instant::now();
    let limit = Duration::from_secs(if env.opts.quick { 30 } else { 60 });
    let mut shown = false;
    while t.elapsed() < limit {
        if run.customs().await?.iter().any(shows_failure) {
            shown = true;
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let refused: Vec<Write> = run
        .proxy
        .writes_since(t)
        .into_iter()
        .filter(|w| w.status >= 400)
        .collect();
    if refused.is_empty() {
        report.skip(
            "failure",
            check::FAILURE_STATUS,
            format!(
                "the operator tried no write in {} s after its child was deleted (see drift)",
                limit.as_secs()
            ),
        );
    } else if shown {
        report.record("failure", check::FAILURE_STATUS, vec![]);
    } else {
        let now: Vec<String> = run
            .customs()
            .await?
            .iter()
            .map(|o| format!("{} {}: {}", kind_of(o), o.name_any(), conditions_text(o)))
            .collect();
        report.record(
            "failure",
            check::FAILURE_STATUS,
            vec![format!(
                "{} of its writes refused ({}) and after {} s no condition says so: {}",
                refused.len(),
                summarize(&refused).join(", "),
                limit.as_secs(),
                now.join("; ")
            )],
        );
    }
    run.secret_log(report).await;
    run.finish().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b"s3cr3t-pw"), "czNjcjN0LXB3");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn readiness_and_failure_from_conditions() {
        let o = |status: Value| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a", "generation": 2}, "status": status}))
                .expect("object")
        };
        assert_eq!(readiness(&o(json!({}))), None);
        assert_eq!(
            readiness(&o(
                json!({"conditions": [{"type": "Running", "status": "True", "reason": "Running"}]})
            )),
            Some(false)
        );
        assert_eq!(
            readiness(&o(
                json!({"conditions": [{"type": "Paused", "status": "True"}]})
            )),
            None
        );
        assert_eq!(
            readiness(&o(
                json!({"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]})
            )),
            Some(false)
        );
        assert_eq!(
            readiness(&o(
                json!({"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]})
            )),
            Some(true)
        );
        assert!(shows_failure(&o(
            json!({"conditions": [{"type": "ReleaseFailed", "status": "True"}]})
        )));
        assert!(shows_failure(&o(
            json!({"conditions": [{"type": "Ready", "status": "False"}]})
        )));
        assert!(!shows_failure(&o(
            json!({"conditions": [{"type": "Ready", "status": "True"}, {"type": "Failure", "status": "False"}]})
        )));
    }
}
