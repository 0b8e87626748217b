use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::*;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
struct Thing {
    metadata: Meta,
    spec: Spec,
}
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
struct Meta {
    name: String,
}
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
struct Spec {
    size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

fn hooks() -> Webhooks {
    Webhooks::new()
        .validate("/validate", |a: Admission<Thing>| match a.object {
            Some(t) if t.spec.size > 10 => {
                Verdict::deny(format!("size is {}; use 10 or less", t.spec.size))
            }
            _ => Verdict::allow(),
        })
        .mutate("/default", |a: Admission<Thing>| {
            let Some(mut t) = a.object else {
                return Ok(None);
            };
            if t.spec.color.is_none() {
                t.spec.color = Some("blue".into());
            }
            Ok(Some(t))
        })
        .convert("/convert", |mut obj: Value, to: &str| {
            if to != "example.com/v2" {
                return Err(format!("cannot convert to {to}"));
            }
            obj["apiVersion"] = json!(to);
            Ok(obj)
        })
        .max_body_bytes(64 * 1024)
}

fn review(object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "example.com", "version": "v1", "kind": "Thing"},
            "resource": {"group": "example.com", "version": "v1", "resource": "things"},
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object,
        }
    })
}

fn thing(size: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a", "uid": "x"}, "spec": {"size": size}})
}

async fn post(path: &str, body: impl Into<Body>) -> (StatusCode, Vec<u8>) {
    let resp = hooks()
        .router()
        .oneshot(
            Request::post(path)
                .header("content-type", "application/json")
                .body(body.into())
                .expect("request"),
        )
        .await
        .expect("infallible");
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    (status, bytes)
}

async fn post_json(path: &str, body: &Value) -> Value {
    let (status, bytes) = post(path, body.to_string()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    serde_json::from_slice(&bytes).expect("json answer")
}

#[tokio::test]
async fn a_validating_hook_denies_with_its_message_and_the_request_uid() {
    let out = post_json("/validate", &review(thing(11))).await;
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], "u-1");
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 403);
    assert_eq!(
        out["response"]["status"]["message"],
        "size is 11; use 10 or less"
    );
    let out = post_json("/validate", &review(thing(3))).await;
    assert_eq!(out["response"]["allowed"], true);
}

#[tokio::test]
async fn a_mutating_hook_answers_the_json_patch_of_its_change_only() {
    let out = post_json("/default", &review(thing(3))).await;
    assert_eq!(out["response"]["allowed"], true);
    assert_eq!(out["response"]["patchType"], "JSONPatch");
    let b64 = out["response"]["patch"].as_str().expect("patch");
    let bytes: k8s_openapi::ByteString = serde_json::from_value(json!(b64)).expect("base64");
    let patch: Value = serde_json::from_slice(&bytes.0).expect("patch json");
    // metadata.uid and apiVersion are not in `Thing`: the patch leaves them alone.
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/color", "value": "blue"}])
    );
    let mut colored = thing(3);
    colored["spec"]["color"] = json!("red");
    let out = post_json("/default", &review(colored)).await;
    assert_eq!(out["response"]["allowed"], true);
    assert!(out["response"].get("patch").is_none(), "nothing to change");
}

#[tokio::test]
async fn an_object_of_the_wrong_shape_is_denied_naming_the_problem() {
    let out = post_json(
        "/validate",
        &review(json!({"metadata": {"name": "a"}, "spec": {"size": "big"}})),
    )
    .await;
    assert_eq!(out["response"]["uid"], "u-1");
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 400);
    let message = out["response"]["status"]["message"]
        .as_str()
        .expect("message");
    assert!(message.contains("not a valid Thing"), "{message}");
}

