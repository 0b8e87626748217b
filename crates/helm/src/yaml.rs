//! The YAML side of Helm: `sigs.k8s.io/yaml`'s `YAMLToJSON` (reading values files and
//! `Chart.yaml`, `fromYaml`) and `JSONToYAML` (`toYaml`), with go-yaml v2's YAML 1.1
//! rules, from the workspace's `bosun-yaml` crate.

/// `sigs.k8s.io/yaml.YAMLToJSON` of the first document; errors carry the
/// `error converting YAML to JSON: ` prefix that `yaml.Unmarshal` adds.
pub fn yaml_to_json(src: &str) -> Result<String, String> {
    bosun_yaml::goyaml::yaml_to_json(src).map_err(|e| format!("error converting YAML to JSON: {e}"))
}

/// `sigs.k8s.io/yaml.JSONToYAML`.
pub fn json_to_yaml(json: &str) -> Result<String, String> {
    bosun_yaml::goyaml::json_to_yaml(json).map_err(|e| e.to_string())
}
