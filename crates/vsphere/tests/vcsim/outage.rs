//! A vCenter that stops answering is `Unreachable` (bounded by the request timeout), and the
//! same client carries on once it answers again.
use std::time::Duration;

use bosun_vsphere::{Client, Error};

use crate::support::{self, TEMPLATE};

#[tokio::test]
async fn a_hung_server_is_unreachable_and_the_client_recovers() {
    let sim = support::start();
    let mut config = support::config(&sim);
    config.request_timeout = Duration::from_secs(1);
    let client = Client::connect(config).await.expect("connects");

    sim.pause().expect("pause vcsim");
    let err = client
        .find_by_inventory_path(TEMPLATE)
        .await
        .expect_err("nothing answers");
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert_eq!(err.category(), "unreachable");

    sim.resume().expect("resume vcsim");
    let found = client
        .find_by_inventory_path(TEMPLATE)
        .await
        .expect("answers again");
    assert!(found.is_some());
    assert_eq!(client.counts().get("Login"), 1, "the session survived");
}
