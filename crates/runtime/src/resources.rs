//! Container requests and limits as operators' specs carry them (the BookStore's app and the
//! PostgresCluster's instances): one type, so both CRDs describe them alike.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Container requests and limits (cpu, memory, ...). Values are Kubernetes quantities; the API
/// server checks them when the pods are written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct Resources {
    /// The most each container may use, per resource (cpu, memory, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Qty>>,
    /// What each container is guaranteed, per resource (cpu, memory, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Qty>>,
}

/// A quantity written as a number or a string (`1`, `"500m"`, `"1Gi"`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Qty {
    Int(i64),
    Str(String),
}

impl Qty {
    pub fn to_quantity(&self) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(match self {
            Qty::Int(i) => i.to_string(),
            Qty::Str(s) => s.clone(),
        })
    }
}

impl JsonSchema for Qty {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Qty".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"x-kubernetes-int-or-string": true})
    }
}

impl Resources {
    /// The pod spec's form.
    pub fn to_requirements(&self) -> k8s_openapi::api::core::v1::ResourceRequirements {
        let conv = |m: &Option<BTreeMap<String, Qty>>| {
            m.as_ref().map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.to_quantity()))
                    .collect()
            })
        };
        k8s_openapi::api::core::v1::ResourceRequirements {
            limits: conv(&self.limits),
            requests: conv(&self.requests),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_strings_reach_the_pod_as_quantities() {
        let r: Resources =
            serde_json::from_value(serde_json::json!({"limits": {"cpu": 2, "memory": "1Gi"}}))
                .expect("resources");
        let req = r.to_requirements();
        let limits = req.limits.expect("limits");
        assert_eq!(limits["cpu"].0, "2");
        assert_eq!(limits["memory"].0, "1Gi");
        assert!(req.requests.is_none());
    }
}
