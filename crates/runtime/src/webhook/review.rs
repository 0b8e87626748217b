//! The wire types of `admission.k8s.io/v1` AdmissionReview and `apiextensions.k8s.io/v1`
//! ConversionReview: only the fields bosun reads or writes. Objects stay `serde_json::Value`
//! here; a handler's kind is decoded later, so an object of the wrong shape is an answer
//! (a denial naming the problem), not a failure to read the review.
use k8s_openapi::ByteString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
pub const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// What the API server asks.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    #[serde(default)]
    pub user_info: UserInfo,
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Status {
    pub code: u16,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What the webhook answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// A JSON Patch (RFC 6902), base64 on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<ByteString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AdmissionResponse {
    pub fn allow(uid: &str) -> Self {
        AdmissionResponse {
            uid: uid.into(),
            allowed: true,
            ..Default::default()
        }
    }

    /// A refusal; `code` is the HTTP status the API server returns to the user (400, 403, 422…).
    pub fn deny(uid: &str, code: u16, message: impl Into<String>) -> Self {
        AdmissionResponse {
            uid: uid.into(),
            allowed: false,
            status: Some(Status {
                code,
                message: message.into(),
                reason: None,
            }),
            ..Default::default()
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct AdmissionReviewIn {
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    pub request: Option<AdmissionRequest>,
}

#[derive(Debug, Serialize)]
pub struct AdmissionReviewOut {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: AdmissionResponse,
}

impl From<AdmissionResponse> for AdmissionReviewOut {
    fn from(response: AdmissionResponse) -> Self {
        AdmissionReviewOut {
            api_version: ADMISSION_API_VERSION,
            kind: "AdmissionReview",
            response,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionRequest {
    pub uid: String,
    #[serde(rename = "desiredAPIVersion")]
    pub desired_api_version: String,
    #[serde(default)]
    pub objects: Vec<Value>,
}

#[derive(Debug, Deserialize)]
pub struct ConversionReviewIn {
    pub request: Option<ConversionRequest>,
}

#[derive(Debug, Default, PartialEq, Serialize)]
pub struct ConversionResult {
    pub status: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionResponse {
    pub uid: String,
    pub result: ConversionResult,
    pub converted_objects: Vec<Value>,
}

#[derive(Debug, Serialize)]
pub struct ConversionReviewOut {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: ConversionResponse,
}

impl From<ConversionResponse> for ConversionReviewOut {
    fn from(response: ConversionResponse) -> Self {
        ConversionReviewOut {
            api_version: CONVERSION_API_VERSION,
            kind: "ConversionReview",
            response,
        }
    }
}
