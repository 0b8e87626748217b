//! Helm's release record, in Helm's own storage format, so the Helm CLI (`helm list`,
//! `history`, `get manifest`) sees bosun's releases and bosun takes over releases that
//! operator-sdk's helm-operator (Helm's library) recorded.
//!
//! A record is the JSON of Helm's `release.Release`, gzipped, base64-encoded, and stored under
//! the key `release` of a Secret named `sh.helm.release.v1.<name>.v<version>` of type
//! `helm.sh/release.v1` with the labels `name`, `owner=helm`, `status`, `version` (and
//! `createdAt`/`modifiedAt`). Fields bosun does not interpret (the chart's templates in a
//! record written by Helm, say) are kept as they were when a record is rewritten.
//!
//! What bosun writes differs from Helm in one place, on purpose: the stored chart carries its
//! metadata, values and schema but not its templates and files — `list`, `history`,
//! `get manifest|values|notes|hooks` need none of them, and they are what pushes large charts'
//! records past the 1 MiB Secret limit.
use std::io::{Read, Write};

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `release.Status` values bosun writes or reads.
pub mod status {
    pub const DEPLOYED: &str = "deployed";
    pub const SUPERSEDED: &str = "superseded";
    pub const FAILED: &str = "failed";
    pub const UNINSTALLING: &str = "uninstalling";
    /// Helm's state of a release whose hooks ran and whose objects were deleted, kept (with
    /// `--keep-history`, or here while `uninstall-wait` waits for the objects to go).
    pub const UNINSTALLED: &str = "uninstalled";
    pub const PENDING_INSTALL: &str = "pending-install";
    pub const PENDING_UPGRADE: &str = "pending-upgrade";
}

/// Go's zero `time.Time`, as `encoding/json` writes it.
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Info {
    #[serde(default = "zero_time")]
    pub first_deployed: String,
    #[serde(default = "zero_time")]
    pub last_deployed: String,
    #[serde(default = "zero_time")]
    pub deleted: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

fn zero_time() -> String {
    ZERO_TIME.to_string()
}

/// A hook as Helm records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Hook {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    #[serde(default)]
    pub last_run: HookExecution,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_policies: Vec<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HookExecution {
    #[serde(default = "zero_time")]
    pub started_at: String,
    #[serde(default = "zero_time")]
    pub completed_at: String,
    #[serde(default)]
    pub phase: String,
}

impl Default for HookExecution {
    fn default() -> Self {
        HookExecution {
            started_at: zero_time(),
            completed_at: zero_time(),
            phase: String::new(),
        }
    }
}

/// Helm's `release.Release`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Release {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub info: Info,
    /// The chart as recorded (`metadata`, `values`, `schema`, ...), kept verbatim.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub chart: Value,
    /// The user-supplied values (the custom resource's spec, with the watch's overrides).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub config: Map<String, Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    #[serde(default)]
    pub version: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Release {
    /// The chart's name as recorded.
    pub fn chart_name(&self) -> &str {
        self.chart
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The Secret name of this record.
    pub fn key(&self) -> String {
        key(&self.name, self.version)
    }
}

/// `sh.helm.release.v1.<name>.v<version>`.
pub fn key(name: &str, version: i64) -> String {
    format!("sh.helm.release.v1.{name}.v{version}")
}

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("not gzip: {0}")]
    Gzip(#[from] std::io::Error),
    #[error("not a release record: {0}")]
    Json(#[from] serde_json::Error),
}

const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Helm's `encodeRelease`: JSON, gzip at best compression, base64.
pub fn encode(r: &Release) -> Result<String, CodecError> {
    let json = serde_json::to_vec(r)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&json)?;
    let bytes = gz.finish()?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Helm's `decodeRelease`: base64, then gunzip when gzipped (Helm 2-era records are not),
/// then JSON.
pub fn decode(data: &str) -> Result<Release, CodecError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim())?;
    let json = if bytes.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice()).read_to_end(&mut out)?;
        out
    } else {
        bytes
    };
    Ok(serde_json::from_slice(&json)?)
}

/// A time as Go's `encoding/json` writes a `time.Time` in UTC (RFC 3339, nanoseconds
/// trimmed of trailing zeros).
pub fn go_time(t: k8s_openapi::jiff::Timestamp) -> String {
    let s = t.strftime("%Y-%m-%dT%H:%M:%S%.f").to_string();
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_what_it_does_not_interpret() {
        let raw = serde_json::json!({
            "name": "shop", "version": 3, "namespace": "ns", "manifest": "---\n# Source: x\na: 1\n",
            "info": {"first_deployed": "2024-01-01T00:00:00Z", "last_deployed": "2024-01-02T00:00:00.5Z",
                     "deleted": ZERO_TIME, "description": "Upgrade complete", "status": "deployed",
                     "resources": {"v1/Pod": []}},
            "chart": {"metadata": {"name": "book-store", "version": "0.1.0"}, "templates": [{"name": "templates/a.yaml", "data": "YQ=="}]},
            "config": {"replicaCount": 2},
            "hooks": [{"name": "h", "kind": "Job", "events": ["pre-install"], "last_run": {"started_at": ZERO_TIME, "completed_at": ZERO_TIME, "phase": ""}, "weight": -5}],
            "future_field": true
        });
        let r: Release = serde_json::from_value(raw.clone()).expect("decodes");
        assert_eq!(r.chart_name(), "book-store");
        assert_eq!(r.key(), "sh.helm.release.v1.shop.v3");
        assert_eq!(r.hooks[0].weight, -5);
        let back = serde_json::to_value(&r).expect("encodes");
        assert_eq!(back, raw, "nothing lost on a rewrite");
        let text = encode(&r).expect("encode");
        assert_eq!(decode(&text).expect("decode"), r);
    }

    #[test]
    fn plain_base64_json_records_decode_too() {
        let json = r#"{"name":"a","version":1,"info":{"status":"deployed"}}"#;
        let text = base64::engine::general_purpose::STANDARD.encode(json);
        let r = decode(&text).expect("decode");
        assert_eq!((r.name.as_str(), r.info.status.as_str()), ("a", "deployed"));
        assert!(decode("@@@").is_err());
    }

    #[test]
    fn go_times() {
        let t: k8s_openapi::jiff::Timestamp = "2024-05-01T10:20:30.123400Z".parse().expect("ts");
        assert_eq!(go_time(t), "2024-05-01T10:20:30.1234Z");
        let t: k8s_openapi::jiff::Timestamp = "2024-05-01T10:20:30Z".parse().expect("ts");
        assert_eq!(go_time(t), "2024-05-01T10:20:30Z");
    }
}
