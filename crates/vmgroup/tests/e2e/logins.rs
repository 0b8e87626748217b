//! vCenter connections are per Secret: one whose vCenter never answers holds up only the
//! groups that use it.
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::support::{env_full, Namespaces};

const TEMPLATE: &str = "DC0_H0_VM0";

/// Namespace `vc-slow`'s Secret names a server that accepts the connection and never answers
/// (its connect waits for the 600 s request bound); namespace `vc-fast`'s names vcsim. The
/// fast group runs while the slow group's connect is still hanging: no lock is held across
/// a connect for other Secrets.
#[tokio::test]
async fn a_hanging_vcenter_holds_up_only_the_groups_of_its_secret() {
    let mut env = env_full(Namespaces::Named(&["vc-fast", "vc-slow"]), None, &[]).await;
    env.halt().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (accepted, mut seen) = watch::channel(0usize);
    let hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            open.push(sock);
            accepted.send_replace(open.len());
        }
    });
    env.put_secret("vc-slow", &format!("https://127.0.0.1:{port}/sdk"))
        .await;
    env.settings.secret_namespace = None;
    env.settings.request_timeout = std::time::Duration::from_secs(600);
    env.start_operator().await;

    env.create_in("vc-slow", "slow", 1, TEMPLATE, serde_json::json!({}), &[])
        .await;
    seen.wait_for(|n| *n >= 1)
        .await
        .expect("the slow group's connect reached the silent server");
    env.create_in("vc-fast", "fast", 1, TEMPLATE, serde_json::json!({}), &[])
        .await;
    env.wait_status("fast", "RUNNING", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    let slow = env.api_in("vc-slow").get("slow").await.expect("slow");
    assert!(
        slow.status.is_none(),
        "the slow group is still connecting: {:?}",
        slow.status
    );
    hold.abort();
    env.stop().await;
}
