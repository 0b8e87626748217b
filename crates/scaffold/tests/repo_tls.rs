//! `--helm-chart-repo https://…`: the chart is fetched over TLS, verified against the system's
//! trust store (here a test CA given with `SSL_CERT_FILE`, which rustls-native-certs reads),
//! and a server the store does not trust is refused. Its own test binary: the environment
//! variable is set once, before any fetch.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use bosun_scaffold::commands::ApiOptions;

fn archive() -> Vec<u8> {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bosun/tests/charts/greeter");
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.append_dir_all("greeter", chart).unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

/// A self-signed certificate for 127.0.0.1: (PEM, rustls server config).
fn certificate() -> (String, Arc<rustls::ServerConfig>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], der)
    .unwrap();
    (cert.pem(), Arc::new(config))
}

/// Serves `files` over HTTPS on a loopback port; returns the base URL.
fn serve(files: HashMap<String, Vec<u8>>, config: Arc<rustls::ServerConfig>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            // The request head, up to the blank line (a refused handshake ends the read).
            while !head.ends_with(b"\r\n\r\n") {
                match tls.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            let mut line = String::new();
            let _ = BufReader::new(&head[..]).read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let (status, body) = match files.get(&path) {
                Some(b) => ("200 OK", b.clone()),
                None => ("404 Not Found", Vec::new()),
            };
            let _ = tls.write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = tls.write_all(&body);
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    base
}

fn repo(config: Arc<rustls::ServerConfig>) -> String {
    let index = "apiVersion: v1\nentries:\n  greeter:\n  - name: greeter\n    version: 0.1.0\n    urls:\n    - greeter-0.1.0.tgz\n";
    let files = HashMap::from([
        ("/r/index.yaml".to_string(), index.as_bytes().to_vec()),
        ("/r/greeter-0.1.0.tgz".to_string(), archive()),
    ]);
    format!("{}/r", serve(files, config))
}

fn opts(repo: &str) -> ApiOptions {
    ApiOptions {
        helm_chart: Some("greeter".into()),
        helm_chart_repo: Some(repo.to_string()),
        ..Default::default()
    }
}

#[test]
fn https_repositories_are_verified_against_the_trust_store() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted_pem, trusted) = certificate();
    let (_, untrusted) = certificate();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, trusted_pem).unwrap();
    std::env::set_var("SSL_CERT_FILE", &ca);

    let api = bosun_scaffold::helm::api(&opts(&repo(trusted))).unwrap();
    assert!(api
        .files
        .files
        .contains_key("helm-charts/greeter/Chart.yaml"));
    assert_eq!(api.kind, "Greeter");

    let url = repo(untrusted);
    let e = match bosun_scaffold::helm::api(&opts(&url)) {
        Ok(_) => panic!("a certificate outside the trust store was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("is unreachable") && e.contains(&url), "{e}");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
}
