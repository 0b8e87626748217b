//! Conversion between `charts.example.com/v1alpha1` — the shape of the Helm- and
//! Ansible-based BookStores, whose spec is the chart's values — and `v1`, this operator's
//! spec, so a BookStore made with either moves to the coded operator without being recreated.
//!
//! The fields both versions have map one to one (the table [`FIELDS`]); a v1alpha1 field left
//! out takes the chart's default (`values.yaml`), so the v1 object runs what Helm ran (the
//! chart's app Service is a LoadBalancer; v1's default is ClusterIP). What one version has and
//! the other has not (v1alpha1's `affinity`, `nodeSelector`, `tolerations`,
//! `service.mongodb.targetPort`; v1's `dbSize`, `dataPolicy`, `bookDB.replicas`, …) is kept in
//! an annotation holding that version's whole spec, `bookstore.bosun.dev/<version>-spec`, and
//! taken back when the object is read in that version again: a round trip loses nothing, and
//! a change made in either version to a shared field wins over the kept copy.
//!
//! Status is passed as it is: it is each operator's to write.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use serde_json::{json, Map, Value};

pub const V1ALPHA1: &str = "charts.example.com/v1alpha1";
pub const V1: &str = "charts.example.com/v1";
pub const PATH: &str = "/convert-bookstore";

/// v1alpha1 pointer ↔ v1 pointer, values unchanged (the enums are spelled alike).
pub const FIELDS: &[(&str, &str)] = &[
    ("/image/app/repository", "/bookApp/repository"),
    ("/image/app/tag", "/bookApp/tag"),
    ("/image/app/pullPolicy", "/bookApp/imagePullPolicy"),
    ("/image/mongodb/repository", "/bookDB/repository"),
    ("/image/mongodb/tag", "/bookDB/tag"),
    ("/image/mongodb/pullPolicy", "/bookDB/imagePullPolicy"),
    ("/replicaCount", "/bookApp/replicas"),
    ("/resources", "/bookApp/resources"),
    ("/service/app/port", "/bookApp/port"),
    ("/service/app/targetPort", "/bookApp/targetPort"),
    ("/service/app/type", "/bookApp/serviceType"),
    ("/service/mongodb/port", "/bookDB/port"),
];

/// The chart's defaults (examples/helm-bookstore/helm-charts/book-store/values.yaml) for the
/// mapped fields. `resources: {}` there means none, as an absent v1 `resources` does.
fn chart_default(alpha: &str) -> Option<Value> {
    Some(match alpha {
        "/image/app/repository" => json!("akash125/pyapp"),
        "/image/app/tag" | "/image/mongodb/tag" => json!("latest"),
        "/image/app/pullPolicy" | "/image/mongodb/pullPolicy" => json!("IfNotPresent"),
        "/image/mongodb/repository" => json!("mongo"),
        "/replicaCount" => json!(1),
        "/service/app/port" => json!(80),
        "/service/app/targetPort" => json!(3000),
        "/service/app/type" => json!("LoadBalancer"),
        "/service/mongodb/port" => json!(27017),
        _ => return None,
    })
}

fn stash_key(api_version: &str) -> String {
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    format!("bookstore.bosun.dev/{version}-spec")
}

/// A v1alpha1 value as the chart sees it: given, or the chart's default. An empty
/// `resources` is none.
fn alpha_value(spec: &Value, ptr: &str) -> Option<Value> {
    match spec.pointer(ptr) {
        Some(Value::Object(m)) if ptr == "/resources" && m.is_empty() => None,
        Some(Value::Null) | None => chart_default(ptr),
        Some(v) => Some(v.clone()),
    }
}

/// A v1 value as the operator sees it: given, or v1's default.
fn v1_value(spec: &Value, ptr: &str) -> Option<Value> {
    match spec.pointer(ptr) {
        Some(Value::Null) | None => serde_json::to_value(crate::api::BookStoreSpec::default())
            .ok()?
            .pointer(ptr)
            .cloned(),
        Some(v) => Some(v.clone()),
    }
}

