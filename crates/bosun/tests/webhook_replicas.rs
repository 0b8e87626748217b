//! Two replicas of an operator with a generated webhook certificate behind a Service, on the
//! real kube-apiserver: what `bosun manifests` runs by default (2 replicas) when the webhooks
//! are on without cert-manager.
//!
//! Each replica starts its webhooks the way the manager does ([`plan::start`], before the
//! lease: a standby answers reviews too), from the same [`Settings`], and writes the
//! configuration with its CA. The configuration holds one hook per running replica, both
//! `Fail`, so every review reaches every replica: with a CA per replica the last writer's
//! `caBundle` fails TLS with the other and every write is refused (what a Service spreading
//! reviews over the replicas does to about half of them). With the shared CA both verify, the
//! bundle is the same whichever replica wrote it, and a replica restarted later still
//! serves with it.
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bosun_runtime::webhook::config::{self, CaInjection, FailurePolicy, Hook, Target};
use bosun_runtime::webhook::plan::{self, Configurations, Plan, Register};
use bosun_runtime::webhook::{Admission, Serving, Settings, Verdict, Webhooks};
use bosun_testenv::{eventually, shared, test_namespace};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Client;
use tokio_util::sync::CancellationToken;

const SELECT: &str = "bosun.dev/webhook-replicas-test";

/// Replica `id` refuses the names `refused-<id>-*` and admits every other: a refusal of
/// such a name proves the API server called that replica, through the configuration as
/// last written.
fn hooks(id: &'static str) -> Webhooks {
    let mine = format!("refused-{id}-");
    Webhooks::new().validate("/validate", move |a: Admission<ConfigMap>| {
        let name = a.object.and_then(|c| c.metadata.name).unwrap_or_default();
        if name.starts_with(&mine) {
            Verdict::deny(format!("{name} is refused: name it something else"))
        } else {
            Verdict::allow()
        }
    })
}

/// One hook per running replica, all with the CA the writing replica holds.
fn register(ns: String, name: String, running: Arc<Mutex<Vec<SocketAddr>>>) -> Register {
    Arc::new(move |ca: &CaInjection, bound: SocketAddr| {
        let mut addrs = running.lock().map(|a| a.clone()).unwrap_or_default();
        if !addrs.contains(&bound) {
            addrs.push(bound);
        }
        let mut v: Option<ValidatingWebhookConfiguration> = None;
        for (i, addr) in addrs.iter().enumerate() {
            let hook = Hook {
                name: format!("r{i}.{ns}.bosun.dev"),
                path: "/validate".into(),
                rules: vec![config::rule("", "v1", &["configmaps"], &["CREATE"])],
                failure_policy: FailurePolicy::Fail,
                namespace_selector: Some(LabelSelector {
                    match_labels: Some([(SELECT.to_string(), ns.clone())].into()),
                    ..Default::default()
                }),
                timeout_seconds: 5,
            };
            let one =
                config::validating(&name, &Target::Url(format!("https://{addr}")), ca, &[hook]);
            match v.as_mut() {
                None => v = Some(one),
                Some(v) => v
                    .webhooks
                    .get_or_insert_with(Vec::new)
                    .extend(one.webhooks.unwrap_or_default()),
            }
        }
        Configurations {
            validating: v,
            ..Default::default()
        }
    })
}

struct Replica {
    serving: Serving,
    stop: CancellationToken,
}

async fn start_replica(
    client: &Client,
    settings: &Settings,
    ns: &str,
    running: &Arc<Mutex<Vec<SocketAddr>>>,
    id: &'static str,
) -> Replica {
    let stop = CancellationToken::new();
    let plan = Plan {
        webhooks: hooks(id),
        listen: settings.listen,
        certificates: settings.certificates(),
        register: Some(register(
            ns.to_string(),
            settings.configuration.clone(),
            running.clone(),
        )),
        field_manager: "bosun-replicas-test".into(),
    };
    let serving = plan::start(plan, client, stop.clone())
        .await
        .expect("webhooks start");
    if let Ok(mut r) = running.lock() {
        r.push(serving.local_addr);
    }
    Replica { serving, stop }
}

