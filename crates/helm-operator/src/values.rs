//! The values a custom resource renders its chart with, exactly as helm-operator builds them:
//! the spec (numbers from the API server: integral ones int64, others float64), with the
//! watch's `overrideValues` set over it (each a Go template executed with Helm's functions and
//! no data, then set as a string by Helm's `--set-string` rules, so they win over the spec).
//! Helm then coalesces these over the chart's values.yaml in the render: maps merge, lists and
//! scalars replace, a `null` removes the chart's default, `global` flows to subcharts.
use std::collections::BTreeMap;
use std::sync::Arc;

use bosun_helm::render::strvals;
use bosun_helm::template::exec::{execute, Limits, Runtime};
use bosun_helm::template::set::{Layer, TemplateSet};
use bosun_helm::value::{Data, Value};

/// Why values could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    #[error("spec is not a map of values: {0}")]
    Spec(String),
    #[error("overrideValues {key}: {message}")]
    Override { key: String, message: String },
}

/// The spec of a custom resource (its JSON), as values; a missing spec is `{}`.
pub fn from_spec(spec: Option<&serde_json::Value>) -> Result<Data, ValuesError> {
    match spec {
        None | Some(serde_json::Value::Null) => Ok(Data::Map(BTreeMap::new())),
        Some(v @ serde_json::Value::Object(_)) => {
            let text = serde_json::to_string(v).map_err(|e| ValuesError::Spec(e.to_string()))?;
            Data::from_json_k8s(&text).map_err(|e| ValuesError::Spec(e.to_string()))
        }
        Some(other) => Err(ValuesError::Spec(format!(
            "expected a map, got {}",
            match other {
                serde_json::Value::Array(_) => "a list",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                _ => "a boolean",
            }
        ))),
    }
}

/// Words that make a key Secret-like (matched in its last segment, any case).
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "cred",
    "auth",
    "cert",
    "private",
    "salt",
    "session",
    "cookie",
    "signature",
    "dsn",
    "connectionstring",
];

/// True when a values key (`a.b.c`) looks like it holds a secret: its last segment names one.
pub fn secret_like(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    let last: String = last.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    SECRET_WORDS.iter().any(|w| last.contains(w))
}

/// An override value as Events show it: `****` when suppressed (helm-operator's
/// `--suppress-override-values`) or when its key is Secret-like.
pub fn shown_override<'a>(key: &str, value: &'a str, suppress: bool) -> &'a str {
    if suppress || secret_like(key) {
        "****"
    } else {
        value
    }
}

/// Executes one override value as helm-operator does: a Go template with Helm's functions
/// and no data (`'{{ ("$IMAGE" | split ":")._0 }}'`).
pub fn execute_override(key: &str, text: &str) -> Result<String, ValuesError> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let err = |message: String| ValuesError::Override {
        key: key.to_string(),
        message,
    };
    let mut set = TemplateSet::new();
    set.add(key, text).map_err(|e| err(e.to_string()))?;
    let layer = Layer::base(Arc::new(set));
    let tree = layer
        .lookup(key)
        .ok_or_else(|| err("template did not parse".into()))?;
    let rt = Runtime::new(Limits::default(), false);
    let out = execute(&rt, layer, &tree, Value::Nil).map_err(|e| err(e.to_string()))?;
    Ok(out.replace("<no value>", ""))
}

/// The overrides executed, once per watches entry (helm-operator executes them when it loads
/// the watches file: an override using `randAlphaNum` or `now` is one value for the life of
/// the operator, not a new release on every reconcile).
pub fn executed(
    overrides: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ValuesError> {
    overrides
        .iter()
        .map(|(k, t)| Ok((k.clone(), execute_override(k, t)?)))
        .collect()
}

/// The spec with the overrides executed and set over it (`--set-string` rules).
pub fn with_overrides(
    values: Data,
    overrides: &BTreeMap<String, String>,
) -> Result<Data, ValuesError> {
    set_overrides(values, &executed(overrides)?)
}

/// The spec with overrides already [`executed`] set over it (`--set-string` rules).
pub fn set_overrides(
    mut values: Data,
    executed: &BTreeMap<String, String>,
) -> Result<Data, ValuesError> {
    for (key, value) in executed {
        strvals::parse_into(&format!("{key}={value}"), &mut values, true).map_err(|message| {
            ValuesError::Override {
                key: key.clone(),
                message,
            }
        })?;
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_like_override_values_are_masked_and_the_flag_masks_all() {
        for k in [
            "auth.password",
            "db.rootPassword",
            "apiToken",
            "tls.privateKey",
            "aws.secret_access_key",
            "redis.auth",
            "smtp.credentials",
            "postgresql.DSN",
        ] {
            assert!(secret_like(k), "{k}");
            assert_eq!(shown_override(k, "v4lue", false), "****", "{k}");
        }
        for k in ["image.tag", "replicaCount", "service.type", "ingress.hosts"] {
            assert!(!secret_like(k), "{k}");
            assert_eq!(shown_override(k, "v4lue", false), "v4lue", "{k}");
            assert_eq!(shown_override(k, "v4lue", true), "****", "{k}");
        }
    }

    #[test]
    fn spec_numbers_keep_their_kind() {
        let v = from_spec(Some(
            &json!({"replicaCount": 1234567, "ratio": 0.5, "name": "x"}),
        ))
        .expect("values");
        let printed = format!("{:?}", v.lookup("replicaCount"));
        assert!(printed.contains("1234567"), "{printed}");
        assert!(from_spec(None)
            .expect("empty")
            .as_map()
            .is_some_and(|m| m.is_empty()));
        assert!(matches!(
            from_spec(Some(&json!([1]))),
            Err(ValuesError::Spec(_))
        ));
    }

    #[test]
    fn overrides_win_as_strings_and_may_be_templates() {
        let spec = from_spec(Some(
            &json!({"image": {"repository": "a", "tag": "1"}, "keep": true}),
        ))
        .expect("values");
        let overrides = BTreeMap::from([
            (
                "image.repository".to_string(),
                "{{ (\"repo/app:2.0\" | split \":\")._0 }}".to_string(),
            ),
            ("image.tag".to_string(), "2".to_string()),
            ("extra.deep.key".to_string(), "v".to_string()),
        ]);
        let v = with_overrides(spec, &overrides).expect("merged");
        assert_eq!(
            v.lookup("image.repository").and_then(Data::as_str),
            Some("repo/app")
        );
        assert_eq!(
            v.lookup("image.tag").and_then(Data::as_str),
            Some("2"),
            "a string, not a number"
        );
        assert_eq!(v.lookup("extra.deep.key").and_then(Data::as_str), Some("v"));
        assert!(v.lookup("keep").is_some());
        let bad = BTreeMap::from([("a".to_string(), "{{ nope }}".to_string())]);
        assert!(matches!(
            with_overrides(Data::Map(BTreeMap::new()), &bad),
            Err(ValuesError::Override { .. })
        ));
    }
}
