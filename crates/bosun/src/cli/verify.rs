//! `bosun verify`: starts a local control plane (as `bosun dev`), runs the operator under
//! faults and checks the invariants operators break (crates/verify). What runs, and what it
//! needs, comes from the first that applies:
//! - `--operators NAME` / `--watches FILE`: `bosun run` itself, with the CRDs and RBAC it
//!   derives for them (as `bosun manifests` does);
//! - `--command '<start the operator>'`: any operator binary, operator-sdk's included, with
//!   `--crd` and `--rbac` files (or a project's `config/`);
//! - a `bosun init` project (a PROJECT file in `--dir`): its `config/crd/bases`,
//!   `config/rbac/role.yaml`, its ServiceAccount, `config/samples`, and `bosun run --watches
//!   watches.yaml` (Helm, Ansible) or, for Rust, its binary (built once with `cargo build`).
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use bosun_verify::{operator, Options, Target};
use clap::Args;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

#[derive(Args, Debug, Clone)]
pub struct VerifyArgs {
    /// bosun's own operators to verify (bookstore, myownshell, ...).
    #[arg(long, value_delimiter = ',')]
    pub operators: Option<Vec<String>>,
    /// An operator-sdk watches.yaml: verify its charts and roles as bosun runs them.
    #[arg(long)]
    pub watches: Option<PathBuf>,
    /// The shell command that starts the operator (run with `sh -c`; it gets KUBECONFIG and
    /// WATCH_NAMESPACE).
    #[arg(long)]
    pub command: Option<String>,
    /// CustomResourceDefinition files for --command (default: the project's config/crd/bases).
    #[arg(long)]
    pub crd: Vec<PathBuf>,
    /// A ClusterRole or Role file whose rules the operator gets (default: the project's
    /// config/rbac/role.yaml; with --command and none, every permission).
    #[arg(long)]
    pub rbac: Option<PathBuf>,
    /// The ServiceAccount the operator acts as, NAMESPACE/NAME (default: the project's).
    #[arg(long)]
    pub service_account: Option<String>,
    /// Custom resources (and the Secrets they need) to apply; YAML, several documents each
    /// (default: the project's config/samples, or the seed's BookStore for bookstore).
    #[arg(long = "cr")]
    pub cr: Vec<PathBuf>,
    /// The project directory.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The short form for CI (a few minutes): fewer kills, shorter windows.
    #[arg(long)]
    pub quick: bool,
    /// Replays a run: every random choice (kill points, the second spec, the drifted child).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Only these scenarios (reference always runs): crash, apiserver-restart, stale, drift,
    /// spec-change, failure.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Write the verdicts as JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Seconds the operator must write nothing once converged (default 10, 30 without --quick).
    #[arg(long)]
    pub rest: Option<u64>,
    /// Seconds the samples may take to converge in each scenario.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Where the operator's logs go (default: a directory under the system's temp dir).
    #[arg(long)]
    pub logs: Option<PathBuf>,
}

pub async fn run(args: VerifyArgs) -> anyhow::Result<()> {
    for s in &args.only {
        anyhow::ensure!(
            bosun_verify::SCENARIOS.contains(&s.as_str()),
            "--only {s}: no such scenario; they are {}",
            bosun_verify::SCENARIOS.join(", ")
        );
    }
    let target = target(&args)?;
    super::dev::assets::ensure().await?;
    let seed = args.seed.unwrap_or_else(bosun_verify::fresh_seed);
    let logs = args
        .logs
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("bosun-verify-{seed}")));
    let mut opts = Options::new(args.quick, seed, logs);
    opts.only = args.only.clone();
    if let Some(r) = args.rest {
        opts.rest = std::time::Duration::from_secs(r);
    }
    if let Some(t) = args.timeout {
        opts.timeout = std::time::Duration::from_secs(t);
    }
    opts.replay = replay(seed);
    let report = bosun_verify::verify(&target, &opts).await?;
    println!("\n{}", report.text());
    if let Some(path) = &args.junit {
        std::fs::write(path, report.junit())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let failed = report.failed();
    if !failed.is_empty() {
        let names: Vec<String> = failed
            .iter()
            .map(|v| format!("{}/{}", v.scenario, v.check))
            .collect();
        anyhow::bail!("{} check(s) failed: {}", failed.len(), names.join(", "));
    }
    Ok(())
}

/// This command line with `--seed` set to `seed`.
fn replay(seed: u64) -> String {
    let mut out = Vec::new();
    let mut skip = false;
    for a in std::env::args() {
        if skip {
            skip = false;
            continue;
        }
        if a == "--seed" {
            skip = true;
            continue;
        }
        if a.starts_with("--seed=") {
            continue;
        }
        out.push(
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            },
        );
    }
    out.push(format!("--seed={seed}"));
    out.join(" ")
}

fn abs(p: &Path) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// Every YAML document of `path` as JSON (empty documents left out).
fn documents(path: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    documents_of(&text, &path.display().to_string())
}

