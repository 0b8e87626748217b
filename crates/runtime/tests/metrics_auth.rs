//! `/metrics` behind TokenReview + SubjectAccessReview must not be a lever against the
//! operator: whoever reaches the endpoint can send any bearer token. On the real API server:
//! oversized tokens cost no API call and no memory, a flood of random tokens makes a bounded
//! number of concurrent reviews and leaves a bounded cache, an API error is never remembered as
//! a denial, a valid scraper keeps working through a flood, and the leader keeps its lease.
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bosun_runtime::auth::{AuthLimits, Decision, MetricsAuth};
use bosun_runtime::leader::{LeaderConfig, LeaderElector};
use bosun_runtime::manager::{Manager, ManagerConfig};
use bosun_runtime::ratelimit::RateLimitLayer;
use bosun_testenv::{shared, test_namespace, ControlPlane};
use common::layers::{ApiCalls, Slow};
use common::*;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::Client;
use sha2::{Digest, Sha256};

/// Every review the authenticator sends (TokenReview and SubjectAccessReview).
const REVIEWS: &str = "reviews";

fn admin_token(cp: &ControlPlane) -> String {
    let kc = std::fs::read_to_string(cp.kubeconfig()).expect("kubeconfig");
    kc.lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("admin token")
        .to_string()
}

