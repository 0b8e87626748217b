//! VmGroup's webhooks on the real kube-apiserver: served over HTTPS on loopback, registered
//! with a `url:` client config and the generated CA. Each test's configurations select only
//! its own namespace (a label it sets), so tests side by side do not see each other's.
use std::sync::Arc;

use bosun_runtime::manager::{Manager, ManagerConfig, Operator, Scope};
use bosun_runtime::webhook::config::{self, CaInjection, Target};
use bosun_runtime::webhook::{serve, CertSource, Certificates, Settings as WebhookSettings};
use bosun_testenv::{eventually, kit, shared, test_namespace};
use bosun_vmgroup::{webhook, Settings, VmGroup, VmGroupOperator};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

const SELECT: &str = "bosun.dev/webhook-test";
const PARENT: &str = "/DC0/vm";

async fn crd(client: &Client) {
    static DONE: OnceCell<()> = OnceCell::const_new();
    DONE.get_or_init(|| async {
        kit::install_crds(client, [VmGroup::crd()])
            .await
            .expect("the VmGroup CRD is served");
    })
    .await;
}

/// A namespace labelled for this test's webhooks, and the selector matching it.
async fn namespace(client: &Client, prefix: &str) -> (String, LabelSelector) {
    crd(client).await;
    let ns = test_namespace(client, prefix).await.expect("namespace");
    let patch = serde_json::json!({"metadata": {"labels": {SELECT: ns}}});
    Api::<Namespace>::all(client.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label");
    let selector = LabelSelector {
        match_labels: Some([(SELECT.to_string(), ns.clone())].into()),
        ..Default::default()
    };
    (ns, selector)
}

fn group(name: &str, template: &str) -> VmGroup {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
        "metadata": {"name": name},
        "spec": {"cpu": 1, "memory": 1, "template": template, "replicas": 1},
    }))
    .expect("vmgroup")
}

/// Creates groups whose template is in their own folder until one is refused: the
/// validating configuration is loaded (the API server picks configurations up a moment
/// after they are written). Returns the refusal.
async fn wait_active(api: &Api<VmGroup>, ns: &str) -> kube::core::Status {
    let mut n = 0;
    eventually(60, || {
        n += 1;
        let name = format!("probe-{n}");
        let vg = group(&name, &format!("{PARENT}/{ns}_{name}/{name}-1"));
        async move {
            match api.create(&PostParams::default(), &vg).await {
                Err(kube::Error::Api(s)) => Some(*s),
                Ok(_) => None,
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .expect("the validating webhook is called")
}

fn refusal(result: Result<VmGroup, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            s.message
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_template_change_is_refused_with_what_to_do_and_a_bare_template_is_pinned() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let (ns, selector) = namespace(&client, "vgwh").await;
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certificates"));
    let ca = certs.ca_pem().expect("CA").as_bytes().to_vec();
    let stop = CancellationToken::new();
    let serving = serve(
        webhook::webhooks(PARENT),
        "127.0.0.1:0".parse().expect("addr"),
        certs,
        stop.clone(),
    )
    .await
    .expect("serve");
    let name = format!("bosun-vmgroup-{ns}");
    let c = webhook::configurations(
        &name,
        &Target::Url(format!("https://{}", serving.local_addr)),
        &CaInjection::Bundle(ca),
        webhook::hooks(Some(selector)),
    );
    config::apply(
        &client,
        "bosun-test",
        c.validating.as_ref(),
        c.mutating.as_ref(),
    )
    .await
    .expect("configurations");
    let api: Api<VmGroup> = Api::namespaced(client.clone(), &ns);
    let refused = wait_active(&api, &ns).await;
    assert!(
        refused.message.contains("inside this group's own folder"),
        "{refused:?}"
    );

    // The mutating configuration was written with the validating one; poll for its effect.
    let mut n = 0;
    let created = eventually(60, || {
        n += 1;
        let api = api.clone();
        async move {
            let vg = api
                .create(&PostParams::default(), &group(&format!("web-{n}"), " tpl "))
                .await
                .expect("a valid group is admitted");
            (vg.spec.template == "/DC0/vm/tpl").then_some(vg)
        }
    })
    .await
    .expect("the template is pinned to its inventory path");
    let vg_name = created.name_any();

    // Changing the template: refused, saying why and what to do.
    let patch = |spec: serde_json::Value| {
        let api = api.clone();
        let vg_name = vg_name.clone();
        async move {
            api.patch(
                &vg_name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "spec": spec })),
            )
            .await
        }
    };
    let message = refusal(patch(serde_json::json!({"template": "other"})).await);
    assert!(
        message.contains("spec.template cannot change after creation")
            && message.contains("create a new VmGroup with that template"),
        "{message}"
    );
    // The bare name it was created with is no change; neither is the stored path.
    let same = patch(serde_json::json!({"template": "tpl", "cpu": 2}))
        .await
        .expect("the same template, a new shape: admitted");
    assert_eq!(same.spec.template, "/DC0/vm/tpl");
    assert_eq!(same.spec.cpu, 2);
    // A name vCenter would refuse, told at admission.
    let long = group(&"n".repeat(79), "tpl");
    let message = refusal(api.create(&PostParams::default(), &long).await);
    assert!(message.contains("80"), "{message}");

    stop.cancel();
    serving.stopped().await;
}

/// `BOSUN_VMGROUP_WEBHOOK_ADDR` set: the manager serves the webhooks and the operator writes
/// its configurations with the generated CA, with the RBAC it declares (run as its user).
#[tokio::test]
async fn the_operator_serves_and_registers_its_webhooks_with_its_own_rbac() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    let (ns, selector) = namespace(&admin, "vgwh-op").await;
    let settings = Settings {
        parent_folder: PARENT.into(),
        secret_namespace: Some(ns.clone()),
        webhook: Some(WebhookSettings {
            configuration: format!("bosun-vmgroup-{ns}"),
            namespace_selector: Some(selector),
            ..WebhookSettings::new("127.0.0.1:0".parse().expect("addr"), webhook::CONFIGURATION)
        }),
        ..Settings::default()
    };
    let op = Arc::new(VmGroupOperator::new(settings));
    let user = format!("system:serviceaccount:{ns}:bosun-vmgroup");
    let need = op.rbac().merge(bosun_runtime::rbac::runtime_rules(false));
    let mut rules = need.namespaced;
    rules.extend(need.cluster);
    kit::grant(&admin, &user.replace(':', "-"), rules, &user)
        .await
        .expect("rbac");
    let client = cp
        .client_as(&user, &["system:serviceaccounts", "system:authenticated"])
        .await
        .expect("client");
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.clone()]),
        ..Default::default()
    };
    let manager = Manager::new(client, cfg).with_operator(op);
    let metrics = manager.metrics();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));
    let api: Api<VmGroup> = Api::namespaced(admin.clone(), &ns);
    let refused = wait_active(&api, &ns).await;
    assert!(
        refused.message.contains("inside this group's own folder"),
        "{refused:?}"
    );
    // The API server's reviews are measured under controller-runtime's names (a denial is
    // an HTTP 200 answer).
    let text = metrics.encode();
    let answered = |path: &str| {
        bosun_testenv::sum_series(
            &text,
            "controller_runtime_webhook_requests_total",
            &[("webhook", path), ("code", "200")],
        )
    };
    assert!(answered("/validate-vmgroup") >= 1.0, "{text}");
    assert!(answered("/default-vmgroup") >= 1.0, "{text}");
    assert!(
        bosun_testenv::sum_series(
            &text,
            "controller_runtime_webhook_latency_seconds_count",
            &[("webhook", "/validate-vmgroup")]
        ) >= 1.0
    );
    let _ = tx.send(());
    task.await
        .expect("join")
        .expect("the manager ran without error");
}

