//! The few vim25 data objects the client reads and writes.
use std::collections::BTreeMap;

use crate::xml::{esc, Element};

/// A managed object reference: its type (`VirtualMachine`, `Folder`, …) and its id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MoRef {
    pub kind: String,
    pub value: String,
}

impl MoRef {
    pub fn new(kind: &str, value: &str) -> Self {
        Self {
            kind: kind.to_string(),
            value: value.to_string(),
        }
    }

    pub fn from_element(e: &Element) -> Option<Self> {
        let kind = e.type_attr.clone()?;
        let value = e.text.trim();
        if value.is_empty() {
            return None;
        }
        Some(Self {
            kind,
            value: value.to_string(),
        })
    }

    pub fn to_xml(&self, element: &str) -> String {
        format!(
            r#"<{element} type="{}">{}</{element}>"#,
            esc(&self.kind),
            esc(&self.value)
        )
    }
}

impl std::fmt::Display for MoRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.value)
    }
}

/// The references of `ServiceInstance.content` the client uses.
#[derive(Clone, Debug)]
pub struct ServiceContent {
    pub root_folder: MoRef,
    pub property_collector: MoRef,
    pub search_index: MoRef,
    pub session_manager: MoRef,
    /// None on a server without custom fields (a standalone ESXi host).
    pub custom_fields_manager: Option<MoRef>,
    pub api_version: String,
}

/// A VM's power state as vSphere names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerState {
    PoweredOn,
    PoweredOff,
    Suspended,
}

impl PowerState {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "poweredOn" => Some(Self::PoweredOn),
            "poweredOff" => Some(Self::PoweredOff),
            "suspended" => Some(Self::Suspended),
            _ => None,
        }
    }
}

/// What a reconcile needs to know of one VM, read in one property retrieval for a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmInfo {
    pub vm: MoRef,
    pub name: String,
    pub num_cpu: Option<u32>,
    pub memory_mb: Option<u64>,
    pub power_state: Option<PowerState>,
    /// Custom field values (`customValue`) by field key.
    pub custom_values: BTreeMap<i32, String>,
    /// `config.extraConfig`, by key.
    pub extra_config: BTreeMap<String, String>,
}

/// The properties read for [`VmInfo`].
pub const VM_INFO_PATHS: [&str; 6] = [
    "name",
    "config.hardware.numCPU",
    "config.hardware.memoryMB",
    "runtime.powerState",
    "customValue",
    "config.extraConfig",
];

/// `customValue` (an `ArrayOfCustomFieldValue`) by field key. vcsim appends a value on every
/// `SetField` instead of replacing it, so the last one of a key wins.
pub fn custom_values(val: Option<&Element>) -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    for v in val.into_iter().flat_map(|v| v.all("CustomFieldValue")) {
        if let (Some(k), Some(value)) = (
            v.child_text("key").and_then(|k| k.trim().parse().ok()),
            v.child_text("value"),
        ) {
            out.insert(k, value.to_string());
        }
    }
    out
}

/// `config.extraConfig` (an `ArrayOfOptionValue`) by key.
pub fn option_values(val: Option<&Element>) -> BTreeMap<String, String> {
    val.into_iter()
        .flat_map(|v| v.all("OptionValue"))
        .filter_map(|o| {
            Some((
                o.child_text("key")?.to_string(),
                o.child_text("value").unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

/// A folder as ownership checks need it: its name, custom field values and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderInfo {
    pub folder: MoRef,
    pub name: String,
    pub custom_values: BTreeMap<i32, String>,
    pub children: Vec<MoRef>,
}