fn documents_of(text: &str, what: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = serde_json::Value::deserialize(doc).with_context(|| format!("{what}: not YAML"))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// A Rust project's operator, built once (`cargo build`, honouring CARGO_TARGET_DIR and the
/// project's profile): every scenario starts the binary itself, not `cargo run`, so a kill -9
/// reaches the operator and no start waits on cargo's lock of a target dir it may share.
fn build_rust(dir: &Path) -> anyhow::Result<PathBuf> {
    eprintln!(
        "bosun verify: building the operator (cargo build in {})",
        dir.display()
    );
    let out = std::process::Command::new("cargo")
        .args(["build", "--message-format=json-render-diagnostics"])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running `cargo build` in {}", dir.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "`cargo build` in {} failed (its errors are above)",
        dir.display()
    );
    let bins = binaries(&String::from_utf8_lossy(&out.stdout));
    let package = bosun_scaffold::project::Project::read(dir)
        .map(|p| p.project_name)
        .unwrap_or_default();
    match bins.as_slice() {
        [one] => Ok(one.1.clone()),
        _ => bins
            .iter()
            .find(|(name, _)| *name == package)
            .map(|(_, path)| path.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "`cargo build` in {} built {} binaries and none is named {package}: say which with --command",
                    dir.display(),
                    bins.len()
                )
            }),
    }
}

/// (name, path) of each binary a `cargo build --message-format=json` output reports.
fn binaries(messages: &str) -> Vec<(String, PathBuf)> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"))
        })
        .filter_map(|m| {
            Some((
                m["target"]["name"].as_str()?.to_string(),
                PathBuf::from(m["executable"].as_str()?),
            ))
        })
        .collect()
}

/// A Rust project's CRDs or RBAC are its code's: what its binary prints (`crd`, `rbac`),
/// as `make manifests` does.
fn from_binary(exe: &Path, what: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let out = std::process::Command::new(exe)
        .arg(what)
        .output()
        .with_context(|| format!("running `{} {what}`", exe.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "`{} {what}` failed: {}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    documents_of(
        &String::from_utf8_lossy(&out.stdout),
        &format!("{} {what}", exe.display()),
    )
}
use serde::Deserialize as _;

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    files
}

fn crds_from(files: &[PathBuf]) -> anyhow::Result<Vec<CustomResourceDefinition>> {
    let mut out = Vec::new();
    for f in files {
        for d in documents(f)? {
            if d["kind"] == "CustomResourceDefinition" {
                out.push(
                    serde_json::from_value(d)
                        .with_context(|| format!("{}: not a valid CRD", f.display()))?,
                );
            }
        }
    }
    Ok(out)
}

fn rules_from(file: &Path) -> anyhow::Result<Vec<PolicyRule>> {
    let mut out = Vec::new();
    for d in documents(file)? {
        if d["kind"] == "ClusterRole" || d["kind"] == "Role" {
            let rules: Vec<PolicyRule> = serde_json::from_value(d["rules"].clone())
                .with_context(|| format!("{}: rules", file.display()))?;
            out.extend(rules);
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "{}: no ClusterRole or Role with rules in it",
        file.display()
    );
    Ok(out)
}

fn samples_from(files: &[PathBuf]) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    for f in files {
        for d in documents(f)? {
            anyhow::ensure!(
                d["apiVersion"].is_string()
                    && d["kind"].is_string()
                    && d["metadata"]["name"].is_string(),
                "{}: every document needs apiVersion, kind and metadata.name",
                f.display()
            );
            out.push(d);
        }
    }
    Ok(out)
}

