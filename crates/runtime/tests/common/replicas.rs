//! How the multi-replica tests build and start their replicas: a sharded member as
//! `bosun run --sharding` builds one, and a replica process whose stdout the test reads.
use std::net::SocketAddr;

use bosun_runtime::client::{client_fenced, client_with, Pool};
use bosun_runtime::fence::Fence;
use bosun_runtime::leader::LeaderConfig;
use bosun_runtime::manager::{Manager, ManagerConfig};
use bosun_runtime::ratelimit::RateLimitLayer;
use bosun_runtime::shard::ShardConfig;
use bosun_runtime::Scope;

use super::{OverFence, Report};

/// A sharded member of one namespace, as `bosun run --sharding` builds one: the operators'
/// client fenced by the membership Lease (right above the connection pool), the sharder's
/// by the sharder Lease, the Leases written on a client of their own; bosun's default
/// timings. [`ShardedMember::manager`] builds it without operators.
pub struct ShardedMember {
    config: kube::Config,
    lease: LeaderConfig,
    cfg: ManagerConfig,
    over_fence: Option<Box<dyn OverFence>>,
    sharder_rate: Option<RateLimitLayer>,
    expected: usize,
}

impl ShardedMember {
    /// Member `identity` of the members of `lease` (its membership Lease `<lease>-member-<identity>`),
    /// watching `ns`.
    pub fn new(config: &kube::Config, lease: &str, ns: &str, identity: &str) -> Self {
        ShardedMember {
            config: config.clone(),
            lease: LeaderConfig::new(lease, ns, identity),
            cfg: ManagerConfig {
                scope: Scope::Namespaces(vec![ns.into()]),
                ..Default::default()
            },
            over_fence: None,
            sharder_rate: None,
            expected: 1,
        }
    }

    /// Reconciles in flight at once per controller.
    pub fn concurrency(mut self, n: u16) -> Self {
        self.cfg.concurrency = n;
        self
    }

    /// Serves `/metrics` on `addr`.
    pub fn metrics(mut self, addr: SocketAddr) -> Self {
        self.cfg.metrics_addr = Some(addr);
        self
    }

    /// The operators' client carries `layer` above its fence (built as
    /// [`super::fenced_client`] builds it, with no connection pool of bosun's): an
    /// [`super::layers::Observe`] shown each request, a [`super::layers::HeldWatch`], …
    pub fn layered(mut self, layer: impl OverFence) -> Self {
        self.over_fence = Some(Box::new(layer));
        self
    }

    /// The sharder's client sends `qps` requests a second at most: an API server that
    /// answers the sharder's label writes slowly, as a loaded one does.
    pub fn sharder_qps(mut self, qps: f64) -> Self {
        self.sharder_rate = Some(RateLimitLayer::new(qps, 1));
        self
    }

    /// Expects `n` members, as `bosun run --shards n` does.
    pub fn expected(mut self, n: usize) -> Self {
        self.expected = n;
        self
    }

    pub fn manager(self) -> anyhow::Result<Manager> {
        let fence = Fence::new();
        let client = match &self.over_fence {
            Some(layer) => layer.fenced_client(self.config.clone(), &fence),
            None => client_fenced(self.config.clone(), None, Pool::default(), Some(&fence))?,
        };
        let sharder_fence = Fence::new();
        let sharder = client_fenced(
            self.config.clone(),
            self.sharder_rate,
            Pool::default(),
            Some(&sharder_fence),
        )?;
        let shard = ShardConfig::new(self.lease)?.with_expected(self.expected);
        Ok(Manager::new(client, self.cfg)
            .with_leader_client(client_with(self.config, None, Pool::default())?)
            .with_fence(fence)
            .with_sharding(shard, sharder, sharder_fence))
    }
}

/// A replica process (see [`super::replica_command`]) and the lines it printed behind a
/// prefix.
pub struct Reporting {
    pub child: tokio::process::Child,
    pub said: Report,
}

impl Reporting {
    /// Spawns `cmd` with its stdout piped, and reads its lines behind `prefix` into `said`.
    pub fn spawn(mut cmd: tokio::process::Command, prefix: &'static str) -> Self {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a replica");
        let said = Report::default();
        said.read(&mut child, prefix);
        Reporting { child, said }
    }

    /// A replica process on the ignored test `test` of this binary (see
    /// [`super::replica_command`], on a free metrics address), its lines behind `prefix` read.
    pub fn start(
        test: &str,
        var: &str,
        kubeconfig: &std::path::Path,
        ns: &str,
        identity: &str,
        prefix: &'static str,
    ) -> Self {
        let addr = super::free_addr();
        Self::spawn(
            super::replica_command(test, var, kubeconfig, ns, identity, addr),
            prefix,
        )
    }

    /// Stops the replica with SIGTERM; it must exit cleanly.
    pub async fn stop(mut self) {
        super::signal(self.child.id().expect("pid"), "-TERM");
        let status = self.child.wait().await.expect("wait");
        assert!(status.success(), "a member stopped cleanly: {status}");
    }
}
