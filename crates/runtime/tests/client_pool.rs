//! The operator's API client lets idle connections go (kube's default keeps every one it
//! opened, with its read buffer, for good). Connections are counted from this process's own
//! sockets (`/proc/self/fd` against `/proc/net/tcp*`), so other test binaries talking to the
//! shared control plane do not count.
use std::collections::HashSet;
use std::time::Duration;

use bosun_runtime::client::{client_with, Pool};
use bosun_testenv::{eventually, shared};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

/// The inodes of this process's sockets.
fn own_sockets() -> HashSet<u64> {
    let mut out = HashSet::new();
    for e in std::fs::read_dir("/proc/self/fd").expect("fds").flatten() {
        if let Ok(target) = std::fs::read_link(e.path()) {
            let t = target.to_string_lossy();
            if let Some(n) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                if let Ok(n) = n.parse() {
                    out.insert(n);
                }
            }
        }
    }
    out
}

/// This process's established connections to `port`.
fn connections_to(port: u16) -> usize {
    let own = own_sockets();
    let mut n = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let remote_port = f[2]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            let established = f[3] == "01";
            let inode: Option<u64> = f[9].parse().ok();
            if remote_port == Some(port) && established && inode.is_some_and(|i| own.contains(&i)) {
                n += 1;
            }
        }
    }
    n
}

#[tokio::test]
async fn idle_connections_are_capped_and_then_closed() {
    let cp = shared().await.expect("control plane");
    let port: u16 = cp
        .server()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("port in the server URL");
    let pool = Pool {
        idle: Duration::from_secs(1),
        max_idle: 2,
    };
    let client = client_with(cp.config().await.expect("config"), None, pool).expect("client");
    let api: Api<Namespace> = Api::all(client.clone());

    // A burst of concurrent requests opens several connections at once.
    let burst = join_all((0..12).map(|_| {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await }
    }))
    .await;
    assert!(burst.iter().all(|r| r.is_ok()), "the burst's requests fail");

    // At most `max_idle` of them stay for the next request...
    let capped = eventually(30, || async { (connections_to(port) <= 2).then_some(()) }).await;
    assert!(
        capped.is_some(),
        "{} connections stay idle, the pool keeps at most 2",
        connections_to(port)
    );
    // ...and none once the pool has been idle for longer than `idle`.
    let closed = eventually(30, || async { (connections_to(port) == 0).then_some(()) }).await;
    assert!(
        closed.is_some(),
        "{} idle connections are never closed",
        connections_to(port)
    );
    // The client still works after its connections went.
    assert!(api.list(&ListParams::default()).await.is_ok());
}

/// A write that names no field manager is recorded under the client's User-Agent, as the API
/// server derives it: the operator's client says it is bosun (kube's own says nothing, and
/// such writes show as `unknown` in managedFields).
#[tokio::test]
async fn a_write_without_a_field_manager_is_recorded_as_bosun() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("admin");
    let ns = bosun_testenv::test_namespace(&admin, "agent")
        .await
        .expect("namespace");
    let client =
        client_with(cp.config().await.expect("config"), None, Pool::default()).expect("client");
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("unnamed-manager".into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    let made = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let managers: Vec<_> = made
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|e| e.manager.clone())
        .collect();
    assert_eq!(managers, ["bosun"], "the managers of a write without one");
}