/// Sets the label holding a namespace's name, as the README tells users of Kubernetes 1.20
/// (this control plane's version) to do; from 1.21 on the API server sets it itself.
async fn label_with_its_name(client: &Client, ns: &str) {
    let label = bosun_runtime::webhook::settings::NAMESPACE_NAME_LABEL;
    let patch = serde_json::json!({"metadata": {"labels": {label: ns}}});
    Api::<Namespace>::all(client.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label");
}

/// An operator watching some namespaces (`bosun run --namespaces`, passed on to the operators
/// as `BOSUN_NAMESPACES`) registers webhooks that review those namespaces only: what it
/// does not reconcile it neither judges nor, under `Fail`, blocks while it is down.
#[tokio::test]
async fn with_watched_namespaces_only_those_namespaces_are_reviewed() {
    let cp = shared().await.expect("control plane");
    let admin = cp.client().await.expect("client");
    crd(&admin).await;
    let watched = test_namespace(&admin, "vgwh-in").await.expect("namespace");
    let other = test_namespace(&admin, "vgwh-out").await.expect("namespace");
    for ns in [&watched, &other] {
        label_with_its_name(&admin, ns).await;
    }
    let mut settings = Settings::from_lookup(|k| match k {
        "BOSUN_VMGROUP_WEBHOOK_ADDR" => Some("127.0.0.1:0".into()),
        "BOSUN_NAMESPACES" => Some(watched.clone()),
        _ => None,
    });
    let w = settings.webhook.as_mut().expect("webhooks on");
    w.configuration = format!("bosun-vmgroup-{watched}");
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![watched.clone()]),
        ..Default::default()
    };
    let manager =
        Manager::new(admin.clone(), cfg).with_operator(Arc::new(VmGroupOperator::new(settings)));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));
    let refused = wait_active(&Api::namespaced(admin.clone(), &watched), &watched).await;
    assert!(
        refused.message.contains("inside this group's own folder"),
        "{refused:?}"
    );
    // The same group in a namespace not watched: neither refused nor defaulted.
    let template = format!("{PARENT}/{other}-probe/probe-1");
    let outside = Api::<VmGroup>::namespaced(admin.clone(), &other)
        .create(&PostParams::default(), &group("probe", &template))
        .await
        .expect("not reviewed outside the watched namespaces");
    assert_eq!(outside.spec.template, template);
    let _ = tx.send(());
    task.await
        .expect("join")
        .expect("the manager ran without error");
}
