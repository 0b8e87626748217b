//! The webhook server as the real kube-apiserver calls it: a `url:` client config on
//! loopback, the generated CA in `caBundle`, the certificate's IP SAN for 127.0.0.1. Each test
//! registers its configurations for its own namespace only (a namespace selector on a label
//! the test sets), so tests running side by side do not see each other's webhooks.
use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_runtime::webhook::config::{self, CaInjection, FailurePolicy, Hook, Target};
use bosun_runtime::webhook::{
    serve, Admission, CertSource, Certificates, Serving, Verdict, Webhooks,
};
use bosun_testenv::{eventually, shared, test_namespace};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Client;
use tokio_util::sync::CancellationToken;

const SELECT: &str = "bosun.dev/webhook-test";

fn hooks() -> Webhooks {
    Webhooks::new()
        .validate("/validate", |a: Admission<ConfigMap>| {
            let name = a.object.and_then(|c| c.metadata.name).unwrap_or_default();
            if name.starts_with("refused") {
                Verdict::deny(format!("{name} is refused: name it something else"))
            } else {
                Verdict::allow()
            }
        })
        .mutate("/default", |a: Admission<ConfigMap>| {
            let Some(mut cm) = a.object else {
                return Ok(None);
            };
            cm.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("defaulted".into(), "yes".into());
            Ok(Some(cm))
        })
}

struct Running {
    serving: Serving,
    stop: CancellationToken,
    ca: Vec<u8>,
}

async fn start() -> Running {
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certificates"));
    let ca = certs.ca_pem().expect("generated CA").as_bytes().to_vec();
    let stop = CancellationToken::new();
    let serving = serve(
        hooks(),
        "127.0.0.1:0".parse().expect("addr"),
        certs,
        stop.clone(),
    )
    .await
    .expect("serve");
    Running { serving, stop, ca }
}

impl Running {
    async fn stop(self) {
        self.stop.cancel();
        self.serving.stopped().await;
    }
}

