//! Webhooks in a bundle: OLM, not the bundle, makes what serves them — the serving
//! certificate (mounted into the named Deployment), a Service in front of it, the
//! {Validating,Mutating}WebhookConfigurations, and the `spec.conversion` of the CRDs it
//! converts — from the CSV's `spec.webhookdefinitions`. [`for_olm`] turns an install with
//! webhooks (as `bosun manifests --webhooks` prints it: cert-manager's Issuer and
//! Certificates, a Service, the configurations, CRDs pointing at the Service) into those
//! definitions and the objects left for the bundle: cert-manager's objects, the Service and
//! the configurations dropped (kinds OLM refuses in a bundle), the converted CRDs without
//! their conversion stanza and CA annotation, the Deployment reading OLM's certificate.
use serde_json::{json, Value};

use crate::Error;

/// Where OLM mounts the serving certificate it makes (`tls.crt`, `tls.key`) in the
/// Deployment a webhook definition names; kubebuilder's default certificate directory.
pub const OLM_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

const CERT_MANAGER_INJECT: &str = "cert-manager.io/inject-ca-from";

/// The CSV's webhook definitions and the install's objects as a bundle ships them.
#[derive(Debug, Default)]
pub struct ForOlm {
    pub definitions: Vec<Value>,
    pub objects: Vec<Value>,
}

/// `objects` (an install with webhooks) for OLM, the operator running as `deployment`.
pub fn for_olm(objects: Vec<Value>, deployment: &str) -> Result<ForOlm, Error> {
    let mut out = ForOlm::default();
    let mut secrets: Vec<String> = Vec::new();
    let mut services: Vec<String> = Vec::new();
    for o in &objects {
        if o["kind"] == "Certificate" {
            if let Some(s) = o["spec"]["secretName"].as_str() {
                secrets.push(s.to_string());
            }
        }
    }
    for o in &objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        let admission = match kind {
            "ValidatingWebhookConfiguration" => Some("ValidatingAdmissionWebhook"),
            "MutatingWebhookConfiguration" => Some("MutatingAdmissionWebhook"),
            _ => None,
        };
        if let Some(kind) = admission {
            for hook in o["webhooks"].as_array().into_iter().flatten() {
                let service = &hook["clientConfig"]["service"];
                let port = target(o, service)?;
                services.extend(service["name"].as_str().map(str::to_string));
                let mut d = json!({
                    "type": kind,
                    "generateName": hook["name"],
                    "deploymentName": deployment,
                    "containerPort": port,
                    "targetPort": port,
                    "webhookPath": service["path"],
                    "admissionReviewVersions": hook["admissionReviewVersions"],
                    "sideEffects": hook["sideEffects"],
                    "failurePolicy": hook["failurePolicy"],
                    "rules": hook["rules"],
                });
                // OLM sets the namespace selector from the OperatorGroup.
                for f in [
                    "matchPolicy",
                    "objectSelector",
                    "reinvocationPolicy",
                    "timeoutSeconds",
                ] {
                    if !hook[f].is_null() {
                        d[f] = hook[f].clone();
                    }
                }
                out.definitions.push(d);
            }
        }
    }
    for mut o in objects {
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "ValidatingWebhookConfiguration"
            | "MutatingWebhookConfiguration"
            | "Issuer"
            | "Certificate" => continue,
            "Service" if services.iter().any(|s| o["metadata"]["name"] == *s) => continue,
            "CustomResourceDefinition" if o["spec"]["conversion"]["strategy"] == "Webhook" => {
                let name = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let webhook = o["spec"]["conversion"]["webhook"].clone();
                let service = &webhook["clientConfig"]["service"];
                let port = target(&o, service)?;
                let group = o["spec"]["group"].as_str().unwrap_or_default().to_string();
                out.definitions.push(json!({
                    "type": "ConversionWebhook",
                    "generateName": format!("c{}.{group}", o["spec"]["names"]["singular"].as_str().unwrap_or(&name)),
                    "deploymentName": deployment,
                    "containerPort": port,
                    "targetPort": port,
                    "webhookPath": service["path"],
                    "admissionReviewVersions": webhook["conversionReviewVersions"],
                    "sideEffects": "None",
                    "conversionCRDs": [name],
                }));
                if let Some(spec) = o["spec"].as_object_mut() {
                    spec.remove("conversion");
                }
                if let Some(a) = o["metadata"]["annotations"].as_object_mut() {
                    a.remove(CERT_MANAGER_INJECT);
                    if a.is_empty() {
                        if let Some(m) = o["metadata"].as_object_mut() {
                            m.remove("annotations");
                        }
                    }
                }
            }
            "Deployment" => olm_certificate(&mut o, &secrets),
            _ => {}
        }
        out.objects.push(o);
    }
    Ok(out)
}

/// The port a webhook is served on: the Service's port, which `manifests --webhooks` makes
/// the container's port too.
fn target(owner: &Value, service: &Value) -> Result<i64, Error> {
    service["port"].as_i64().ok_or_else(|| Error::BadProject {
        path: format!(
            "{} {}",
            owner["kind"].as_str().unwrap_or("object"),
            owner["metadata"]["name"].as_str().unwrap_or("unnamed")
        )
        .into(),
        message: "a webhook without a Service port: OLM needs the port the operator serves it on"
            .into(),
    })
}

