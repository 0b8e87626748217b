//! Ownership in vCenter: what a VmGroup made carries its UID, and nothing without it is
//! changed, reshaped or destroyed.
//!
//! - A folder bosun creates gets the custom field [`OWNER_FIELD`] set to the VmGroup's UID
//!   at once after `CreateFolder`. A folder at the group's path without that value (made by
//!   a person, another tool, another group) is never adopted: the group stops with
//!   `FolderNotOwned` and touches nothing in it.
//! - A VM bosun clones carries the UID twice: in `config.extraConfig` [`OWNER_KEY`], given to
//!   the clone task itself, so a clone that completes after the operator crashed still
//!   carries it; and in the custom field, set after the clone (the one a vSphere admin sees
//!   in the client), and repaired when missing. Either value makes the VM the group's.
//! - Every other VM in the group's folder is foreign: listed in the `ForeignObjects`
//!   condition and a Warning Event, never counted, reshaped, powered or destroyed; a number
//!   whose name a foreign VM holds is not cloned over it.
//! - The folder is found by the reference recorded in `status.folder` first (a changed
//!   parent folder setting neither loses nor duplicates a group), by its path only before
//!   that, and the mark is checked either way.
use bosun_vsphere::{FolderInfo, VmInfo};

/// The custom field on folders and VMs, and the extraConfig key on VMs, holding the UID of
/// the VmGroup that created them.
pub const OWNER_FIELD: &str = "bosun.vmgroup.owner";
pub const OWNER_KEY: &str = "bosun.vmgroup.owner";

/// The mark of one VmGroup: the custom field's key in this vCenter and the group's UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub field_key: i32,
    pub uid: String,
}

/// The group's VMs in its folder, sorted apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Marked with this group's UID.
    pub owned: Vec<VmInfo>,
    /// Owned through extraConfig only (the custom field not set yet): the field is set.
    pub unlabelled: Vec<VmInfo>,
    /// Everything else: left alone.
    pub foreign: Vec<VmInfo>,
}

impl Mark {
    pub fn owns_folder(&self, f: &FolderInfo) -> bool {
        !self.uid.is_empty() && f.custom_values.get(&self.field_key) == Some(&self.uid)
    }

    fn field(&self, v: &VmInfo) -> bool {
        v.custom_values.get(&self.field_key) == Some(&self.uid)
    }

    fn extra(&self, v: &VmInfo) -> bool {
        v.extra_config.get(OWNER_KEY) == Some(&self.uid)
    }

    pub fn sort(&self, seen: Vec<VmInfo>) -> Members {
        let mut m = Members::default();
        for v in seen {
            if self.uid.is_empty() {
                m.foreign.push(v);
            } else if self.field(&v) {
                m.owned.push(v);
            } else if self.extra(&v) {
                m.unlabelled.push(v.clone());
                m.owned.push(v);
            } else {
                m.foreign.push(v);
            }
        }
        m.foreign.sort_by(|a, b| a.name.cmp(&b.name));
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_vsphere::MoRef;

    fn vm(name: &str, field: Option<(i32, &str)>, extra: Option<&str>) -> VmInfo {
        VmInfo {
            vm: MoRef::new("VirtualMachine", name),
            name: name.into(),
            num_cpu: Some(1),
            memory_mb: Some(1024),
            power_state: None,
            custom_values: field.map(|(k, v)| (k, v.to_string())).into_iter().collect(),
            extra_config: extra
                .map(|v| (OWNER_KEY.to_string(), v.to_string()))
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn only_this_groups_uid_owns_a_vm_or_a_folder() {
        let mark = Mark {
            field_key: 7,
            uid: "uid-a".into(),
        };
        let m = mark.sort(vec![
            vm("web-1", Some((7, "uid-a")), None),
            vm("web-2", None, Some("uid-a")),
            vm("web-3", Some((7, "uid-b")), Some("uid-b")),
            vm("web-4", Some((8, "uid-a")), None),
            vm("keep-me", None, None),
        ]);
        let names = |v: &[VmInfo]| v.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&m.owned), ["web-1", "web-2"]);
        assert_eq!(names(&m.unlabelled), ["web-2"]);
        assert_eq!(names(&m.foreign), ["keep-me", "web-3", "web-4"]);
        let folder = |values: &[(i32, &str)]| FolderInfo {
            folder: MoRef::new("Folder", "group-1"),
            name: "team_web".into(),
            custom_values: values.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            children: vec![],
        };
        assert!(mark.owns_folder(&folder(&[(7, "uid-a")])));
        assert!(!mark.owns_folder(&folder(&[])));
        assert!(!mark.owns_folder(&folder(&[(7, "uid-b"), (8, "uid-a")])));
        // No UID (never the case for a stored object) owns nothing.
        let none = Mark {
            field_key: 7,
            uid: String::new(),
        };
        assert!(!none.owns_folder(&folder(&[(7, "")])));
        assert_eq!(none.sort(vec![vm("x", Some((7, "")), None)]).owned, vec![]);
    }
}