#[tokio::test]
async fn malformed_bodies_are_refused_not_crashed_on() {
    for body in ["", "{", "not json", "[1,2]", "{\"request\": 5}", "null"] {
        let (status, text) = post("/validate", body).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            String::from_utf8_lossy(&text)
        );
    }
    // JSON whose uid can be read: answered as a denial the API server shows the user.
    let out = post_json(
        "/validate",
        &json!({"request": {"uid": "u-2", "operation": "EXPLODE"}}),
    )
    .await;
    assert_eq!(out["response"]["uid"], "u-2");
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 400);
    let (status, _) = post("/convert", "{\"request\": {}}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = post("/nowhere", "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_with_413() {
    let mut big = thing(3);
    big["spec"]["color"] = json!("x".repeat(65 * 1024));
    let (status, text) = post("/validate", review(big).to_string()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&text).contains("65536"));
    // Streamed without a length: the limit holds while reading.
    let chunks = futures::stream::iter((0..100).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1024])));
    let (status, _) = post("/validate", Body::from_stream(chunks)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

/// A body that starts and never finishes (a client trickling a declared large body) is cut
/// off with 408 instead of holding its connection and task for ever.
#[tokio::test(start_paused = true)]
async fn a_body_that_never_finishes_is_cut_off() {
    use futures::StreamExt;
    let first = futures::stream::iter([Ok::<_, std::io::Error>(b"{\"request\":".to_vec())]);
    let never = futures::stream::pending::<Result<Vec<u8>, std::io::Error>>();
    let answered = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        post("/validate", Body::from_stream(first.chain(never))),
    )
    .await;
    let (status, text) = answered.expect("answered, not left waiting");
    assert_eq!(
        status,
        StatusCode::REQUEST_TIMEOUT,
        "{}",
        String::from_utf8_lossy(&text)
    );
}

#[tokio::test]
async fn conversion_converts_every_object_or_fails_the_review() {
    let request = |to: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {
            "uid": "c-1", "desiredAPIVersion": to,
            "objects": [thing(1), thing(2)]
        }})
    };
    let out = post_json("/convert", &request("example.com/v2")).await;
    assert_eq!(out["kind"], "ConversionReview");
    assert_eq!(out["response"]["uid"], "c-1");
    assert_eq!(out["response"]["result"]["status"], "Success");
    let objs = out["response"]["convertedObjects"]
        .as_array()
        .expect("objects");
    assert_eq!(objs.len(), 2);
    assert!(objs.iter().all(|o| o["apiVersion"] == "example.com/v2"));
    let out = post_json("/convert", &request("example.com/v9")).await;
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert_eq!(
        out["response"]["result"]["message"],
        "cannot convert to example.com/v9"
    );
}

/// The certificate the server presents, verified against `ca_pem` for 127.0.0.1.
async fn served_cert(addr: std::net::SocketAddr, ca_pem: &[u8]) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(c.expect("ca pem")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("ip name");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the CA bundle verifies the served certificate for the IP");
    tls.get_ref().1.peer_certificates().expect("certs")[0].to_vec()
}

/// POSTs `body` to `path` over HTTPS (trusting `ca_pem`) and returns the status code and body.
async fn https_post(
    addr: std::net::SocketAddr,
    ca_pem: &[u8],
    path: &str,
    body: &str,
) -> (u16, String) {
    try_https_post(addr, ca_pem, path, body)
        .await
        .expect("handshake")
}

