//! The loopback proxy between a run and the API server, as ansible-operator's: the role's
//! kubeconfig points at it, it forwards every request with the operator's own client (its
//! credentials, its TLS), and it injects the owner into what the role creates.
//!
//! * Bound to 127.0.0.1 on a port the kernel picks; one proxy per entry, shared by its runs.
//! * **Scoped to a run**: each run gets a random bearer token, registered for the run's
//!   duration only ([`Proxy::register`], revoked when the [`RunScope`] drops). A request
//!   without a live token is refused (401) — another local process cannot borrow the
//!   operator's credentials, and a leftover kubeconfig is worthless.
//! * **Owner injection on create** (POST to a collection, not a subresource): an owner
//!   reference when the owner is cluster-scoped or in the object's namespace, else the
//!   `operator-sdk/primary-resource` annotations ([`bosun_ansible::Owner::inject`]).
//!   Reviews (`authentication.k8s.io`, `authorization.k8s.io`) are left alone. PATCH and PUT
//!   pass through untouched, as in ansible-operator — but for a sharded owner's shard labels:
//!   an update of one of its children carries them ([`relabel`]), so a child follows its CR
//!   to the member it moved to with the role's next write of it.
//! * Records the `(apiVersion, kind)` of every object a run creates or changes, for the
//!   dependent watches — but for Events (`k8s_event`): they are what a role tells the user,
//!   not children it manages, and watching them would make every Event written a reconcile
//!   (as the native engine, which never counts them; ansible-operator's proxy watches them).
//! * Unlike ansible-operator's, GETs are not served from an informer cache: they go to the
//!   API server (no per-kind informer kept in memory for what roles read).
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use bosun_ansible::Owner;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use serde_json::{json, Value};

/// The largest request body forwarded (the API server's own limit is 3 MiB per object).
const MAX_BODY: usize = 16 * 1024 * 1024;

type Touched = BTreeSet<(String, String)>;

#[derive(Default)]
struct Scope {
    owner: Option<Owner>,
    touched: Touched,
}

type Runs = Arc<Mutex<HashMap<String, Scope>>>;

#[derive(Clone)]
struct Shared {
    client: kube::Client,
    runs: Runs,
}

/// A running proxy.
pub struct Proxy {
    addr: SocketAddr,
    runs: Runs,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A run's registration: its token, valid until this is dropped.
pub struct RunScope {
    token: String,
    runs: Runs,
}

impl RunScope {
    pub fn token(&self) -> &str {
        &self.token
    }

    /// `(apiVersion, kind)` of what the run created or changed so far.
    pub fn touched(&self) -> Touched {
        lock(&self.runs)
            .get(&self.token)
            .map(|s| s.touched.clone())
            .unwrap_or_default()
    }
}

impl Drop for RunScope {
    fn drop(&mut self) {
        lock(&self.runs).remove(&self.token);
    }
}

fn lock(runs: &Runs) -> std::sync::MutexGuard<'_, HashMap<String, Scope>> {
    runs.lock().unwrap_or_else(|e| e.into_inner())
}

/// 32 random bytes from the kernel, hex.
pub fn random_token() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(hex::encode(b))
}

impl Proxy {
    /// Starts a proxy forwarding with `client`.
    pub async fn start(client: kube::Client) -> std::io::Result<Proxy> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let runs: Runs = Arc::default();
        let app = axum::Router::new().fallback(handle).with_state(Shared {
            client,
            runs: runs.clone(),
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the Ansible runs' API proxy stopped");
            }
        });
        Ok(Proxy { addr, runs, task })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Registers a run reconciling `owner` (None: nothing is injected).
    pub fn register(&self, owner: Option<Owner>) -> std::io::Result<RunScope> {
        let token = random_token()?;
        lock(&self.runs).insert(
            token.clone(),
            Scope {
                owner,
                touched: Touched::new(),
            },
        );
        Ok(RunScope {
            token,
            runs: self.runs.clone(),
        })
    }
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "message": message, "reason": reason, "code": code.as_u16()});
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// Where a POST creates an object: `(group, namespace)` when the path is a collection of a
/// (namespaced or cluster-scoped) resource, None for objects and subresources.
pub fn create_target(path: &str) -> Option<(String, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] => ("", rest),
        ["apis", g, _v, rest @ ..] => (*g, rest),
        _ => return None,
    };
    match rest {
        [_resource] => Some((group.to_string(), None)),
        ["namespaces", ns, _resource] => Some((group.to_string(), Some(ns.to_string()))),
        _ => None,
    }
}

