//! Login, bad login, logout, and a session ended behind the client's back.
use bosun_vsphere::{Client, Config, FaultKind, Tls};

use crate::support::{self, TEMPLATE};

#[tokio::test]
async fn logs_in_and_out() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    assert_eq!(client.counts().get("Login"), 1);
    assert!(!client.session_key().await.expect("session key").is_empty());
    client.logout().await.expect("logout");
    assert_eq!(client.counts().get("Logout"), 1);
}

#[tokio::test]
async fn a_wrong_password_is_invalid_login_and_never_shown() {
    let sim = support::start();
    let config = Config::new(
        &sim.url,
        &sim.user,
        "not-the-password",
        Tls::CaBundle(sim.ca_pem().as_bytes().to_vec()),
    );
    assert!(!format!("{config:?}").contains("not-the-password"));
    let err = match Client::connect(config).await {
        Err(e) => e,
        Ok(_) => panic!("a wrong password must not log in"),
    };
    assert_eq!(err.fault_kind(), Some(&FaultKind::InvalidLogin), "{err}");
    assert_eq!(err.category(), "invalid_login");
    assert!(!err.to_string().contains("not-the-password"), "{err}");
}

#[tokio::test]
async fn a_session_ended_elsewhere_is_renewed_once_and_the_call_succeeds() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let admin = support::connect(&sim).await;

    // A plain method call (a SOAP fault NotAuthenticated).
    let key = client.session_key().await.expect("session key");
    admin.terminate_session(&key).await.expect("terminate");
    let template = client
        .find_by_inventory_path(TEMPLATE)
        .await
        .expect("found after logging in again")
        .expect("the template exists");
    assert_eq!(client.counts().get("Login"), 2);
    assert_eq!(client.counts().get("FindByInventoryPath"), 2, "one retry");

    // A property retrieval (NotAuthenticated in the missing set, not as a fault).
    let key = client.session_key().await.expect("session key");
    admin.terminate_session(&key).await.expect("terminate");
    let vms = client
        .vms(&[template])
        .await
        .expect("read after logging in again");
    assert_eq!(client.counts().get("Login"), 3);
    assert!(vms[0].num_cpu.is_some(), "{vms:?}");

    // After an explicit logout, the next call logs in again too.
    client.logout().await.expect("logout");
    client
        .find_by_inventory_path(TEMPLATE)
        .await
        .expect("found after logging in again");
    assert_eq!(client.counts().get("Login"), 4);
}

#[tokio::test]
async fn parallel_calls_on_a_gone_session_log_in_once() {
    let sim = support::start();
    let client = support::connect(&sim).await;
    let admin = support::connect(&sim).await;
    let key = client.session_key().await.expect("session key");
    admin.terminate_session(&key).await.expect("terminate");

    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..5 {
        let c = client.clone();
        calls.spawn(async move { c.find_by_inventory_path(TEMPLATE).await });
    }
    for found in calls.join_all().await {
        assert!(found.expect("found after logging in again").is_some());
    }
    assert_eq!(client.counts().get("Login"), 2, "one re-login for all");
}