fn ca_bundle(v: &ValidatingWebhookConfiguration) -> Vec<Vec<u8>> {
    v.webhooks
        .iter()
        .flatten()
        .map(|w| {
            w.client_config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default()
        })
        .collect()
}

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Waits until the API server calls replica `newest` (it loads a written configuration a
/// moment later; until then it uses the one written before), then creates `n` ConfigMaps:
/// each must be admitted by every replica. Returns the refusals.
async fn creates_refused(cms: &Api<ConfigMap>, newest: &str, n: usize) -> Vec<String> {
    let mut probe = 0;
    let message = eventually(60, || {
        probe += 1;
        let name = format!("refused-{newest}-{probe}");
        async move {
            match cms.create(&PostParams::default(), &cm(&name)).await {
                Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("is refused") => {
                    Some(s.message)
                }
                _ => None,
            }
        }
    })
    .await;
    assert!(
        message.is_some(),
        "replica {newest} never refused its refused-{newest}-* names: the API server never \
         got an answer from it through the configuration"
    );
    let mut refused = Vec::new();
    for i in 0..n {
        if let Err(e) = cms
            .create(&PostParams::default(), &cm(&format!("{newest}-{i}")))
            .await
        {
            refused.push(e.to_string());
        }
    }
    refused
}

#[tokio::test]
async fn two_replicas_with_a_generated_ca_write_one_bundle_and_both_serve_with_it() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = test_namespace(&client, "wh-replicas")
        .await
        .expect("namespace");
    let label = serde_json::json!({"metadata": {"labels": {SELECT: ns}}});
    Api::<Namespace>::all(client.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("label");
    let configuration = format!("bosun-replicas-{ns}");
    let settings = Settings {
        service: Some((ns.clone(), "webhooks".into(), 443)),
        ..Settings::new("127.0.0.1:0".parse().expect("addr"), &configuration)
    };
    let configs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let running = Arc::new(Mutex::new(Vec::new()));

    let first = start_replica(&client, &settings, &ns, &running, "a").await;
    let written = configs
        .get(&configuration)
        .await
        .expect("written by the first");
    let bundle = ca_bundle(&written);
    // Each replica is its own client (its own connections), as two pods are.
    let second_client = cp.client().await.expect("client");
    let second = start_replica(&second_client, &settings, &ns, &running, "b").await;
    let rewritten = configs.get(&configuration).await.expect("rewritten");
    let both = ca_bundle(&rewritten);
    assert_eq!(both.len(), 2, "one hook per replica");
    assert!(
        both.iter().all(|b| Some(b) == bundle.first()),
        "the second replica wrote the bundle the first wrote"
    );
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get(&settings.ca_secret())
        .await
        .expect("the shared CA's Secret");
    let stored = secret
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .map(|b| b.0.clone())
        .expect("ca.crt");
    assert_eq!(bundle.first(), Some(&stored), "the bundle is the stored CA");
    for r in [&first, &second] {
        assert_eq!(
            r.serving
                .certificates
                .ca_pem()
                .map(|p| p.as_bytes().to_vec()),
            Some(stored.clone()),
            "every replica signs with the stored CA"
        );
    }
    let refused = creates_refused(&cms, "b", 20).await;
    assert!(refused.is_empty(), "refused with two replicas: {refused:?}");

    // A replica restarted (a new process: nothing in memory) keeps the bundle.
    first.stop.cancel();
    let gone = first.serving.local_addr;
    first.serving.stopped().await;
    if let Ok(mut r) = running.lock() {
        r.retain(|a| *a != gone);
    }
    let third = start_replica(&client, &settings, &ns, &running, "c").await;
    let after = ca_bundle(&configs.get(&configuration).await.expect("configuration"));
    assert_eq!(after.len(), 2);
    assert!(after.iter().all(|b| *b == stored), "restart: same bundle");
    let refused = creates_refused(&cms, "c", 20).await;
    assert!(refused.is_empty(), "refused after a restart: {refused:?}");

    let _ = configs
        .delete(&configuration, &DeleteParams::default())
        .await;
    for r in [second, third] {
        r.stop.cancel();
        r.serving.stopped().await;
    }
}
