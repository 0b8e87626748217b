//! The BookStore conversion webhook on the real kube-apiserver, run as an install runs it:
//! the v1 CRD installed, then the operator (as its own user, with the RBAC it declares) serves
//! the webhook over HTTPS on loopback and applies the two-version CRD with its generated CA.
//! A BookStore made under v1alpha1 (the Helm and Ansible BookStores' shape) is read and
//! changed under v1 and back; nothing is lost on the way.
use std::sync::Arc;

use bosun_bookstore::webhook::{ConvertingBookStore, CONFIGURATION};
use bosun_bookstore::BookStore;
use bosun_runtime::manager::{Manager, ManagerConfig, Operator, Scope};
use bosun_runtime::webhook::Settings as WebhookSettings;
use bosun_testenv::{eventually, shared, test_namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::ResourceExt;
use serde_json::json;

const USER: &str = "system:serviceaccount:bosun-system:bosun-bookstore-conversion";

#[tokio::test]
async fn a_v1alpha1_bookstore_is_read_and_changed_as_v1_and_back_without_loss() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let pp = PatchParams::apply("bosun-test").force();
    // The v1 CRD, as `bosun crd` installs it.
    bosun_testenv::kit::install_crds(&client, [bosun_bookstore::api::crd()])
        .await
        .expect("crd served");

    let ns = test_namespace(&client, "bs-conv").await.expect("namespace");
    let op = Arc::new(ConvertingBookStore {
        webhook: WebhookSettings::new("127.0.0.1:0".parse().expect("addr"), CONFIGURATION),
    });
    let need = op.rbac().merge(bosun_runtime::rbac::runtime_rules(false));
    let mut rules = need.namespaced;
    rules.extend(need.cluster);
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some("bosun-bookstore-conversion".into()),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .patch(&role.name_any(), &pp, &Patch::Apply(&role))
        .await
        .expect("role");
    let binding = ClusterRoleBinding {
        metadata: role.metadata.clone(),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.name_any(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: USER.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(&role.name_any(), &pp, &Patch::Apply(&binding))
        .await
        .expect("binding");
    let as_operator = cp
        .client_as(USER, &["system:serviceaccounts", "system:authenticated"])
        .await
        .expect("client");
    let cfg = ManagerConfig {
        scope: Scope::Namespaces(vec![ns.clone()]),
        ..Default::default()
    };
    let manager = Manager::new(as_operator, cfg).with_operator(op);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(
        async move {
            let _ = rx.await;
        },
        |_| {},
    ));
    tokio::pin!(task);

    let alpha_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("charts.example.com", "v1alpha1", "BookStore"),
        "bookstores",
    );
    let alpha: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &alpha_ar);
    let v1: Api<BookStore> = Api::namespaced(client.clone(), &ns);
    // The Helm BookStore's sample, with a nodeSelector v1 has no field for.
    let sample: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "charts.example.com/v1alpha1", "kind": "BookStore",
        "metadata": {"name": "bookstore-sample"},
        "spec": {
            "affinity": {}, "nodeSelector": {"disk": "ssd"}, "tolerations": [],
            "image": {"app": {"pullPolicy": "IfNotPresent", "repository": "akash125/pyapp", "tag": "latest"},
                      "mongodb": {"pullPolicy": "IfNotPresent", "repository": "mongo", "tag": "latest"}},
            "replicaCount": 2, "resources": {},
            "service": {"app": {"port": 80, "targetPort": 3000, "type": "LoadBalancer"},
                        "mongodb": {"port": 27017, "targetPort": 27017, "type": "ClusterIP"}}}
    }))
    .expect("sample");
    // The operator applies the two-version CRD once serving; v1alpha1 is served a moment
    // after (discovery follows the CRD).
    let created = eventually(60, || async {
        match alpha.create(&PostParams::default(), &sample).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Some(()),
            Err(_) => None,
        }
    });
    tokio::select! {
        c = created => c.expect("created under v1alpha1"),
        ended = &mut task => panic!("the manager ended: {ended:?}"),
    }

    let read = v1.get("bookstore-sample").await.expect("read as v1");
    assert_eq!(read.spec.book_app.replicas, 2);
    assert_eq!(read.spec.book_app.service_type.as_str(), "LoadBalancer");
    assert_eq!(read.spec.book_app.target_port, 3000);
    assert_eq!(read.spec.book_db.port, 27017);

    let patched = v1
        .patch(
            "bookstore-sample",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"bookApp": {"replicas": 3}, "bookDB": {"dbSize": "5Gi"}}}),
            ),
        )
        .await
        .expect("changed as v1");

    let back = alpha
        .get("bookstore-sample")
        .await
        .expect("read as v1alpha1");
    let spec = &back.data["spec"];
    assert_eq!(spec["replicaCount"], 3, "the v1 change shows");
    assert_eq!(spec["nodeSelector"]["disk"], "ssd", "kept through v1");
    assert_eq!(spec["affinity"], json!({}));
    assert_eq!(spec["tolerations"], json!([]));
    assert_eq!(spec["service"]["mongodb"]["targetPort"], 27017);
    assert_eq!(spec["service"]["app"]["type"], "LoadBalancer");
    // The whole spec: what was created, the one change made under v1, nothing else.
    let mut expected = sample.data["spec"].clone();
    expected["replicaCount"] = json!(3);
    assert_eq!(*spec, expected, "the v1alpha1 spec after a trip through v1");

    alpha
        .patch(
            "bookstore-sample",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": {"app": {"tag": "v3"}}}})),
        )
        .await
        .expect("changed as v1alpha1");
    let again = v1.get("bookstore-sample").await.expect("read as v1 again");
    assert_eq!(again.spec.book_app.tag, "v3");
    assert_eq!(again.spec.book_app.replicas, 3);
    assert_eq!(again.spec.book_db.db_size, "5Gi", "kept through v1alpha1");
    // The whole v1 spec: as it was after the v1 change, with the one v1alpha1 change.
    let mut expected = serde_json::to_value(&patched.spec).expect("json");
    expected["bookApp"]["tag"] = json!("v3");
    assert_eq!(
        serde_json::to_value(&again.spec).expect("json"),
        expected,
        "the v1 spec after a trip through v1alpha1"
    );

    // Both versions list.
    assert_eq!(
        alpha
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
    assert_eq!(
        v1.list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
    let _ = tx.send(());
    task.await
        .expect("join")
        .expect("the manager ran without error");
}