/// Whether a path names an object or collection (not a subresource) — its writes count as
/// touching the body's kind.
fn is_object_path(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.as_slice() {
        ["api", _v, rest @ ..] => rest,
        ["apis", _g, _v, rest @ ..] => rest,
        _ => return false,
    };
    match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest.len() <= 2,
        rest => rest.len() <= 2,
    }
}

/// Injects the owner into a create body (see the module doc); the body unchanged when it
/// is not a JSON object.
pub fn inject(owner: &Owner, group: &str, namespace: Option<&str>, body: &[u8]) -> Option<Vec<u8>> {
    if group == "authentication.k8s.io" || group == "authorization.k8s.io" {
        return None;
    }
    let mut obj: Value = serde_json::from_slice(body).ok()?;
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if let (Some(ns), Some(m)) = (namespace, meta.as_object_mut()) {
        m.entry("namespace").or_insert_with(|| json!(ns));
    }
    owner.inject(&mut obj, namespace.is_some());
    serde_json::to_vec(&obj).ok()
}

/// An update (PUT, PATCH) of one of the run's owner's children, with the owner's current
/// shard labels put in the write when the live object lacks them (its CR moved to another
/// member since it was created); None to forward the body as sent. It costs a GET of the
/// object, made only while the owner is sharded. A server-side apply carries them on every
/// write to a child (else the role's next apply, without them, would remove them again).
async fn relabel_update(
    client: &kube::Client,
    owner: &Owner,
    parts: &http::request::Parts,
    path: &str,
    body: &[u8],
) -> Option<Vec<u8>> {
    if !is_object_path(path) || create_target(path).is_some() {
        return None;
    }
    let req = Request::get(path).body(Vec::new()).ok()?;
    let live: Value = client.request(req).await.ok()?;
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    relabel(owner, &parts.method, content_type, body, &live)
}

/// The body of an update of `live` with its owner's shard labels (see [`relabel_update`]):
/// a PUT's object and a merge or strategic-merge patch get them as fields, a JSON patch gets
/// `add` operations, a server-side apply (as JSON) gets them whenever `live` is a child.
/// None when nothing is to add or the body is not JSON of the expected shape.
pub fn relabel(
    owner: &Owner,
    method: &Method,
    content_type: &str,
    body: &[u8],
    live: &Value,
) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let changed = match (method, media) {
        (&Method::PATCH, "application/json-patch+json") => {
            let ops = owner.label_ops(live);
            let list = v.as_array_mut()?;
            let any = !ops.is_empty();
            list.extend(ops);
            any
        }
        (&Method::PATCH, "application/apply-patch+yaml") => {
            let always = owner.owns(live).then(|| {
                let mut l = live.clone();
                // Treated as lacking them, so they are put in every apply of a child.
                if let Some(m) = l.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                    m.remove("labels");
                }
                l
            });
            always.is_some_and(|l| owner.label_update(&mut v, &l))
        }
        (
            &Method::PATCH,
            "application/merge-patch+json" | "application/strategic-merge-patch+json",
        )
        | (&Method::PUT, _) => owner.label_update(&mut v, live),
        _ => false,
    };
    changed.then(|| serde_json::to_vec(&v).ok()).flatten()
}

/// Hop-by-hop and per-connection headers that are not forwarded.
const DROP: &[&str] = &[
    "host",
    "authorization",
    "connection",
    "content-length",
    "transfer-encoding",
    "accept-encoding",
    "keep-alive",
    "upgrade",
    "proxy-authorization",
];