fn set(root: &mut Value, ptr: &str, value: Option<Value>) {
    let mut parts: Vec<&str> = ptr.split('/').skip(1).collect();
    let Some(last) = parts.pop() else { return };
    let mut cur = root;
    for p in parts {
        if !cur.get(p).is_some_and(Value::is_object) {
            if value.is_none() {
                return;
            }
            if let Some(m) = cur.as_object_mut() {
                m.insert(p.into(), Value::Object(Map::new()));
            }
        }
        match cur.get_mut(p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        match value {
            Some(v) => {
                m.insert(last.into(), v);
            }
            None => {
                m.remove(last);
            }
        }
    }
}

/// The v1 spec of a v1alpha1 spec, on top of `base` (the kept v1 spec, or empty). A field is
/// written only where the values as each side reads them (defaults included) differ, so what
/// was left to a default stays left to it.
pub fn to_v1(alpha: &Value, mut base: Value) -> Value {
    for (a, v) in FIELDS {
        let want = alpha_value(alpha, a);
        if v1_value(&base, v) != want {
            set(&mut base, v, want);
        }
    }
    base
}

/// The v1alpha1 spec of a v1 spec, on top of `base` (the kept v1alpha1 spec, or empty).
pub fn to_v1alpha1(v1: &Value, mut base: Value) -> Value {
    for (a, v) in FIELDS {
        let want = v1_value(v1, v);
        if alpha_value(&base, a) != want {
            set(&mut base, a, want);
        }
    }
    base
}

/// One object to `desired` (the conversion webhook's handler).
pub fn convert(mut obj: Value, desired: &str) -> Result<Value, String> {
    let from = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if from == desired {
        return Ok(obj);
    }
    if ![V1, V1ALPHA1].contains(&desired) || ![V1, V1ALPHA1].contains(&from.as_str()) {
        return Err(format!(
            "BookStore converts between {V1ALPHA1} and {V1}, not {from} to {desired}"
        ));
    }
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    if !spec.is_object() {
        return Err(format!("the {from} BookStore's spec is not an object"));
    }
    let annotations = obj
        .pointer_mut("/metadata")
        .and_then(Value::as_object_mut)
        .map(|m| m.entry("annotations").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .ok_or("the BookStore has no metadata")?;
    // The kept copy of the target version's spec, taken back; the source's kept instead.
    let kept = annotations
        .remove(&stash_key(desired))
        .and_then(|v| v.as_str().and_then(|s| serde_json::from_str(s).ok()))
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    annotations.insert(stash_key(&from), Value::String(spec.to_string()));
    let converted = if desired == V1 {
        to_v1(&spec, kept)
    } else {
        to_v1alpha1(&spec, kept)
    };
    obj["spec"] = converted;
    obj["apiVersion"] = Value::String(desired.into());
    Ok(obj)
}

/// The BookStore CRD serving both versions (v1 stored), converted by the webhook that
/// `conversion` points at. v1alpha1's schema is the Helm and Ansible operators': open.
pub fn crd_with_conversion(
    conversion: apiext::CustomResourceConversion,
) -> apiext::CustomResourceDefinition {
    let mut crd = crate::api::crd();
    let open = apiext::JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..Default::default()
    };
    crd.spec
        .versions
        .push(apiext::CustomResourceDefinitionVersion {
            name: "v1alpha1".into(),
            served: true,
            storage: false,
            schema: Some(apiext::CustomResourceValidation {
                open_api_v3_schema: Some(apiext::JSONSchemaProps {
                    type_: Some("object".into()),
                    properties: Some(
                        [
                            ("spec".to_string(), open.clone()),
                            ("status".to_string(), open),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
            }),
            subresources: Some(apiext::CustomResourceSubresources {
                status: Some(apiext::CustomResourceSubresourceStatus(json!({}))),
                ..Default::default()
            }),
            ..Default::default()
        });
    crd.spec.conversion = Some(conversion);
    crd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helm_sample() -> Value {
        json!({"apiVersion": V1ALPHA1, "kind": "BookStore",
            "metadata": {"name": "bookstore-sample", "namespace": "default"},
            "spec": {
                "affinity": {}, "nodeSelector": {"disk": "ssd"}, "tolerations": [],
                "image": {"app": {"pullPolicy": "IfNotPresent", "repository": "akash125/pyapp", "tag": "latest"},
                          "mongodb": {"pullPolicy": "IfNotPresent", "repository": "mongo", "tag": "latest"}},
                "replicaCount": 2, "resources": {},
                "service": {"app": {"port": 80, "targetPort": 3000, "type": "LoadBalancer"},
                            "mongodb": {"port": 27017, "targetPort": 27017, "type": "ClusterIP"}}}})
    }

    fn v1_sample() -> Value {
        json!({"apiVersion": V1, "kind": "BookStore",
            "metadata": {"name": "shop", "namespace": "default", "annotations": {"team": "books"}},
            "spec": {"bookApp": {"replicas": 3, "tag": "v2", "serviceType": "NodePort",
                                 "resources": {"limits": {"cpu": "500m"}}},
                     "bookDB": {"dbSize": "5Gi", "dataPolicy": "Delete", "replicas": 3}}})
    }

    #[test]
    fn shared_fields_map_and_missing_ones_take_the_charts_defaults() {
        let v1 = convert(helm_sample(), V1).expect("convert");
        assert_eq!(v1["apiVersion"], V1);
        let spec = &v1["spec"];
        assert_eq!(spec["bookApp"]["replicas"], 2);
        assert_eq!(spec["bookApp"]["serviceType"], "LoadBalancer");
        assert!(spec["bookApp"].get("resources").is_none(), "{{}} is none");
        // Equal to v1's own default: left to it.
        assert!(spec["bookDB"].get("port").is_none());
        let ansible = json!({"apiVersion": V1ALPHA1, "kind": "BookStore", "metadata": {"name": "a"},
            "spec": {"image": {"app": {"pullPolicy": "Always"}}, "service": {"app": {"type": "ClusterIP"}}}});
        let v1 = convert(ansible, V1).expect("convert");
        assert_eq!(v1["spec"]["bookApp"]["imagePullPolicy"], "Always");
        let typed: crate::api::BookStore =
            serde_json::from_value(v1).expect("a valid v1 BookStore");
        assert_eq!(
            typed.spec.book_app.service_type,
            crate::api::ServiceType::ClusterIP
        );
        assert_eq!(typed.spec.book_app.port, 80);
        assert_eq!(typed.spec.book_app.target_port, 3000);
        // v1's default Service type is ClusterIP: a v1 BookStore leaving it out reads as
        // ClusterIP in v1alpha1 too, not as the chart's LoadBalancer.
        let v1 =
            json!({"apiVersion": V1, "kind": "BookStore", "metadata": {"name": "b"}, "spec": {}});
        let alpha = convert(v1, V1ALPHA1).expect("to v1alpha1");
        assert_eq!(alpha["spec"]["service"]["app"]["type"], "ClusterIP");
    }

    #[test]
    fn round_trips_lose_nothing_either_way() {
        for (obj, other) in [(helm_sample(), V1), (v1_sample(), V1ALPHA1)] {
            let from = obj["apiVersion"].as_str().expect("version").to_string();
            let there = convert(obj.clone(), other).expect("there");
            let back = convert(there, &from).expect("back");
            let mut expected = obj.clone();
            // The other version's copy stays, for the next trip there.
            let key = stash_key(other);
            assert!(back["metadata"]["annotations"][&key].is_string());
            expected["metadata"]["annotations"][&key] =
                back["metadata"]["annotations"][&key].clone();
            assert_eq!(back, expected);
        }
    }

    #[test]
    fn a_change_in_either_version_wins_over_the_kept_copy() {
        let mut v1 = convert(helm_sample(), V1).expect("to v1");
        v1["spec"]["bookApp"]["replicas"] = json!(5);
        v1["spec"]["bookDB"]["dbSize"] = json!("8Gi");
        let mut alpha = convert(v1, V1ALPHA1).expect("to v1alpha1");
        assert_eq!(alpha["spec"]["replicaCount"], 5);
        assert_eq!(alpha["spec"]["nodeSelector"]["disk"], "ssd", "kept");
        alpha["spec"]["image"]["app"]["tag"] = json!("v3");
        let v1 = convert(alpha, V1).expect("to v1 again");
        assert_eq!(v1["spec"]["bookApp"]["tag"], "v3");
        assert_eq!(v1["spec"]["bookApp"]["replicas"], 5);
        assert_eq!(
            v1["spec"]["bookDB"]["dbSize"], "8Gi",
            "kept from the v1 copy"
        );
    }

    #[test]
    fn other_versions_and_broken_objects_are_refused() {
        let mut o = helm_sample();
        assert!(convert(o.clone(), "charts.example.com/v2").is_err());
        o["spec"] = json!("x");
        assert!(convert(o, V1).is_err());
    }
}
