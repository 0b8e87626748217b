//! The proxy's pause point on the real API server: the k-th committed write of the operator's
//! work (events aside) pauses it with the write committed and its answer held; nothing it
//! sent is lost, and all of it goes on once the scenario resumes it.
use bosun_verify::proxy::Proxy;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::api::{Api, PostParams};
use serde_json::json;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
        .expect("a ConfigMap")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kth_write_of_work_pauses_the_operator_until_resumed() {
    let cp = bosun_testenv::shared().await.expect("control plane");
    let admin = cp.client().await.expect("admin client");
    let ns = bosun_testenv::test_namespace(&admin, "verify-pause")
        .await
        .expect("namespace");
    let proxy = Proxy::start(cp, "verify-pause-test", &["system:masters"])
        .await
        .expect("proxy");
    let through =
        kube::Client::try_from(kube::Config::new(proxy.url().parse().expect("proxy url")))
            .expect("client through the proxy");
    let cms: Api<ConfigMap> = Api::namespaced(through.clone(), &ns);
    let mut hit = proxy.pause_after(2);

    // An event is the operator's diary, not its work: it does not count.
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "diary"},
        "involvedObject": {"kind": "ConfigMap", "name": "first", "namespace": ns},
        "reason": "Test", "message": "not work", "type": "Normal",
    }))
    .expect("an Event");
    Api::<Event>::namespaced(through.clone(), &ns)
        .create(&PostParams::default(), &event)
        .await
        .expect("event");
    cms.create(&PostParams::default(), &config_map("first"))
        .await
        .expect("first write, not paused");
    assert!(hit.try_recv().is_err(), "paused after one write of work");

    let second = {
        let cms = cms.clone();
        tokio::spawn(async move {
            cms.create(&PostParams::default(), &config_map("second"))
                .await
        })
    };
    let w = (&mut hit)
        .await
        .expect("the second write pauses the operator");
    assert_eq!(w.describe(), "POST ConfigMap/second (201)");
    // Committed before the pause: the API server has it, the operator has no answer yet.
    let admin_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    assert!(admin_cms.get_opt("second").await.expect("get").is_some());
    assert!(!second.is_finished(), "the answer is held until resumed");
    assert_eq!(proxy.work_writes(), 2);

    // What it sends while paused waits, and reaches the API server once it is resumed.
    let third = {
        let cms = cms.clone();
        tokio::spawn(async move {
            cms.create(&PostParams::default(), &config_map("third"))
                .await
        })
    };
    proxy.resume();
    second
        .await
        .expect("task")
        .expect("the held answer, once resumed");
    third.await.expect("task").expect("the held request, sent");
    assert!(admin_cms.get_opt("third").await.expect("get").is_some());
    assert_eq!(proxy.work_writes(), 3);
}