async fn handle(State(s): State<Shared>, req: Request<Body>) -> Response {
    let Some(token) = bearer(req.headers()).map(String::from) else {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "no run token");
    };
    let owner = match lock(&s.runs).get(&token) {
        Some(scope) => scope.owner.clone(),
        None => {
            return status(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "unknown or expired run token",
            )
        }
    };
    let (mut parts, body) = req.into_parts();
    if parts.headers.contains_key(http::header::UPGRADE) {
        return upgrade(&s, &mut parts).await;
    }
    let path = parts.uri.path().to_string();
    let pq = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| path.clone());
    let mut body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b.to_vec(),
        Err(e) => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                &e.to_string(),
            )
        }
    };
    let writes = matches!(parts.method, Method::POST | Method::PUT | Method::PATCH);
    if parts.method == Method::POST {
        if let (Some((group, ns)), Some(owner)) = (create_target(&path), &owner) {
            if let Some(b) = inject(owner, &group, ns.as_deref(), &body) {
                body = b;
            }
        }
    }
    if matches!(parts.method, Method::PUT | Method::PATCH) {
        if let Some(owner) = owner.as_ref().filter(|o| !o.child_labels.is_empty()) {
            if let Some(b) = relabel_update(&s.client, owner, &parts, &path, &body).await {
                body = b;
            }
        }
    }
    if writes && is_object_path(&path) {
        if let Ok(v) = serde_json::from_slice::<Value>(&body) {
            if let (Some(av), Some(k)) = (v["apiVersion"].as_str(), v["kind"].as_str()) {
                let event = k == "Event" && matches!(av, "v1" | "events.k8s.io/v1");
                if let Some(scope) = lock(&s.runs).get_mut(&token).filter(|_| !event) {
                    scope.touched.insert((av.to_string(), k.to_string()));
                }
            }
        }
    }
    let mut out = Request::builder().method(parts.method).uri(pq);
    for (k, v) in &parts.headers {
        if !DROP.contains(&k.as_str()) {
            out = out.header(k, v);
        }
    }
    let out = match out.body(kube::client::Body::from(body)) {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
    };
    match s.client.send(out).await {
        Ok(resp) => {
            let (p, b) = resp.into_parts();
            let mut r = Response::new(Body::new(b));
            *r.status_mut() = p.status;
            for (k, v) in &p.headers {
                if !DROP.contains(&k.as_str()) {
                    r.headers_mut().append(k, v.clone());
                }
            }
            r.headers_mut()
                .insert("x-bosun-proxy", HeaderValue::from_static("1"));
            r
        }
        Err(e) => status(
            StatusCode::BAD_GATEWAY,
            "ServiceUnavailable",
            &e.to_string(),
        ),
    }
}

