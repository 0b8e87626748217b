//! `bosun run`: the manager with every operator.
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use bosun_runtime::fence::Fence;
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
    /// Helm CLI reads), `configmap` (the same records as Helm's ConfigMaps driver keeps them)
    /// or `none` (an inventory in the custom resource's status).
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
    /// Spread every operator's objects over the replicas: each replica reconciles (and
    /// caches) only the objects labelled for it, one replica places them; with it every
    /// replica works, and leader election of the operators is not used (see the runtime's
    /// README, Sharding). The lease flags below name and time its Leases.
    #[arg(long, default_value_t = false, env = "BOSUN_SHARDING")]
    pub sharding: bool,
    /// Shard over N replicas: turns on `--sharding` and tells the replica that places the
    /// objects to expect N members. While fewer are live, for at most two lease durations
    /// after it starts placing, it holds the first placement of unlabelled objects, so a
    /// rollout of N replicas starts balanced instead of moving most objects as the others
    /// join. The number of replicas itself is the Deployment's (`bosun manifests --shards`).
    #[arg(long, env = "BOSUN_SHARDS", value_parser = parse_shards)]
    pub shards: Option<usize>,
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
    /// How long a standby waits, from the last renewal it saw, before it takes the lease
    /// (whole seconds: `4s`, or `4`). Default 4s: a standby leads 3.5-4.5 s after a crash of
    /// the leader.
    #[arg(
        long = "leader-elect-lease-duration",
        visible_alias = "lease-duration",
        value_parser = parse_lease_period
    )]
    pub lease_duration: Option<Duration>,
    /// How long the leader keeps acting after the start of its last successful renewal
    /// (shorter than the lease duration). Default 3s, or 3/4 of a given lease duration.
    #[arg(long = "leader-elect-renew-deadline", value_parser = parse_lease_period)]
    pub renew_deadline: Option<Duration>,
    /// Time between lease attempts, renewals and a standby's checks alike. Default 500ms, or
    /// 1/6 of a given renew deadline (the leader writes the Lease this often).
    #[arg(long = "leader-elect-retry-period", value_parser = parse_lease_period)]
    pub retry_period: Option<Duration>,
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
    #[command(flatten)]
    pub sdk: super::manager_flags::ManagerFlags,
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
fn parse_shards(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("the number of shards must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "{s:?} is not a number of shards (a whole number, 1 or more)"
        )),
    }
}

impl RunArgs {
    /// Whether sharding is on (`--sharding`, or `--shards N`), and how many members the
    /// sharder expects (1 with `--sharding` alone).
    pub fn shards_expected(&self) -> Option<usize> {
        match (self.shards, self.sharding) {
            (Some(n), _) => Some(n),
            (None, true) => Some(1),
            (None, false) => None,
        }
    }
}

fn parse_period(s: &str) -> Result<Duration, String> {
    bosun_watches::parse_duration(s)
}

/// A leader election period: a Go duration, or a bare number of seconds (what
/// `--lease-duration` took before it became an alias).
fn parse_lease_period(s: &str) -> Result<Duration, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|e| format!("invalid period {s:?}: {e}"));
    }
    parse_period(s)
}

/// The lease timings from the flags: each one not given follows from those given (see the
/// flags' help), and the result is checked so a bad combination fails at start with the
/// flags named.
fn lease_timings(args: &RunArgs, cfg: &mut LeaderConfig) -> anyhow::Result<()> {
    use bosun_runtime::leader::{DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD};
    if let Some(d) = args.lease_duration {
        cfg.lease_duration = d;
        cfg.renew_deadline = d * 3 / 4;
        cfg.retry_period = cfg.renew_deadline / 6;
    } else {
        cfg.renew_deadline = DEFAULT_RENEW_DEADLINE;
        cfg.retry_period = DEFAULT_RETRY_PERIOD;
    }
    if let Some(d) = args.renew_deadline {
        cfg.renew_deadline = d;
        cfg.retry_period = d / 6;
    }
    if let Some(r) = args.retry_period {
        cfg.retry_period = r;
    }
    cfg.validate().with_context(|| {
        format!(
            "--leader-elect-lease-duration={:?}, --leader-elect-renew-deadline={:?}, \
             --leader-elect-retry-period={:?}",
            cfg.lease_duration, cfg.renew_deadline, cfg.retry_period
        )
    })
}

pub async fn client(
    kubeconfig: Option<&std::path::Path>,
    qps: f64,
    burst: u32,
) -> anyhow::Result<Client> {
    fenced_client(kubeconfig, qps, burst, None).await
}

