//! `bosun run`: the manager with every operator.
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{shutdown_signal, Manager, ManagerConfig, Scope};
use bosun_runtime::ratelimit::RateLimitLayer;
use bosun_runtime::telemetry::{self, LogFormat};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Kubeconfig file; in-cluster config or $KUBECONFIG / ~/.kube/config when unset.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Namespaces to watch (comma-separated or repeated); all namespaces when empty.
    /// `WATCH_NAMESPACE` (operator-sdk's variable) is read when neither this flag nor
    /// `BOSUN_NAMESPACES` is set.
    #[arg(long, value_delimiter = ',', env = "BOSUN_NAMESPACES")]
    pub namespaces: Vec<String>,
    /// Coded operators to run (comma-separated): bookstore, myownshell. Default: bookstore,
    /// or none when --watches is given.
    #[arg(long, value_delimiter = ',')]
    pub operators: Option<Vec<String>>,
    /// An operator-sdk watches.yaml: each entry's chart (Helm) or role/playbook (Ansible)
    /// runs as an operator.
    #[arg(long, visible_alias = "watches-file")]
    pub watches: Option<std::path::PathBuf>,
    /// Where chart entries keep their releases: `secret` (Helm's own records, which the
    /// Helm CLI reads) or `none` (an inventory in the custom resource's status).
    #[arg(long, default_value = "secret")]
    pub release_storage: bosun_helm_operator::Storage,
    /// Show every chart override value as `****` in Events (helm-operator's flag). Values
    /// of Secret-like keys (password, token, key, ...) are masked without it.
    #[arg(long, default_value_t = false)]
    pub suppress_override_values: bool,
    /// The reconcile period of watches entries that set none (operator-sdk's flag; its
    /// defaults, 1m for charts and 10h for roles, apply when it is not given).
    #[arg(long, value_parser = parse_period)]
    pub reconcile_period: Option<Duration>,
    /// Which engine runs role and playbook entries: `auto` (bosun's native engine where it
    /// supports the role, real Ansible — `ansible-runner` from BOSUN_ANSIBLE_RUNNER or PATH —
    /// where it does not), `native` (refuse what it does not support), `ansible`.
    #[arg(long, default_value = "auto", env = "BOSUN_ANSIBLE_ENGINE")]
    pub ansible_engine: bosun_ansible_operator::EngineFlag,
    /// Elect a leader through a Lease so only one replica reconciles.
    #[arg(long, default_value_t = false)]
    pub leader_elect: bool,
    /// Name of the Lease used for leader election.
    #[arg(
        long,
        visible_alias = "leader-election-id",
        default_value = "bosun-leader"
    )]
    pub lease_name: String,
    /// Namespace of the Lease (defaults to the pod's namespace, else "default").
    #[arg(
        long,
        visible_alias = "leader-election-namespace",
        env = "POD_NAMESPACE"
    )]
    pub lease_namespace: Option<String>,
    /// Lease duration in seconds (renew deadline is 2/3 of it, retry 2 s).
    #[arg(long, default_value_t = 15)]
    pub lease_duration: u64,
    /// Address of the Prometheus /metrics endpoint ("off" to disable). Bound to localhost by
    /// default: expose it only behind authentication (see README, Metrics).
    #[arg(
        long,
        visible_alias = "metrics-bind-address",
        default_value = "127.0.0.1:8080"
    )]
    pub metrics_addr: String,
    /// Require a bearer token allowed to `get /metrics` (TokenReview + SubjectAccessReview, as
    /// kubebuilder does); use it whenever the metrics address is not localhost.
    #[arg(long, default_value_t = false)]
    pub metrics_secure: bool,
    /// Address of /healthz and /readyz ("off" to disable).
    #[arg(
        long,
        visible_alias = "health-probe-bind-address",
        default_value = "0.0.0.0:8081"
    )]
    pub probe_addr: String,
    /// Reconciles in flight at once per operator.
    #[arg(
        long,
        visible_alias = "max-concurrent-reconciles",
        default_value_t = 16
    )]
    pub concurrency: u16,
    /// Client-side limit on API requests per second (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub qps: f64,
    /// Burst above --qps.
    #[arg(long, default_value_t = 50)]
    pub burst: u32,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    pub log_format: LogFormat,
}

/// An address as bosun or controller-runtime writes it: `host:port`, `:port` (every
/// interface), or "off"/"0"/"" for none (controller-runtime's "0" disables metrics).
fn addr(s: &str) -> anyhow::Result<Option<SocketAddr>> {
    if s == "off" || s == "0" || s.is_empty() {
        return Ok(None);
    }
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_string(),
    };
    Ok(Some(
        full.parse()
            .with_context(|| format!("invalid address {s:?}"))?,
    ))
}

/// A period as operator-sdk's flags take it (Go durations: `90s`, `1m30s`, `10h`).
fn parse_period(s: &str) -> Result<Duration, String> {
    bosun_watches::parse_duration(s)
}