/// A token nobody issued: `len` bytes, different on every call.
fn random_token(len: usize) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let seed = format!(
        "{}-{}-{:?}",
        N.fetch_add(1, Ordering::Relaxed),
        std::process::id(),
        std::time::SystemTime::now()
    );
    let mut out = String::with_capacity(len + 64);
    let mut block = Sha256::digest(seed.as_bytes());
    while out.len() < len {
        out.push_str(&hex::encode(block));
        block = Sha256::digest(block);
    }
    out.truncate(len);
    out
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A ServiceAccount allowed to `get /metrics` (as Prometheus' would be), and a token for it.
async fn scraper_token(client: &Client, ns: &str) -> String {
    let name = format!("scraper-{ns}");
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    bind(client, &name, &name, "ServiceAccount", "scraper", Some(ns)).await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("scraper".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    sas.create(&PostParams::default(), &sa).await.expect("sa");
    sas.create_subresource::<TokenRequest, TokenRequest>(
        "token",
        "scraper",
        &PostParams::default(),
        &TokenRequest::default(),
    )
    .await
    .expect("token request")
    .status
    .expect("status")
    .token
}

async fn bind(
    client: &Client,
    name: &str,
    role: &str,
    kind: &str,
    subject: &str,
    ns: Option<&str>,
) {
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            kind: kind.into(),
            name: subject.into(),
            namespace: ns.map(Into::into),
            api_group: (kind == "User").then(|| "rbac.authorization.k8s.io".into()),
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
}

/// A minimal HTTP/1.0 GET of `/metrics` with a bearer token: the whole response.
async fn get_response(addr: SocketAddr, token: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    let req = format!(
        "GET /metrics HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// The status code of a `/metrics` GET (0 when the connection failed).
async fn get_metrics(addr: SocketAddr, token: &str) -> u16 {
    get_response(addr, token)
        .await
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Starts a manager with `/metrics` behind authentication and no operator.
async fn start_secured(
    client: Client,
    leader: Option<(LeaderConfig, Client)>,
) -> (tokio::sync::oneshot::Sender<()>, SocketAddr) {
    let cfg = ManagerConfig {
        metrics_addr: Some("127.0.0.1:0".parse().expect("addr")),
        probe_addr: None,
        metrics_auth: true,
        leader: leader.as_ref().map(|(c, _)| c.clone()),
        ..Default::default()
    };
    let mut m = Manager::new(client, cfg);
    if let Some((_, leader_client)) = leader {
        m = m.with_leader_client(leader_client);
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    tokio::spawn(m.run(
        async move {
            let _ = stop_rx.await;
        },
        move |addrs| {
            let _ = addr_tx.send(addrs[0]);
        },
    ));
    (stop_tx, addr_rx.await.expect("bound"))
}

#[tokio::test]
async fn huge_tokens_get_401_without_an_api_call_and_leave_no_memory_behind() {
    let cp = shared().await.expect("control plane");
    let calls = ApiCalls::matching(REVIEWS);
    let (stop, addr) = start_secured(calls.client(cp).await, None).await;
    assert_eq!(get_metrics(addr, &admin_token(cp)).await, 200);
    let reviews_for_admin = calls.total();

    // 1000 random 100 KB tokens, 50 connections at a time: 100 MB of tokens in all.
    let before = rss_bytes();
    let sent = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let sent = sent.clone();
        workers.spawn(async move {
            let mut codes = Vec::new();
            while sent.fetch_add(1, Ordering::SeqCst) < 1000 {
                codes.push(get_metrics(addr, &random_token(100 * 1024)).await);
            }
            codes
        });
    }
    let mut codes = Vec::new();
    while let Some(c) = workers.join_next().await {
        codes.extend(c.expect("worker"));
    }
    let grown = rss_bytes().saturating_sub(before);
    println!(
        "huge tokens: RSS grew by {} MB, {} reviews sent",
        grown >> 20,
        calls.total() - reviews_for_admin
    );
    assert_eq!(codes.len(), 1000);
    assert!(codes.iter().all(|c| *c == 401), "every huge token: 401");
    assert_eq!(
        calls.total(),
        reviews_for_admin,
        "no review was sent for a huge token"
    );
    assert!(
        grown < 40 << 20,
        "RSS grew by {} MB for 100 MB of refused tokens",
        grown >> 20
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn a_flood_of_random_tokens_makes_bounded_reviews_and_a_valid_scraper_still_works() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "auth-flood").await.expect("ns");
    let scraper = scraper_token(&admin, &ns).await;

    let calls = ApiCalls::matching(REVIEWS);
    let limits = AuthLimits {
        allowed_entries: 4,
        denied_entries: 16,
        concurrent_reviews: 2,
        review_wait: Duration::from_millis(500),
        ..AuthLimits::default()
    };
    let auth = MetricsAuth::with_limits(calls.client(cp).await, limits.clone());
    let admin_header = bearer(&admin_token(cp));
    assert_eq!(
        auth.check(Some(&admin_header), "/metrics").await,
        Decision::Allowed
    );

    // 3 s of random 2 KB tokens from 32 clients. The admin, already cached, scrapes every
    // 20 ms throughout; the scraper's first request comes in the middle of the flood.
    let flood_until = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let auth = auth.clone();
        flood.spawn(async move {
            let mut answers = Vec::new();
            while tokio::time::Instant::now() < flood_until {
                let token = bearer(&random_token(2048));
                answers.push(auth.check(Some(&token), "/metrics").await);
            }
            answers
        });
    }
    let steady = {
        let (auth, header) = (auth.clone(), admin_header.clone());
        tokio::spawn(async move {
            let mut answers = Vec::new();
            while tokio::time::Instant::now() < flood_until {
                answers.push(auth.check(Some(&header), "/metrics").await);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            answers
        })
    };
    let newcomer = {
        let (auth, header) = (auth.clone(), bearer(&scraper));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let mut answers = Vec::new();
            loop {
                let d = auth.check(Some(&header), "/metrics").await;
                answers.push((d, tokio::time::Instant::now() < flood_until));
                if d != Decision::Unavailable {
                    return answers;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut answers = Vec::new();
    while let Some(a) = flood.join_next().await {
        answers.extend(a.expect("flood"));
    }
    let newcomer = newcomer.await.expect("newcomer");
    let steady = steady.await.expect("steady");

    let definite = answers
        .iter()
        .filter(|d| **d == Decision::Unauthenticated)
        .count();
    let deferred = answers.len() - definite;
    println!(
        "flood: {} requests, {definite} reviewed (401), {deferred} deferred (503); \
         scraper answers {newcomer:?}",
        answers.len()
    );
    assert!(
        answers
            .iter()
            .all(|d| matches!(d, Decision::Unauthenticated | Decision::Unavailable)),
        "a random token is refused or deferred, never allowed"
    );
    assert!(
        calls.max_in_flight() <= limits.concurrent_reviews,
        "{} reviews at once",
        calls.max_in_flight()
    );
    // One TokenReview per reviewed token and none for a deferred one; the admin and the
    // scraper each cost a TokenReview and a SubjectAccessReview.
    assert_eq!(calls.total(), definite + 4, "reviews sent");
    assert!(
        auth.cached_entries() <= limits.allowed_entries + limits.denied_entries,
        "{} cached decisions",
        auth.cached_entries()
    );
    assert!(
        steady.len() > 50 && steady.iter().all(|d| *d == Decision::Allowed),
        "the cached scraper kept working: {steady:?}"
    );
    assert!(
        newcomer[..newcomer.len() - 1]
            .iter()
            .all(|(d, _)| *d == Decision::Unavailable),
        "a valid token is deferred, never refused: {newcomer:?}"
    );
    assert_eq!(
        newcomer.last().map(|(d, _)| *d),
        Some(Decision::Allowed),
        "a new scraper gets through: {newcomer:?}"
    );
}

#[tokio::test]
async fn requests_beyond_the_review_bound_wait_briefly_then_get_503_which_is_not_cached() {
    let cp = shared().await.expect("control plane");
    // Every answer of the API server takes 600 ms.
    let auth = MetricsAuth::with_limits(
        Slow(Duration::from_millis(600)).client(cp).await,
        AuthLimits {
            concurrent_reviews: 1,
            review_wait: Duration::from_millis(200),
            ..AuthLimits::default()
        },
    );
    let tokens: Vec<String> = (0..5).map(|_| bearer(&random_token(512))).collect();
    let answers = futures::future::join_all(
        tokens
            .iter()
            .map(|t| auth.check(Some(t.as_str()), "/metrics")),
    )
    .await;
    assert_eq!(
        answers,
        [
            Decision::Unauthenticated,
            Decision::Unavailable,
            Decision::Unavailable,
            Decision::Unavailable,
            Decision::Unavailable
        ],
        "one review at a time; the others gave up waiting after 200 ms"
    );
    assert_eq!(auth.cached_entries(), 1, "only the verdict is cached");
    // A deferred token is reviewed when asked again.
    assert_eq!(
        auth.check(Some(&tokens[1]), "/metrics").await,
        Decision::Unauthenticated
    );

    // The endpoint answers a deferred request 503 with Retry-After (by default 4 reviews at
    // once and 1 s of waiting; here the API takes 3 s a review).
    let (stop, addr) = start_secured(Slow(Duration::from_secs(3)).client(cp).await, None).await;
    let responses = futures::future::join_all(
        (0..6).map(|_| async move { get_response(addr, &random_token(512)).await }),
    )
    .await;
    let deferred: Vec<&String> = responses
        .iter()
        .filter(|r| r.starts_with("HTTP/1.0 503"))
        .collect();
    assert_eq!(deferred.len(), 2, "{responses:?}");
    assert!(
        deferred[0].to_ascii_lowercase().contains("retry-after: 1"),
        "{responses:?}"
    );
    assert_eq!(
        responses
            .iter()
            .filter(|r| r.starts_with("HTTP/1.0 401"))
            .count(),
        4,
        "{responses:?}"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn an_api_error_is_answered_503_and_not_cached() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "auth-error").await.expect("ns");
    // An identity that may not create reviews yet: every review is a 403 from the API.
    let user = format!("reviewer-{ns}");
    let auth = MetricsAuth::new(cp.client_as(&user, &[]).await.expect("client"));
    let header = bearer(&admin_token(cp));
    assert_eq!(
        auth.check(Some(&header), "/metrics").await,
        Decision::Unavailable,
        "an API error is not a verdict on the token"
    );
    assert_eq!(auth.cached_entries(), 0);

    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(user.clone()),
            ..Default::default()
        },
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec!["authentication.k8s.io".into()]),
                resources: Some(vec!["tokenreviews".into()]),
                verbs: vec!["create".into()],
                ..Default::default()
            },
            PolicyRule {
                api_groups: Some(vec!["authorization.k8s.io".into()]),
                resources: Some(vec!["subjectaccessreviews".into()]),
                verbs: vec!["create".into()],
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    bind(&admin, &user, &user, "User", &user, None).await;
    let allowed = eventually(20, || async {
        (auth.check(Some(&header), "/metrics").await == Decision::Allowed).then_some(())
    })
    .await;
    assert!(
        allowed.is_some(),
        "allowed once the API answers, well within the cache TTL"
    );
}

#[tokio::test]
async fn the_leader_keeps_its_lease_while_metrics_are_flooded() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let ns = test_namespace(&admin, "auth-lease").await.expect("ns");
    let lease = |identity: &str| LeaderConfig {
        lease_name: "bosun".into(),
        namespace: ns.clone(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
    };
    // The operator's client has a tight client-side rate limit (--qps), as on a shared
    // cluster; the reviews go through it, the lease through its own client.
    let cfg = cp.config().await.expect("config");
    let limited = kube::client::ClientBuilder::try_from(cfg)
        .expect("builder")
        .with_layer(&RateLimitLayer::new(1.0, 1))
        .build();
    let (stop, addr) =
        start_secured(limited, Some((lease("a"), cp.client().await.expect("c")))).await;
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &ns);
    let holder = || async {
        leases
            .get_opt("bosun")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
    };
    eventually(10, || async {
        (holder().await.as_deref() == Some("a")).then_some(())
    })
    .await
    .expect("a leads");
    let mut b = LeaderElector::new(admin.clone(), lease("b")).expect("elector");
    let standby = tokio::spawn(async move { b.acquire().await });

    // Three lease durations of random tokens from 16 connections.
    let flood_until = tokio::time::Instant::now() + Duration::from_secs(12);
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..16 {
        flood.spawn(async move {
            while tokio::time::Instant::now() < flood_until {
                get_metrics(addr, &random_token(1024)).await;
            }
        });
    }
    while tokio::time::Instant::now() < flood_until {
        assert_eq!(
            holder().await.as_deref(),
            Some("a"),
            "the lease stayed with a"
        );
        assert!(!standby.is_finished(), "the standby never acquired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    while flood.join_next().await.is_some() {}
    assert_eq!(holder().await.as_deref(), Some("a"));
    standby.abort();
    let _ = stop.send(());
}
