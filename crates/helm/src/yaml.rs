//! The YAML side of Helm: `sigs.k8s.io/yaml`'s `YAMLToJSON` (reading values files,
//! `fromYaml`) and `JSONToYAML` (`toYaml`), with go-yaml v2's YAML 1.1 rules.
//!
//! Interim backend: until the workspace's go-yaml v2 port (`bosun-yaml`) is merged,
//! this goes through serde_yaml, which reads YAML 1.2 and writes its own style; only the
//! engine's tests that do not depend on YAML details are meaningful meanwhile.

/// `sigs.k8s.io/yaml.YAMLToJSON` of the first document.
pub fn yaml_to_json(src: &str) -> Result<String, String> {
    let v: serde_yaml::Value =
        serde_yaml::from_str(src).map_err(|e| format!("error converting YAML to JSON: {e}"))?;
    let j: serde_json::Value =
        serde_yaml::from_value(v).map_err(|e| format!("error converting YAML to JSON: {e}"))?;
    serde_json::to_string(&j).map_err(|e| e.to_string())
}

/// `sigs.k8s.io/yaml.JSONToYAML`.
pub fn json_to_yaml(json: &str) -> Result<String, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    serde_yaml::to_string(&v).map_err(|e| e.to_string())
}