pub async fn client(
    kubeconfig: Option<&std::path::Path>,
    qps: f64,
    burst: u32,
) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(p) => {
            let kc =
                Kubeconfig::read_from(p).with_context(|| format!("reading {}", p.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer()
            .await
            .context("no cluster configured (in-cluster, KUBECONFIG or ~/.kube/config)")?,
    };
    let rate = (qps > 0.0).then(|| RateLimitLayer::new(qps, burst));
    Ok(bosun_runtime::client::client(config, rate)?)
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    telemetry::init(args.log_format);
    let client = client(args.kubeconfig.as_deref(), args.qps, args.burst).await?;
    let leader = if args.leader_elect {
        let identity = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("bosun-{}", std::process::id()));
        let ns = args
            .lease_namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let mut cfg = LeaderConfig::new(&args.lease_name, &ns, &identity);
        cfg.lease_duration = Duration::from_secs(args.lease_duration.max(3));
        cfg.renew_deadline = cfg.lease_duration * 2 / 3;
        cfg.retry_period = Duration::from_secs(2).min(cfg.renew_deadline / 2);
        Some(cfg)
    } else {
        None
    };
    let mut namespaces = args.namespaces.clone();
    if namespaces.is_empty() {
        if let Ok(w) = std::env::var("WATCH_NAMESPACE") {
            namespaces = w.split(',').map(|s| s.trim().to_string()).collect();
        }
    }
    // The operators are configured from the environment; the namespaces watched reach them
    // there however they were given (an operator's webhooks review those namespaces only).
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if !namespaces.is_empty() {
        env.insert("BOSUN_NAMESPACES".into(), namespaces.join(","));
    }
    let ops = crate::registry::operators(&crate::registry::Sources {
        operators: args.operators.as_deref(),
        watches: args.watches.as_deref(),
        release_storage: args.release_storage,
        suppress_override_values: args.suppress_override_values,
        reconcile_period: args.reconcile_period,
        ansible_engine: args.ansible_engine,
        env: Some(&env),
    })?;
    let config = ManagerConfig {
        scope: Scope::from_list(&namespaces),
        concurrency: args.concurrency.max(1),
        metrics_addr: addr(&args.metrics_addr)?,
        probe_addr: addr(&args.probe_addr)?,
        leader,
        metrics_auth: args.metrics_secure,
        ..Default::default()
    };
    trim_heap_periodically();
    let mut manager = Manager::new(client, config);
    if args.leader_elect {
        // Its own connections and no shared rate limit: lease renewals never queue behind
        // reconciles or /metrics reviews.
        manager =
            manager.with_leader_client(self::client(args.kubeconfig.as_deref(), 0.0, 0).await?);
    }
    for op in ops {
        manager = manager.with_operator(op);
    }
    manager
        .run(shutdown_signal(), |addrs| {
            tracing::info!(?addrs, "serving metrics and probes")
        })
        .await?;
    tracing::info!("stopped");
    Ok(())
}

/// glibc's malloc keeps memory freed after a burst (parsing the initial LISTs, a wave of
/// reconciles) in its arenas, so RSS stays at the peak. Handing it back every 10 s keeps the
/// steady RSS near the live heap (see BENCHMARKS.md).
fn trim_heap_periodically() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::spawn(async {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        loop {
            tick.tick().await;
            // SAFETY: malloc_trim only releases free memory; no pointer is touched.
            unsafe {
                libc::malloc_trim(0);
            }
            #[cfg(feature = "heap-stats")]
            tracing::info!(
                live_bytes = bosun_runtime::heap::live(),
                peak_bytes = bosun_runtime::heap::peak(),
                allocations = bosun_runtime::heap::allocations(),
                "heap"
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The manager arguments an operator-sdk scaffold passes (config/manager and the
    /// auth-proxy patch): swapping only the image must keep them working.
    #[test]
    fn an_operator_sdk_scaffolds_manager_args_are_accepted() {
        let cli = crate::cli::Cli::try_parse_from([
            "bosun",
            "run",
            "--health-probe-bind-address=:8081",
            "--metrics-bind-address=127.0.0.1:8080",
            "--leader-elect",
            "--leader-election-id=memcached-operator",
            "--max-concurrent-reconciles=4",
            "--reconcile-period=2m",
            "--suppress-override-values",
            "--watches-file=./watches.yaml",
        ])
        .expect("operator-sdk's flags parse");
        let crate::cli::Command::Run(a) = cli.command else {
            panic!("not run");
        };
        assert_eq!(
            addr(&a.probe_addr).expect("probe"),
            Some(([0, 0, 0, 0], 8081).into())
        );
        assert_eq!(
            addr(&a.metrics_addr).expect("metrics"),
            Some(([127, 0, 0, 1], 8080).into())
        );
        assert!(a.leader_elect && a.suppress_override_values);
        assert_eq!(a.lease_name, "memcached-operator");
        assert_eq!(a.concurrency, 4);
        assert_eq!(a.reconcile_period, Some(Duration::from_secs(120)));
        assert_eq!(
            addr("0").expect("off"),
            None,
            "controller-runtime's \"0\" disables"
        );
        assert!(addr(":http").is_err());
    }
}