/// [`https_post`], None when the TLS handshake does not complete.
async fn try_https_post(
    addr: std::net::SocketAddr,
    ca_pem: &[u8],
    path: &str,
    body: &str,
) -> Option<(u16, String)> {
    use rustls_pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(c.expect("ca pem")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("ip name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .ok()?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    // A close without TLS close_notify is an error after the data; the data is what counts.
    let _ = tls.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Some((code, text))
}

/// Hostile connections — not TLS at all, a handshake that never comes, a malformed review
/// over TLS — are each answered or dropped, and the server goes on serving.
#[tokio::test]
async fn hostile_connections_are_dropped_and_the_server_keeps_serving() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certs"));
    let ca = certs.ca_pem().expect("generated CA").as_bytes().to_vec();
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = serve(
        hooks(),
        "127.0.0.1:0".parse().expect("addr"),
        certs,
        stop.clone(),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr;
    // Plain HTTP on the TLS port: the handshake fails and the connection is closed.
    let mut plain = tokio::net::TcpStream::connect(addr).await.expect("connect");
    plain
        .write_all(b"POST /validate HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let _ = plain.read_to_end(&mut buf).await;
    assert!(
        !String::from_utf8_lossy(&buf).contains("AdmissionReview"),
        "nothing served without TLS"
    );
    // A connection that never says anything does not hold the others up.
    let _idle = tokio::net::TcpStream::connect(addr).await.expect("connect");
    // Malformed, nested past the parser's depth limit, larger than the limit.
    let deep = "[".repeat(60_000);
    let huge = format!("\"{}\"", "x".repeat(70_000));
    for (body, want) in [
        ("{", 400),
        ("null", 400),
        (&deep[..], 400),
        (&huge[..], 413),
    ] {
        let (code, text) = https_post(addr, &ca, "/validate", body).await;
        assert_eq!(code, want, "{text}");
    }
    let (code, text) = https_post(addr, &ca, "/validate", &review(thing(11)).to_string()).await;
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("use 10 or less"), "{text}");
    stop.cancel();
    serving.stopped().await;
}

#[tokio::test]
async fn a_generated_certificate_is_served_for_the_loopback_ip_and_renewed_in_place() {
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certs"));
    let ca = certs.ca_pem().expect("generated CA").as_bytes().to_vec();
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = serve(
        hooks(),
        "127.0.0.1:0".parse().expect("addr"),
        certs.clone(),
        stop.clone(),
    )
    .await
    .expect("serve");
    let first = served_cert(serving.local_addr, &ca).await;
    assert!(certs.rotate().expect("rotate"));
    let second = served_cert(serving.local_addr, &ca).await;
    assert_ne!(first, second, "a new certificate, by the same CA");
    assert_eq!(second, certs.serving_der());
    stop.cancel();
    serving.stopped().await;
}

#[tokio::test]
async fn certificate_files_are_read_again_only_when_they_change() {
    let dir = tempfile::tempdir().expect("dir");
    // Self-signed, each its own CA: what a cert-manager Issuer would hand out, simplified.
    let issue = || {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        let cert = params.self_signed(&key).expect("cert");
        (cert.pem(), key.serialize_pem())
    };
    let (c1, k1) = issue();
    std::fs::write(dir.path().join("tls.crt"), &c1).expect("write");
    std::fs::write(dir.path().join("tls.key"), &k1).expect("write");
    let certs = Arc::new(Certificates::new(CertSource::dir(dir.path())).expect("files"));
    assert!(certs.ca_pem().is_none(), "cert-manager injects the CA");
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = serve(
        hooks(),
        "127.0.0.1:0".parse().expect("addr"),
        certs.clone(),
        stop.clone(),
    )
    .await
    .expect("serve");
    assert_eq!(
        served_cert(serving.local_addr, c1.as_bytes()).await,
        certs.serving_der()
    );
    assert!(
        !certs.rotate().expect("unchanged"),
        "same files: nothing to do"
    );
    // A half-written renewal is not served: the current certificate stays.
    std::fs::write(
        dir.path().join("tls.crt"),
        "-----BEGIN CERTIFICATE-----\ngarbage",
    )
    .expect("write");
    assert!(certs.rotate().is_err());
    assert_eq!(
        served_cert(serving.local_addr, c1.as_bytes()).await,
        certs.serving_der()
    );
    let (c2, k2) = issue();
    std::fs::write(dir.path().join("tls.crt"), &c2).expect("write");
    std::fs::write(dir.path().join("tls.key"), &k2).expect("write");
    assert!(certs.rotate().expect("renewed"));
    let served = served_cert(serving.local_addr, c2.as_bytes()).await;
    assert_eq!(served, certs.serving_der());
    stop.cancel();
    serving.stopped().await;
}

#[tokio::test(start_paused = true)]
async fn a_generated_certificate_is_renewed_at_two_thirds_of_its_validity() {
    let validity = std::time::Duration::from_secs(30 * 24 * 3600);
    let certs = Arc::new(
        Certificates::new(CertSource::Generated {
            hosts: vec!["127.0.0.1".into()],
            validity,
        })
        .expect("certs"),
    );
    assert_eq!(certs.rotate_every(), validity * 2 / 3);
    let first = certs.serving_der();
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(server::rotate(certs.clone(), stop.clone()));
    // Virtual time: the renewal is due at 20 days, not before.
    tokio::time::sleep(validity * 2 / 3 - std::time::Duration::from_secs(1)).await;
    assert_eq!(certs.serving_der(), first, "not renewed early");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_ne!(certs.serving_der(), first, "renewed once due");
    stop.cancel();
    task.await.expect("join");
}

#[tokio::test]
async fn requests_are_measured_per_served_path_and_code_with_controller_runtime_names() {
    let metrics = crate::metrics::Metrics::new();
    let router = hooks().with_metrics(metrics.clone()).router();
    let send = |path: &'static str, body: String| {
        let router = router.clone();
        async move {
            router
                .oneshot(Request::post(path).body(Body::from(body)).expect("request"))
                .await
                .expect("infallible")
                .status()
        }
    };
    assert_eq!(
        send("/validate", review(thing(11)).to_string()).await,
        StatusCode::OK
    );
    assert_eq!(
        send("/validate", review(thing(1)).to_string()).await,
        StatusCode::OK
    );
    assert_eq!(
        send("/validate", "nope".into()).await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(send("/nowhere", "{}".into()).await, StatusCode::NOT_FOUND);
    let text = metrics.encode();
    for line in [
        r#"controller_runtime_webhook_requests_total{webhook="/validate",code="200"} 2"#,
        r#"controller_runtime_webhook_requests_total{webhook="/validate",code="400"} 1"#,
        r#"controller_runtime_webhook_latency_seconds_count{webhook="/validate"} 3"#,
        r#"controller_runtime_webhook_requests_in_flight{webhook="/validate"} 0"#,
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(
        !text.contains("/nowhere"),
        "paths not served are not labels"
    );
}

/// A handler that panics is answered 500 and counted under controller-runtime's name; the
/// server goes on answering.
#[tokio::test]
async fn a_panicking_handler_is_answered_500_and_counted() {
    let metrics = crate::metrics::Metrics::new();
    let router = Webhooks::new()
        .validate("/validate", |a: Admission<Thing>| match a.object {
            Some(t) if t.spec.size == 13 => panic!("the handler's own bug"),
            _ => Verdict::allow(),
        })
        .with_metrics(metrics.clone())
        .router();
    let send = |body: String| {
        let router = router.clone();
        async move {
            router
                .oneshot(
                    Request::post("/validate")
                        .body(Body::from(body))
                        .expect("request"),
                )
                .await
                .expect("infallible")
                .status()
        }
    };
    let before = crate::metrics::webhook_panics();
    assert!(
        metrics.encode().contains(&format!(
            "\ncontroller_runtime_webhook_panics_total {before}\n"
        )),
        "served before any panic"
    );
    assert_eq!(
        send(review(thing(13)).to_string()).await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(send(review(thing(1)).to_string()).await, StatusCode::OK);
    let text = metrics.encode();
    let line = format!("\ncontroller_runtime_webhook_panics_total {}\n", before + 1);
    assert!(text.contains(&line), "{line} in\n{text}");
    assert!(text.contains("# TYPE controller_runtime_webhook_panics counter\n"));
}

/// Starting webhooks whose settings did not parse fails at once with the variable's name,
/// before anything is bound or written (the client points nowhere: it is never used).
#[tokio::test]
async fn a_plan_with_refused_settings_fails_to_start_naming_the_variable() {
    let settings = Settings::from_lookup("X", "c", |k| {
        (k == "X_WEBHOOK_ADDR").then(|| "localhost:9443".to_string())
    })
    .expect("refused settings, not none");
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
    let client = kube::Client::try_from(config).expect("client");
    let plan = Plan {
        webhooks: hooks(),
        listen: settings.listen,
        certificates: settings.certificates(),
        register: None,
        field_manager: "test".into(),
    };
    let e = plan::start(plan, &client, tokio_util::sync::CancellationToken::new())
        .await
        .err()
        .expect("refused");
    assert!(matches!(e, WebhookError::Settings(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("X_WEBHOOK_ADDR=\"localhost:9443\" is not an address"),
        "{e}"
    );
}

/// A body whose first chunk is `first`; `charged` fires when the server asks for more (it
/// has taken `first`, and the permits reading it needs), the rest comes through `more`
/// (dropping the sender ends the body).
fn held_body(
    first: Vec<u8>,
) -> (
    Body,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::mpsc::Sender<Vec<u8>>,
) {
    use futures::StreamExt;
    let (charged_tx, charged) = tokio::sync::oneshot::channel();
    let (more, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let rest = futures::stream::unfold((Some(charged_tx), rx), |(signal, mut rx)| async move {
        if let Some(s) = signal {
            let _ = s.send(());
        }
        rx.recv()
            .await
            .map(|c| (Ok::<_, std::io::Error>(c), (None, rx)))
    });
    let body = futures::stream::iter([Ok::<_, std::io::Error>(first)]).chain(rest);
    (Body::from_stream(body), charged, more)
}

async fn send(router: &axum::Router, path: &str, body: Body) -> (StatusCode, String) {
    let resp = router
        .clone()
        .oneshot(Request::post(path).body(body).expect("request"))
        .await
        .expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).to_string())
}

/// Reviews past the cap are refused at once with 503 instead of waiting in a queue that
/// grows with the attack; the slots come back when the reviews holding them finish.
#[tokio::test]
async fn reviews_beyond_the_in_flight_cap_get_503_at_once() {
    let router = hooks().max_in_flight(2).router();
    let whole = review(thing(3)).to_string().into_bytes();
    let (head, tail) = whole.split_at(10);
    let mut held = Vec::new();
    for _ in 0..2 {
        let (body, charged, more) = held_body(head.to_vec());
        let r = router.clone();
        let task = tokio::spawn(async move { send(&r, "/validate", body).await });
        charged.await.expect("the review is being read");
        held.push((task, more));
    }
    let (status, text) = send(&router, "/validate", Body::from(whole.clone())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(text.contains("2 reviews in flight"), "{text}");
    // Unknown paths cost nothing and are answered as before.
    let (status, _) = send(&router, "/nowhere", Body::from("{}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for (task, more) in held {
        more.send(tail.to_vec()).await.expect("send the rest");
        drop(more);
        let (status, text) = task.await.expect("join");
        assert_eq!(status, StatusCode::OK, "{text}");
    }
    let (status, text) = send(&router, "/validate", Body::from(whole)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

/// The bytes buffered by all reviews at once are bounded too (each alone may be under its
/// own limit): one past the budget is refused with 503 while reading, not after.
#[tokio::test]
async fn bodies_beyond_the_shared_byte_budget_get_503() {
    let router = hooks().buffer_budget_bytes(100 * 1024).router();
    let mut big = thing(3);
    big["spec"]["color"] = json!("x".repeat(60 * 1024));
    let whole = review(big).to_string().into_bytes();
    let (head, tail) = whole.split_at(whole.len() - 10);
    let (body, charged, more) = held_body(head.to_vec());
    let r = router.clone();
    let first = tokio::spawn(async move { send(&r, "/validate", body).await });
    charged
        .await
        .expect("the first review's bytes are buffered");
    let (status, text) = send(&router, "/validate", Body::from(whole.clone())).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(text.contains("102400 bytes"), "{text}");
    more.send(tail.to_vec()).await.expect("send the rest");
    drop(more);
    let (status, text) = first.await.expect("join");
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = send(&router, "/validate", Body::from(whole)).await;
    assert_eq!(status, StatusCode::OK, "the budget is returned: {text}");
}

/// A handler that does not answer in time gets its review answered 503 (the API server then
/// applies the hook's failure policy); while it still runs it keeps its slot, so stuck
/// handlers cannot pile up past the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_its_timeout_is_answered_503_and_keeps_its_slot() {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let router = Webhooks::new()
        .validate("/slow", move |_: Admission<Thing>| {
            let _ = gate.lock().map(|g| g.recv());
            Verdict::allow()
        })
        .max_in_flight(1)
        .request_timeout(std::time::Duration::from_millis(200))
        .router();
    let body = || Body::from(review(thing(1)).to_string());
    // Its own task: a handler blocking the task that polls it must not block the test.
    let r = router.clone();
    let first = tokio::spawn(async move { send(&r, "/slow", body()).await });
    // A guard against the old behaviour (no timeout: never answered), not the assertion.
    let Ok(answered) = tokio::time::timeout(std::time::Duration::from_secs(60), first).await else {
        let _ = release.send(());
        panic!("not answered while the handler is stuck");
    };
    let (status, text) = answered.expect("join");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(text.contains("did not answer within 200ms"), "{text}");
    let (status, text) = send(&router, "/slow", body()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(
        text.contains("1 reviews in flight"),
        "the stuck one holds the slot: {text}"
    );
    release.send(()).expect("release the first");
    release.send(()).expect("let the next through");
    // Wait for the slot to come back (the stuck handler's thread finishing), then get served.
    let mut last = String::new();
    for _ in 0..500 {
        let (status, text) = send(&router, "/slow", body()).await;
        if status == StatusCode::OK {
            return;
        }
        last = text;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the slot never came back: {last}");
}

/// Connections past the cap are closed at once, before any TLS work; the server keeps
/// serving once connections go away.
#[tokio::test]
async fn connections_beyond_the_cap_are_closed_before_the_handshake() {
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certs"));
    let ca = certs.ca_pem().expect("generated CA").as_bytes().to_vec();
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = serve(
        hooks().max_connections(2),
        "127.0.0.1:0".parse().expect("addr"),
        certs,
        stop.clone(),
    )
    .await
    .expect("serve");
    let addr = serving.local_addr;
    let idle1 = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let _idle2 = tokio::net::TcpStream::connect(addr).await.expect("connect");
    // The server accepts in order: these two hold the slots when the third arrives.
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
        roots.add(c.expect("ca pem")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("ip name");
    let third = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp),
    )
    .await
    .expect("answered, not left to the handshake timeout");
    assert!(third.is_err(), "the third connection is closed, not served");
    drop(idle1);
    let body = review(thing(11)).to_string();
    let mut last = (0, String::new());
    for _ in 0..500 {
        last = try_https_post(addr, &ca, "/validate", &body)
            .await
            .unwrap_or_default();
        if last.0 == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(last.0, 200, "served once a slot is free: {}", last.1);
    stop.cancel();
    serving.stopped().await;
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// The audit's flood: 64 reviews of almost 4 MiB at once, with the default limits. Every one
/// is answered (admitted, or 503 at once), never more than the cap are being handled at a
/// time, and the bodies buffered together stay within the budget, so memory does not grow
/// with the number of clients. The peak resident growth is printed (the process's, so only
/// indicative when other tests run beside it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_large_reviews_is_answered_within_the_limits() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (n, m) = (now.clone(), most.clone());
    let router = Webhooks::new()
        .validate("/validate", move |a: Admission<Thing>| {
            let inside = n.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(inside, Ordering::SeqCst);
            let v = match a.object {
                Some(t) if t.spec.size > 10 => Verdict::deny("too big"),
                _ => Verdict::allow(),
            };
            n.fetch_sub(1, Ordering::SeqCst);
            v
        })
        .router();
    let mut big = thing(3);
    big["spec"]["color"] = json!("x".repeat(4_000_000));
    let body = axum::body::Bytes::from(review(big).to_string());
    assert!(body.len() < DEFAULT_MAX_BODY);
    let before = peak_rss_kib();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (r, b) = (router.clone(), body.clone());
        tasks.spawn(async move { send(&r, "/validate", Body::from(b)).await });
    }
    let (mut admitted, mut busy) = (0, 0);
    while let Some(done) = tasks.join_next().await {
        let (status, text) = done.expect("join");
        match status {
            StatusCode::OK => admitted += 1,
            StatusCode::SERVICE_UNAVAILABLE => busy += 1,
            other => panic!("{other}: {text}"),
        }
    }
    let grown = peak_rss_kib().saturating_sub(before);
    eprintln!("64 reviews of {} bytes: {admitted} admitted, {busy} refused 503; peak RSS grew {grown} KiB", body.len());
    assert_eq!(admitted + busy, 64);
    assert!(
        admitted > 0 && busy > 0,
        "{admitted} admitted, {busy} refused"
    );
    assert!(most.load(Ordering::SeqCst) <= server::DEFAULT_MAX_IN_FLIGHT);
}
