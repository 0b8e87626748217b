//! Typed handlers: an operator writes `Fn(Admission<K>) -> Verdict` (validating) or
//! `Fn(Admission<K>) -> Result<Option<K>, String>` (mutating/defaulting) for its kind `K`,
//! and `Fn(Value, &str) -> Result<Value, String>` per object for conversion. Decoding the
//! objects and encoding the answer (the JSON Patch of a mutation) happen here once.
use std::sync::Arc;

use k8s_openapi::ByteString;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::review::{
    AdmissionRequest, AdmissionResponse, ConversionRequest, ConversionResponse, ConversionResult,
    Operation,
};

/// One admission request, its objects decoded as `K`.
#[derive(Clone, Debug)]
pub struct Admission<K> {
    pub operation: Operation,
    /// The object as it would be stored (absent on DELETE).
    pub object: Option<K>,
    /// The stored object (UPDATE and DELETE).
    pub old_object: Option<K>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub username: String,
    pub dry_run: bool,
}

/// A validating handler's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow {
        warnings: Vec<String>,
    },
    /// `code` is the HTTP status the user gets: 403 unless said otherwise.
    Deny {
        code: u16,
        message: String,
    },
}

impl Verdict {
    pub fn allow() -> Verdict {
        Verdict::Allow { warnings: vec![] }
    }
    pub fn deny(message: impl Into<String>) -> Verdict {
        Verdict::Deny {
            code: 403,
            message: message.into(),
        }
    }
}

pub(crate) type AdmissionFn = Arc<dyn Fn(AdmissionRequest) -> AdmissionResponse + Send + Sync>;
pub(crate) type ConversionFn = Arc<dyn Fn(ConversionRequest) -> ConversionResponse + Send + Sync>;

/// The request's objects as `K`, or the message saying which one is not.
fn decode<K: DeserializeOwned>(req: &mut AdmissionRequest) -> Result<Admission<K>, String> {
    let kind = req.kind.kind.clone();
    let one = |v: Option<Value>, which: &str| -> Result<Option<K>, String> {
        v.map(|v| {
            serde_json::from_value(v).map_err(|e| format!("the {which} is not a valid {kind}: {e}"))
        })
        .transpose()
    };
    let object = one(req.object.take(), "object")?;
    let old_object = one(req.old_object.take(), "stored object")?;
    Ok(Admission {
        operation: req.operation,
        object,
        old_object,
        namespace: req.namespace.clone(),
        name: req.name.clone(),
        username: req.user_info.username.clone(),
        dry_run: req.dry_run.unwrap_or(false),
    })
}

pub(crate) fn validating<K, F>(f: F) -> AdmissionFn
where
    K: DeserializeOwned + 'static,
    F: Fn(Admission<K>) -> Verdict + Send + Sync + 'static,
{
    Arc::new(move |mut req: AdmissionRequest| {
        let admission = match decode::<K>(&mut req) {
            Ok(a) => a,
            Err(message) => return AdmissionResponse::deny(&req.uid, 400, message),
        };
        match f(admission) {
            Verdict::Allow { warnings } => AdmissionResponse {
                warnings,
                ..AdmissionResponse::allow(&req.uid)
            },
            Verdict::Deny { code, message } => AdmissionResponse::deny(&req.uid, code, message),
        }
    })
}

/// The JSON Patch from `before` to `after`, or None when they are equal. Both sides are `K`
/// serialized, so fields `K` does not model are never touched by the patch.
pub fn patch_between<K: Serialize>(before: &K, after: &K) -> Result<Option<Vec<u8>>, String> {
    let a = serde_json::to_value(before).map_err(|e| e.to_string())?;
    let b = serde_json::to_value(after).map_err(|e| e.to_string())?;
    let patch = json_patch::diff(&a, &b);
    if patch.0.is_empty() {
        return Ok(None);
    }
    serde_json::to_vec(&patch)
        .map(Some)
        .map_err(|e| e.to_string())
}

pub(crate) fn mutating<K, F>(f: F) -> AdmissionFn
where
    K: DeserializeOwned + Serialize + Clone + 'static,
    F: Fn(Admission<K>) -> Result<Option<K>, String> + Send + Sync + 'static,
{
    Arc::new(move |mut req: AdmissionRequest| {
        let admission = match decode::<K>(&mut req) {
            Ok(a) => a,
            Err(message) => return AdmissionResponse::deny(&req.uid, 400, message),
        };
        let before = admission.object.clone();
        match (f(admission), before) {
            (Err(message), _) => AdmissionResponse::deny(&req.uid, 403, message),
            (Ok(None), _) | (Ok(Some(_)), None) => AdmissionResponse::allow(&req.uid),
            (Ok(Some(after)), Some(before)) => match patch_between(&before, &after) {
                Ok(None) => AdmissionResponse::allow(&req.uid),
                Ok(Some(patch)) => AdmissionResponse {
                    patch: Some(ByteString(patch)),
                    patch_type: Some("JSONPatch".into()),
                    ..AdmissionResponse::allow(&req.uid)
                },
                Err(e) => AdmissionResponse::deny(
                    &req.uid,
                    500,
                    format!("the webhook could not encode its change: {e}"),
                ),
            },
        }
    })
}

pub(crate) fn converting<F>(f: F) -> ConversionFn
where
    F: Fn(Value, &str) -> Result<Value, String> + Send + Sync + 'static,
{
    Arc::new(move |req: ConversionRequest| {
        let mut converted = Vec::with_capacity(req.objects.len());
        for obj in req.objects {
            match f(obj, &req.desired_api_version) {
                Ok(v) => converted.push(v),
                Err(message) => {
                    return ConversionResponse {
                        uid: req.uid,
                        result: ConversionResult {
                            status: "Failure",
                            message,
                        },
                        converted_objects: vec![],
                    }
                }
            }
        }
        ConversionResponse {
            uid: req.uid,
            result: ConversionResult {
                status: "Success",
                message: String::new(),
            },
            converted_objects: converted,
        }
    })
}
