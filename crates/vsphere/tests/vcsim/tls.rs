//! Certificate verification is on unless switched off explicitly.
use bosun_vsphere::{Client, Config, Error, Tls};

use crate::support;

fn other_ca() -> Vec<u8> {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("CA").pem().into_bytes()
}

async fn connect_with(sim: &bosun_testenv::Vcsim, tls: Tls) -> Result<Client, Error> {
    Client::connect(Config::new(&sim.url, &sim.user, &sim.password, tls)).await
}

fn expect_tls_error(result: Result<Client, Error>) -> String {
    match result {
        Err(Error::Tls { message, .. }) => message,
        Err(other) => panic!("expected a TLS error, got {other}"),
        Ok(_) => panic!("expected a TLS error, got a session"),
    }
}

#[tokio::test]
async fn the_default_verifies_against_system_roots_and_refuses_vcsim() {
    let sim = support::start();
    let message = expect_tls_error(connect_with(&sim, Tls::default()).await);
    assert!(message.contains("certificate"), "{message}");
}

#[tokio::test]
async fn a_wrong_ca_is_refused_and_the_right_one_accepted() {
    let sim = support::start();
    let message = expect_tls_error(connect_with(&sim, Tls::CaBundle(other_ca())).await);
    assert!(message.contains("UnknownIssuer"), "{message}");
    let client = connect_with(&sim, Tls::CaBundle(sim.ca_pem().as_bytes().to_vec()))
        .await
        .expect("the right CA");
    assert_eq!(client.counts().get("Login"), 1);
}

#[tokio::test]
async fn insecure_mode_accepts_an_unknown_certificate() {
    let sim = support::start();
    connect_with(&sim, Tls::Insecure)
        .await
        .expect("insecure mode connects");
}

#[tokio::test]
async fn nothing_listening_is_unreachable_not_tls() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let config = Config::new(
        &format!("https://127.0.0.1:{port}/sdk"),
        "u",
        "p",
        Tls::Insecure,
    );
    match Client::connect(config).await {
        Err(Error::Unreachable { .. }) => {}
        Err(other) => panic!("expected unreachable, got {other}"),
        Ok(_) => panic!("nothing listens there"),
    }
}