/// A namespace carrying the label the test's webhooks select.
async fn namespace(client: &Client, prefix: &str) -> String {
    let ns = test_namespace(client, prefix).await.expect("namespace");
    let patch = serde_json::json!({"metadata": {"labels": {SELECT: ns}}});
    Api::<Namespace>::all(client.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label");
    ns
}

fn hook(ns: &str, name: &str, path: &str, policy: FailurePolicy) -> Hook {
    Hook {
        name: format!("{name}.{ns}.bosun.dev"),
        path: path.into(),
        rules: vec![config::rule(
            "",
            "v1",
            &["configmaps"],
            &["CREATE", "UPDATE"],
        )],
        failure_policy: policy,
        namespace_selector: Some(LabelSelector {
            match_labels: Some([(SELECT.to_string(), ns.to_string())].into()),
            ..Default::default()
        }),
        timeout_seconds: 5,
    }
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

/// Creates ConfigMaps named `refused-probe-N` until the validating webhook refuses one: the
/// API server has loaded the configuration (it watches configurations; they apply a moment
/// after they are written).
async fn wait_validating_active(cms: &Api<ConfigMap>) -> String {
    let mut n = 0;
    eventually(60, || {
        n += 1;
        let name = format!("refused-probe-{n}");
        async move {
            match cms.create(&PostParams::default(), &cm(&name)).await {
                Err(kube::Error::Api(s)) if s.code == 403 => Some(s.message),
                _ => None,
            }
        }
    })
    .await
    .expect("the validating webhook is called")
}

async fn cleanup(client: &Client, name: &str) {
    let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
    let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn the_api_server_applies_a_default_and_a_refusal_with_its_message() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = namespace(&client, "wh-admit").await;
    let wh = start().await;
    let target = Target::Url(format!("https://{}", wh.serving.local_addr));
    let ca = CaInjection::Bundle(wh.ca.clone());
    let name = format!("bosun-test-{ns}");
    let v = config::validating(
        &name,
        &target,
        &ca,
        &[hook(&ns, "validate", "/validate", FailurePolicy::Fail)],
    );
    let m = config::mutating(
        &name,
        &target,
        &ca,
        &[hook(&ns, "default", "/default", FailurePolicy::Fail)],
    );
    config::apply(&client, "bosun-test", Some(&v), Some(&m))
        .await
        .expect("configurations");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let message = wait_validating_active(&cms).await;
    assert!(
        message.contains("is refused: name it something else"),
        "the user reads the webhook's message: {message}"
    );
    // The mutating configuration was written first; wait for it the same way.
    let mut n = 0;
    let labels = eventually(60, || {
        n += 1;
        let cms = cms.clone();
        async move {
            let created = cms
                .create(&PostParams::default(), &cm(&format!("plain-{n}")))
                .await
                .ok()?;
            created
                .metadata
                .labels
                .filter(|l| l.contains_key("defaulted"))
        }
    })
    .await
    .expect("the default is applied");
    assert_eq!(labels.get("defaulted").map(String::as_str), Some("yes"));
    cleanup(&client, &name).await;
    wh.stop().await;
}

/// Under `Fail` the API server refuses what it cannot have reviewed, with its own error; under
/// `Ignore` it admits it.
#[tokio::test]
async fn a_webhook_down_refuses_under_fail_and_admits_under_ignore() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let ns = namespace(&client, "wh-down").await;
        let wh = start().await;
        let target = Target::Url(format!("https://{}", wh.serving.local_addr));
        let name = format!("bosun-test-{ns}");
        let v = config::validating(
            &name,
            &target,
            &CaInjection::Bundle(wh.ca.clone()),
            &[hook(&ns, "validate", "/validate", policy)],
        );
        config::apply(&client, "bosun-test", Some(&v), None)
            .await
            .expect("configuration");
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        wait_validating_active(&cms).await;
        wh.stop().await;
        // What the webhook would refuse, sent while it is down.
        let result = cms
            .create(&PostParams::default(), &cm("refused-while-down"))
            .await;
        match policy {
            FailurePolicy::Fail => match result {
                Err(kube::Error::Api(s)) => {
                    assert!(
                        s.message.contains("failed calling webhook")
                            && s.message.contains(&format!("validate.{ns}.bosun.dev")),
                        "the API server names the webhook it could not call: {s:?}"
                    );
                }
                other => panic!("admitted without its webhook under Fail: {other:?}"),
            },
            FailurePolicy::Ignore => {
                result.expect("admitted without its webhook under Ignore");
            }
        }
        cleanup(&client, &name).await;
    }
}

/// Rotation before expiry as the API server sees it: the serving certificate re-issued by
/// the same CA is accepted with the `caBundle` written at start — nothing re-registered. The
/// server is restarted on its port so that the API server must open a new connection (and
/// handshake with the new certificate) rather than reuse a kept-alive one.
#[tokio::test]
async fn a_renewed_certificate_is_accepted_with_the_bundle_written_at_start() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let ns = namespace(&client, "wh-rotate").await;
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certificates"));
    let ca = certs.ca_pem().expect("generated CA").as_bytes().to_vec();
    let stop = CancellationToken::new();
    let any_port = "127.0.0.1:0".parse().expect("addr");
    let first = serve(hooks(), any_port, certs.clone(), stop.clone())
        .await
        .expect("serve");
    let addr = first.local_addr;
    let name = format!("bosun-test-{ns}");
    let v = config::validating(
        &name,
        &Target::Url(format!("https://{addr}")),
        &CaInjection::Bundle(ca),
        &[hook(&ns, "validate", "/validate", FailurePolicy::Fail)],
    );
    config::apply(&client, "bosun-test", Some(&v), None)
        .await
        .expect("configuration");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    wait_validating_active(&cms).await;

    let before = certs.serving_der();
    assert!(certs.rotate().expect("rotate"), "renewed");
    assert_ne!(certs.serving_der(), before);
    stop.cancel();
    first.stopped().await;
    let stop = CancellationToken::new();
    let second = serve(hooks(), addr, certs.clone(), stop.clone())
        .await
        .expect("serve again on the same port");
    let message = wait_validating_active(&cms).await;
    assert!(message.contains("is refused"), "{message}");
    cleanup(&client, &name).await;
    stop.cancel();
    second.stopped().await;
}