/// A connection upgrade (`pods/exec`, `pods/attach`, `pods/portforward`: `k8s_exec` and
/// `k8s_cp` use WebSockets), passed through as ansible-operator's proxy (Go's reverse proxy)
/// passes it: the upgrade request goes to the API server with the operator's credentials,
/// its answer goes back to the role, and once both sides switched protocols the bytes are
/// copied both ways until either closes. Nothing is injected or recorded: no object is
/// written.
async fn upgrade(s: &Shared, parts: &mut http::request::Parts) -> Response {
    let Some(from_role) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "a connection upgrade over a connection that cannot be upgraded",
        );
    };
    let pq = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| parts.uri.path().to_string());
    let mut out = Request::builder().method(parts.method.clone()).uri(pq);
    for (k, v) in &parts.headers {
        // The upgrade's own headers go through; the credentials are the operator's.
        if !matches!(
            k.as_str(),
            "host" | "authorization" | "proxy-authorization" | "content-length" | "keep-alive"
        ) {
            out = out.header(k, v);
        }
    }
    let out = match out.body(kube::client::Body::empty()) {
        Ok(r) => r,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
    };
    let mut resp = match s.client.send(out).await {
        Ok(r) => r,
        Err(e) => {
            return status(
                StatusCode::BAD_GATEWAY,
                "ServiceUnavailable",
                &e.to_string(),
            )
        }
    };
    let switched = resp.status() == StatusCode::SWITCHING_PROTOCOLS;
    let from_server = switched.then(|| hyper::upgrade::on(&mut resp));
    let (p, b) = resp.into_parts();
    let mut r = Response::new(if switched {
        Body::empty()
    } else {
        Body::new(b)
    });
    *r.status_mut() = p.status;
    for (k, v) in &p.headers {
        if switched || !DROP.contains(&k.as_str()) {
            r.headers_mut().append(k, v.clone());
        }
    }
    if let Some(from_server) = from_server {
        tokio::spawn(async move {
            let (role, server) = match tokio::try_join!(from_role, from_server) {
                Ok(both) => both,
                Err(e) => {
                    tracing::debug!(error = %e, "proxied connection upgrade");
                    return;
                }
            };
            let mut role = hyper_util::rt::TokioIo::new(role);
            let mut server = hyper_util::rt::TokioIo::new(server);
            if let Err(e) = tokio::io::copy_bidirectional(&mut role, &mut server).await {
                tracing::debug!(error = %e, "proxied upgraded connection");
            }
        });
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(ns: Option<&str>) -> Owner {
        Owner::from_object(&json!({"apiVersion": "test.bosun.dev/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns, "uid": "u-1"}}))
        .expect("owner")
    }

    #[test]
    fn creates_are_recognised_by_path() {
        assert_eq!(
            create_target("/api/v1/namespaces/a/configmaps"),
            Some(("".into(), Some("a".into())))
        );
        assert_eq!(
            create_target("/apis/apps/v1/namespaces/a/deployments"),
            Some(("apps".into(), Some("a".into())))
        );
        assert_eq!(create_target("/api/v1/namespaces"), Some(("".into(), None)));
        assert_eq!(
            create_target("/apis/rbac.authorization.k8s.io/v1/clusterroles"),
            Some(("rbac.authorization.k8s.io".into(), None))
        );
        // Objects and subresources are not creates on a collection.
        assert_eq!(create_target("/api/v1/namespaces/a"), None);
        assert_eq!(create_target("/api/v1/namespaces/a/pods/p/eviction"), None);
        assert_eq!(
            create_target("/apis/x/v1/namespaces/a/widgets/w/status"),
            None
        );
        assert_eq!(create_target("/version"), None);
    }

    #[test]
    fn owner_references_in_the_owners_namespace_annotations_elsewhere() {
        let o = owner(Some("a"));
        let same = inject(
            &o,
            "",
            Some("a"),
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#,
        )
        .expect("injected");
        let v: Value = serde_json::from_slice(&same).expect("json");
        assert_eq!(
            v["metadata"]["ownerReferences"],
            json!([{"apiVersion": "test.bosun.dev/v1", "kind": "Widget", "name": "w", "uid": "u-1"}])
        );
        assert_eq!(v["metadata"]["namespace"], "a");
        let other = inject(
            &o,
            "",
            Some("b"),
            br#"{"kind":"ConfigMap","metadata":{"name":"c"}}"#,
        )
        .expect("injected");
        let v: Value = serde_json::from_slice(&other).expect("json");
        assert!(v["metadata"].get("ownerReferences").is_none());
        assert_eq!(
            v["metadata"]["annotations"]["operator-sdk/primary-resource"],
            "a/w"
        );
        assert_eq!(
            v["metadata"]["annotations"]["operator-sdk/primary-resource-type"],
            "Widget.test.bosun.dev"
        );
        // Cluster-scoped child of a namespaced owner: annotations.
        let cluster = inject(
            &o,
            "rbac.authorization.k8s.io",
            None,
            br#"{"kind":"ClusterRole","metadata":{"name":"c"}}"#,
        )
        .expect("injected");
        let v: Value = serde_json::from_slice(&cluster).expect("json");
        assert!(v["metadata"].get("ownerReferences").is_none());
        // A cluster-scoped owner owns anything.
        let c = owner(None);
        let v: Value = serde_json::from_slice(
            &inject(
                &c,
                "",
                Some("b"),
                br#"{"kind":"ConfigMap","metadata":{"name":"c"}}"#,
            )
            .expect("injected"),
        )
        .expect("json");
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "u-1");
        // Reviews and non-JSON bodies are left alone.
        assert!(inject(&o, "authorization.k8s.io", Some("a"), b"{}").is_none());
        assert!(inject(&o, "", Some("a"), b"\x0a\x0bk8s").is_none());
    }

    #[test]
    fn a_create_carries_its_owners_shard_label() {
        let labels = bosun_runtime::shard::child_labels(Some(
            &[
                ("shard.bosun.dev/widgets".to_string(), "r1".to_string()),
                ("drain.bosun.dev/widgets".to_string(), "r1".to_string()),
            ]
            .into(),
        ));
        let o = owner(Some("a")).labelling(labels);
        let body = inject(
            &o,
            "",
            Some("a"),
            br#"{"kind":"ConfigMap","metadata":{"name":"c","labels":{"app":"x"}}}"#,
        )
        .expect("injected");
        let v: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(
            v["metadata"]["labels"],
            json!({"app": "x", "shard.bosun.dev/widgets": "r1"})
        );
        // Unsharded (no labels in scope): the body keeps only its own.
        let plain = owner(Some("a")).labelling(bosun_runtime::shard::labels_in_scope());
        let body = inject(
            &plain,
            "",
            Some("a"),
            br#"{"kind":"ConfigMap","metadata":{"name":"c","labels":null}}"#,
        )
        .expect("injected");
        let v: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["metadata"]["labels"], Value::Null);
    }

    #[test]
    fn an_update_of_a_child_carries_its_owners_current_shard() {
        let o = owner(Some("a"))
            .labelling([("shard.bosun.dev/widgets".to_string(), "r2".to_string())].into());
        let child = json!({"metadata": {"name": "c", "labels": {"shard.bosun.dev/widgets": "r1"},
            "ownerReferences": [{"uid": "u-1"}]}});
        let body = |m: &Method, ct: &str, b: &str| {
            relabel(&o, m, ct, b.as_bytes(), &child)
                .map(|b| serde_json::from_slice::<Value>(&b).expect("json"))
        };
        let labelled = json!({"shard.bosun.dev/widgets": "r2"});
        for ct in [
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ] {
            let v = body(&Method::PATCH, ct, r#"{"data":{"k":"v"}}"#).expect(ct);
            assert_eq!(v["metadata"]["labels"], labelled, "{ct}");
            assert_eq!(v["data"]["k"], "v", "{ct}");
        }
        let put = body(
            &Method::PUT,
            "application/json",
            r#"{"metadata":{"name":"c"}}"#,
        )
        .expect("put");
        assert_eq!(put["metadata"]["labels"], labelled);
        let ops = body(
            &Method::PATCH,
            "application/json-patch+json",
            r#"[{"op":"add","path":"/data/k","value":"v"}]"#,
        )
        .expect("json patch");
        assert_eq!(ops.as_array().map(Vec::len), Some(2));
        assert_eq!(ops[1]["path"], "/metadata/labels/shard.bosun.dev~1widgets");

        // On its member already: a merge patch is left as sent, an apply still carries them.
        let settled = json!({"metadata": {"labels": {"shard.bosun.dev/widgets": "r2"},
            "ownerReferences": [{"uid": "u-1"}]}});
        let merge = br#"{"data":{}}"#;
        assert!(relabel(
            &o,
            &Method::PATCH,
            "application/merge-patch+json",
            merge,
            &settled
        )
        .is_none());
        assert!(relabel(
            &o,
            &Method::PATCH,
            "application/apply-patch+yaml",
            merge,
            &settled
        )
        .is_some());
        // Not a child, or not JSON: left alone.
        let foreign = json!({"metadata": {"name": "x"}});
        assert!(relabel(&o, &Method::PUT, "application/json", merge, &foreign).is_none());
        assert!(relabel(
            &o,
            &Method::PATCH,
            "application/apply-patch+yaml",
            b"data: {}",
            &child
        )
        .is_none());
    }

    #[test]
    fn object_paths_exclude_subresources() {
        assert!(is_object_path("/api/v1/namespaces/a/configmaps"));
        assert!(is_object_path("/api/v1/namespaces/a/configmaps/c"));
        assert!(is_object_path("/apis/apps/v1/namespaces/a/deployments/d"));
        assert!(is_object_path("/api/v1/namespaces/a"));
        assert!(!is_object_path("/apis/x/v1/namespaces/a/widgets/w/status"));
        assert!(!is_object_path(
            "/apis/apps/v1/namespaces/a/deployments/d/scale"
        ));
    }

    #[test]
    fn tokens_are_random_and_long() {
        let a = random_token().expect("token");
        let b = random_token().expect("token");
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
