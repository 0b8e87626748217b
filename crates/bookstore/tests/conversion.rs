//! The BookStore conversion webhook on the real kube-apiserver: the CRD serves v1alpha1 (the
//! Helm and Ansible BookStores' shape) and v1 (stored), converted by the webhook over HTTPS on
//! loopback. A BookStore made under v1alpha1 is read and changed under v1 and back; nothing
//! is lost on the way.
use std::sync::Arc;
use std::time::Duration;

use bosun_bookstore::convert::{self, crd_with_conversion};
use bosun_bookstore::BookStore;
use bosun_runtime::webhook::config::{crd_conversion, CaInjection, Target};
use bosun_runtime::webhook::{serve, CertSource, Certificates, Webhooks};
use bosun_testenv::{eventually, shared, test_namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::wait::{await_condition, conditions};
use kube::ResourceExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_v1alpha1_bookstore_is_read_and_changed_as_v1_and_back_without_loss() {
    let cp = shared().await.expect("control plane");
    let client = cp.client().await.expect("client");
    let certs = Arc::new(Certificates::new(CertSource::loopback()).expect("certificates"));
    let ca = certs.ca_pem().expect("CA").as_bytes().to_vec();
    let stop = CancellationToken::new();
    let serving = serve(
        Webhooks::new().convert(convert::PATH, convert::convert),
        "127.0.0.1:0".parse().expect("addr"),
        certs,
        stop.clone(),
    )
    .await
    .expect("serve");
    let crd = crd_with_conversion(crd_conversion(
        &Target::Url(format!("https://{}", serving.local_addr)),
        &CaInjection::Bundle(ca),
        convert::PATH,
    ));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        &crd.name_any(),
        &PatchParams::apply("bosun-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("crd");
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, &crd.name_any(), conditions::is_crd_established()),
    )
    .await
    .expect("established in time")
    .expect("established");

    let ns = test_namespace(&client, "bs-conv").await.expect("namespace");
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
    // Discovery of the new version follows Established by a moment.
    eventually(30, || async {
        match alpha.create(&PostParams::default(), &sample).await {
            Ok(_) => Some(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Some(()),
            Err(_) => None,
        }
    })
    .await
    .expect("created under v1alpha1");

    let read = v1.get("bookstore-sample").await.expect("read as v1");
    assert_eq!(read.spec.book_app.replicas, 2);
    assert_eq!(read.spec.book_app.service_type.as_str(), "LoadBalancer");
    assert_eq!(read.spec.book_app.target_port, 3000);
    assert_eq!(read.spec.book_db.port, 27017);

    v1.patch(
        "bookstore-sample",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"bookApp": {"replicas": 3}, "bookDB": {"dbSize": "5Gi"}}})),
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
    stop.cancel();
    serving.stopped().await;
}