/// [`client`], its writes refused while `fence` is closed (see `bosun_runtime::fence`).
async fn fenced_client(
    kubeconfig: Option<&std::path::Path>,
    qps: f64,
    burst: u32,
    fence: Option<&Fence>,
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
    Ok(bosun_runtime::client::client_fenced(
        config,
        rate,
        bosun_runtime::client::Pool::default(),
        fence,
    )?)
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    telemetry::init_with(args.sdk.log_format(args.log_format), args.sdk.log_filter());
    // With leader election, no write of the operators leaves this process unless it is sure
    // it leads (a replica paused past its renew deadline wakes with its writes queued).
    let expected = args.shards_expected();
    let elects = args.leader_elect || expected.is_some();
    let fence = elects.then(Fence::new);
    let client = fenced_client(
        args.kubeconfig.as_deref(),
        args.qps,
        args.burst,
        fence.as_ref(),
    )
    .await?;
    let leader = if elects {
        let identity = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("bosun-{}", std::process::id()));
        let ns = args
            .lease_namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let mut cfg = LeaderConfig::new(&args.lease_name, &ns, &identity);
        lease_timings(&args, &mut cfg)?;
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
    // Sharded, each replica holds a membership Lease named after the leader Lease (and one
    // replica the sharder Lease) in place of leader election.
    let sharding = match (&leader, expected) {
        (Some(l), Some(n)) => Some(
            bosun_runtime::shard::ShardConfig::new(l.clone())
                .context("--sharding")?
                .with_expected(n),
        ),
        _ => None,
    };
    let config = ManagerConfig {
        scope: Scope::from_list(&namespaces),
        concurrency: args.concurrency.max(1),
        metrics_addr: addr(&args.metrics_addr)?,
        probe_addr: addr(&args.probe_addr)?,
        leader: if sharding.is_some() { None } else { leader },
        metrics_auth: args.metrics_secure || args.sdk.metrics_require_rbac,
        ..Default::default()
    };
    super::rest::hand_back_periodically();
    let mut manager = Manager::new(client, config);
    if elects {
        // Its own connections and no shared rate limit: lease renewals never queue behind
        // reconciles or /metrics reviews.
        manager =
            manager.with_leader_client(self::client(args.kubeconfig.as_deref(), 0.0, 0).await?);
    }
    if let Some(f) = fence {
        manager = manager.with_fence(f);
    }
    if let Some(shard) = sharding {
        // The sharder's label writes are fenced by the sharder Lease, apart from the
        // operators' writes (fenced by this replica's membership).
        let sharder_fence = Fence::new();
        let sharder = fenced_client(
            args.kubeconfig.as_deref(),
            args.qps,
            args.burst,
            Some(&sharder_fence),
        )
        .await?;
        manager = manager.with_sharding(shard, sharder, sharder_fence);
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

    fn run_args(flags: &[&str]) -> RunArgs {
        let mut argv = vec!["bosun", "run", "--leader-elect"];
        argv.extend_from_slice(flags);
        let cli = crate::cli::Cli::try_parse_from(argv).expect("flags parse");
        let crate::cli::Command::Run(a) = cli.command else {
            panic!("not run");
        };
        a
    }

    fn timings(flags: &[&str]) -> anyhow::Result<(Duration, Duration, Duration)> {
        let mut cfg = LeaderConfig::new("l", "ns", "me");
        lease_timings(&run_args(flags), &mut cfg)?;
        Ok((cfg.lease_duration, cfg.renew_deadline, cfg.retry_period))
    }

    #[test]
    fn lease_timings_take_operator_sdks_names_the_old_flag_and_refuse_unsafe_ones() {
        let ms = Duration::from_millis;
        assert_eq!(
            timings(&[]).expect("defaults"),
            (ms(4000), ms(3000), ms(500))
        );
        assert_eq!(
            timings(&[
                "--leader-elect-lease-duration=15s",
                "--leader-elect-renew-deadline=10s",
                "--leader-elect-retry-period=2s"
            ])
            .expect("client-go's"),
            (ms(15000), ms(10000), ms(2000))
        );
        assert_eq!(
            timings(&["--lease-duration", "8"]).expect("the old flag, in seconds"),
            (ms(8000), ms(6000), ms(1000))
        );
        let e = timings(&["--leader-elect-renew-deadline=5s"]).expect_err("deadline past lease");
        assert!(
            format!("{e:#}").contains("renew deadline must be shorter than the lease duration"),
            "{e:#}"
        );
        let e = timings(&["--leader-elect-lease-duration=2500ms"]).expect_err("fractional");
        assert!(
            format!("{e:#}").contains("whole number of seconds"),
            "{e:#}"
        );
        let e = timings(&["--leader-elect-retry-period=3s"]).expect_err("retry past deadline");
        assert!(format!("{e:#}").contains("retry period"), "{e:#}");
    }
}

#[cfg(test)]
mod sharding_tests {
    use clap::Parser;

    #[test]
    fn sharding_is_off_by_default_and_the_flag_turns_it_on() {
        let parse = |argv: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from(argv).expect("flags parse");
            let crate::cli::Command::Run(a) = cli.command else {
                panic!("not run");
            };
            a.sharding
        };
        assert!(!parse(&["bosun", "run"]));
        assert!(parse(&["bosun", "run", "--sharding"]));
    }

    fn run_args(argv: &[&str]) -> Result<crate::cli::run::RunArgs, clap::Error> {
        let cli = crate::cli::Cli::try_parse_from(argv)?;
        let crate::cli::Command::Run(a) = cli.command else {
            panic!("not run");
        };
        Ok(a)
    }

    #[test]
    fn shards_turns_sharding_on_and_sets_the_members_expected() {
        let a = run_args(&["bosun", "run", "--shards", "3"]).expect("--shards 3 parses");
        assert_eq!(a.shards_expected(), Some(3));
        let a = run_args(&["bosun", "run", "--shards=1"]).expect("--shards=1 parses");
        assert_eq!(a.shards_expected(), Some(1));
        let a = run_args(&["bosun", "run", "--sharding"]).expect("flags parse");
        assert_eq!(a.shards_expected(), Some(1), "--sharding alone expects 1");
        let a = run_args(&["bosun", "run"]).expect("flags parse");
        assert_eq!(a.shards_expected(), None, "off by default");
    }

    #[test]
    fn shards_refuses_zero_and_non_numbers_clearly() {
        let e = run_args(&["bosun", "run", "--shards", "0"]).expect_err("0 shards");
        assert!(e.to_string().contains("at least 1"), "{e}");
        let e = run_args(&["bosun", "run", "--shards", "three"]).expect_err("not a number");
        assert!(e.to_string().contains("not a number of shards"), "{e}");
    }
}