/// The project's ServiceAccount: config/rbac/service_account.yaml's name in the namespace
/// config/default sets (operator-sdk's layout), else `controller-manager` in `<name>-system`.
fn project_service_account(dir: &Path, project: &str) -> (String, String) {
    let name = documents(&dir.join("config/rbac/service_account.yaml"))
        .ok()
        .and_then(|d| d.first()?["metadata"]["name"].as_str().map(str::to_string))
        .unwrap_or_else(|| "controller-manager".into());
    let ns = std::fs::read_to_string(dir.join("config/default/kustomization.yaml"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("namespace:").map(|n| n.trim().to_string()))
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{project}-system"));
    (ns, name)
}

const ALL: &str = "*";

fn target(args: &VerifyArgs) -> anyhow::Result<Target> {
    let dir = abs(&args.dir)?;
    let project = dir.join("PROJECT").is_file();
    let project_name = if project {
        bosun_scaffold::project::Project::read(&dir)
            .map(|p| p.project_name)
            .unwrap_or_default()
    } else {
        String::new()
    };
    let cr_files: Vec<PathBuf> = if !args.cr.is_empty() {
        args.cr
            .iter()
            .map(|p| abs(p))
            .collect::<anyhow::Result<_>>()?
    } else {
        yaml_files(&dir.join("config/samples"))
    };
    let mut samples = samples_from(&cr_files)?;
    let bosun = std::env::current_exe()?;
    let run_flags = "--metrics-addr=127.0.0.1:0 --probe-addr=127.0.0.1:0";
    let (name, shell, cmd_dir, crds, rules) = if args.operators.is_some() || args.watches.is_some()
    {
        let watches = args.watches.as_deref().map(abs).transpose()?;
        let ops = crate::registry::operators(&crate::registry::Sources {
            operators: args.operators.as_deref(),
            watches: watches.as_deref(),
            ..Default::default()
        })?;
        let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
        let crds: Vec<CustomResourceDefinition> = ops.iter().flat_map(|o| o.crds()).collect();
        let rbac = ops
            .iter()
            .map(|o| o.rbac())
            .fold(bosun_runtime::rbac::runtime_rules(false), |a, b| a.merge(b));
        let mut rules = rbac.namespaced;
        rules.extend(rbac.cluster);
        let mut shell = format!("'{}' run {run_flags}", bosun.display());
        if let Some(o) = &args.operators {
            shell.push_str(&format!(" --operators={}", o.join(",")));
        }
        let cmd_dir = match &watches {
            Some(w) => {
                shell.push_str(&format!(" --watches='{}'", w.display()));
                w.parent().map(Path::to_path_buf).unwrap_or(dir.clone())
            }
            None => dir.clone(),
        };
        if samples.is_empty() && names.contains(&"bookstore") {
            samples = bosun_yaml_documents(super::dev::SAMPLE)?;
        }
        (names.join(","), shell, cmd_dir, crds, rules)
    } else {
        let rust_project =
            project && dir.join("Cargo.toml").is_file() && !dir.join("watches.yaml").is_file();
        let exe = if rust_project && args.command.is_none() {
            Some(build_rust(&dir)?)
        } else {
            None
        };
        let shell = match (&args.command, project, &exe) {
            (Some(c), _, _) => c.clone(),
            (None, true, _) if dir.join("watches.yaml").is_file() => {
                format!("'{}' run {run_flags} --watches=watches.yaml", bosun.display())
            }
            (None, true, Some(exe)) => format!("'{}' run {run_flags}", exe.display()),
            _ => anyhow::bail!(
                "what should run? Give --operators NAME, --watches FILE or --command '<start the operator>', or run in a project made by `bosun init` (no PROJECT file in {})",
                dir.display()
            ),
        };
        let crd_files = if args.crd.is_empty() {
            yaml_files(&dir.join("config/crd/bases"))
        } else {
            args.crd
                .iter()
                .map(|p| abs(p))
                .collect::<anyhow::Result<_>>()?
        };
        let mut crds = crds_from(&crd_files)?;
        if let (true, Some(exe)) = (crds.is_empty(), &exe) {
            for d in from_binary(exe, "crd")? {
                crds.push(
                    serde_json::from_value(d)
                        .with_context(|| format!("{} crd: not a CRD", exe.display()))?,
                );
            }
        }
        let role = args
            .rbac
            .as_deref()
            .map(abs)
            .transpose()?
            .or_else(|| Some(dir.join("config/rbac/role.yaml")).filter(|p| p.is_file()));
        let rules = match (role, &exe) {
            (Some(f), _) => rules_from(&f)?,
            (None, Some(exe)) => from_binary(exe, "rbac")?
                .into_iter()
                .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
                .map(|d| serde_json::from_value::<Vec<PolicyRule>>(d["rules"].clone()))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .flatten()
                .collect(),
            (None, None) => {
                eprintln!("bosun verify: no --rbac and no config/rbac/role.yaml: the operator gets every permission");
                vec![PolicyRule {
                    api_groups: Some(vec![ALL.into()]),
                    resources: Some(vec![ALL.into()]),
                    verbs: vec![ALL.into()],
                    ..Default::default()
                }]
            }
        };
        let name = if project_name.is_empty() {
            args.command.clone().unwrap_or_default()
        } else {
            project_name.clone()
        };
        (name, shell, dir.clone(), crds, rules)
    };
    let service_account = match &args.service_account {
        Some(s) => {
            let (ns, name) = s
                .split_once('/')
                .ok_or_else(|| anyhow::anyhow!("--service-account {s}: NAMESPACE/NAME"))?;
            (ns.to_string(), name.to_string())
        }
        None if project => project_service_account(&dir, &project_name),
        None => ("bosun-verify".into(), "operator".into()),
    };
    anyhow::ensure!(
        !samples.is_empty(),
        "nothing to apply: give --cr FILE (custom resources, and Secrets they need), or add config/samples"
    );
    Ok(Target {
        name,
        command: operator::Command {
            shell,
            dir: cmd_dir,
            env: vec![],
        },
        crds,
        rules,
        service_account,
        samples,
    })
}

fn bosun_yaml_documents(text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let json =
        bosun_yaml::goyaml::yaml_to_json(text).map_err(|e| anyhow::anyhow!("sample: {e}"))?;
    Ok(vec![serde_json::from_str(&json)?])
}