/// The Deployment reads the certificate OLM mounts instead of cert-manager's Secrets.
fn olm_certificate(deployment: &mut Value, secrets: &[String]) {
    let pod = &mut deployment["spec"]["template"]["spec"];
    let mut dropped: Vec<String> = Vec::new();
    if let Some(volumes) = pod["volumes"].as_array_mut() {
        volumes.retain(|v| {
            let cert = v["secret"]["secretName"]
                .as_str()
                .is_some_and(|s| secrets.iter().any(|x| x == s));
            if cert {
                dropped.extend(v["name"].as_str().map(str::to_string));
            }
            !cert
        });
        if volumes.is_empty() {
            if let Some(p) = pod.as_object_mut() {
                p.remove("volumes");
            }
        }
    }
    for c in pod["containers"].as_array_mut().into_iter().flatten() {
        if let Some(mounts) = c["volumeMounts"].as_array_mut() {
            mounts.retain(|m| {
                !m["name"]
                    .as_str()
                    .is_some_and(|n| dropped.iter().any(|d| d == n))
            });
            if mounts.is_empty() {
                if let Some(m) = c.as_object_mut() {
                    m.remove("volumeMounts");
                }
            }
        }
        for e in c["env"].as_array_mut().into_iter().flatten() {
            if e["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("_WEBHOOK_CERT_DIR"))
            {
                e["value"] = json!(OLM_CERT_DIR);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> Vec<Value> {
        let svc = |path: &str| json!({"name": "bosun-webhook", "namespace": "ops", "path": path, "port": 9443});
        vec![
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "bosun-selfsigned"}}),
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "bosun-shop"},
                   "spec": {"secretName": "bosun-shop"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bosun-webhook"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop-metrics"}}),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "shop"},
                   "webhooks": [{"name": "vshop.kb.io", "admissionReviewVersions": ["v1"],
                                 "clientConfig": {"service": svc("/validate-shop")},
                                 "failurePolicy": "Fail", "sideEffects": "None", "matchPolicy": "Equivalent",
                                 "rules": [{"apiGroups": ["x.io"], "apiVersions": ["v1"], "resources": ["shops"],
                                            "operations": ["CREATE"]}],
                                 "namespaceSelector": {"matchLabels": {"a": "b"}}}]}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "shops.x.io", "annotations": {CERT_MANAGER_INJECT: "ops/bosun-shop"}},
                   "spec": {"group": "x.io", "names": {"singular": "shop"},
                            "conversion": {"strategy": "Webhook", "webhook": {
                                "clientConfig": {"service": svc("/convert")}, "conversionReviewVersions": ["v1"]}}}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop"},
                   "spec": {"template": {"spec": {
                       "volumes": [{"name": "webhook-shop", "secret": {"secretName": "bosun-shop"}}],
                       "containers": [{"name": "operator",
                           "env": [{"name": "BOSUN_SHOP_WEBHOOK_CERT_DIR", "value": "/var/run/bosun/webhooks/shop"}],
                           "volumeMounts": [{"name": "webhook-shop", "mountPath": "/var/run/bosun/webhooks/shop"}]}]}}}}),
        ]
    }

    #[test]
    fn the_install_becomes_definitions_and_what_olm_does_not_make() {
        let f = for_olm(install(), "shop").expect("for OLM");
        let kinds: Vec<(&str, &str)> = f
            .objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().expect("kind"),
                    o["metadata"]["name"].as_str().expect("name"),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("Service", "shop-metrics"),
                ("CustomResourceDefinition", "shops.x.io"),
                ("Deployment", "shop"),
            ]
        );
        let v = &f.definitions[0];
        assert_eq!(v["type"], "ValidatingAdmissionWebhook");
        assert_eq!(v["deploymentName"], "shop");
        assert_eq!(
            (v["containerPort"].clone(), v["targetPort"].clone()),
            (json!(9443), json!(9443))
        );
        assert_eq!(v["webhookPath"], "/validate-shop");
        assert_eq!(v["generateName"], "vshop.kb.io");
        assert!(v.get("namespaceSelector").is_none(), "OLM's to set");
        let c = &f.definitions[1];
        assert_eq!(c["type"], "ConversionWebhook");
        assert_eq!(c["conversionCRDs"], json!(["shops.x.io"]));
        assert_eq!(c["webhookPath"], "/convert");
        let crd = &f.objects[1];
        assert!(crd["spec"].get("conversion").is_none(), "{crd}");
        assert!(crd["metadata"].get("annotations").is_none(), "{crd}");
        let pod = &f.objects[2]["spec"]["template"]["spec"];
        assert!(pod.get("volumes").is_none(), "{pod}");
        assert!(pod["containers"][0].get("volumeMounts").is_none(), "{pod}");
        assert_eq!(pod["containers"][0]["env"][0]["value"], OLM_CERT_DIR);
    }

    #[test]
    fn a_webhook_without_a_port_is_an_error_naming_it() {
        let mut objects = install();
        objects[4]["webhooks"][0]["clientConfig"]["service"]
            .as_object_mut()
            .expect("service")
            .remove("port");
        let e = for_olm(objects, "shop").expect_err("no port").to_string();
        assert!(e.contains("ValidatingWebhookConfiguration shop"), "{e}");
    }
}
