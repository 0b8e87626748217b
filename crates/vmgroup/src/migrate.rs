//! Taking groups over from the seed's Go operator (codeconnect-vm-operator).
//!
//! The seed kept a VmGroup's VMs in the folder `<vm folder>/<namespace>-<name>`, named
//! `<name>-replica-<8 random letters>`, guarded by the finalizer `vm-operator`, and marked
//! nothing. bosun never takes an unmarked folder or VM by itself ([`crate::owner`]), so a
//! takeover is asked for, per VmGroup, by the annotation [`ADOPT_ANNOTATION`] naming the
//! seed's folder by inventory path. With the seed operator stopped:
//!
//! 1. the folder there (a folder, unmarked or already this group's) gets the group's mark;
//! 2. the unmarked VMs in it named `<name>-replica-` + 8 lowercase letters get the mark too,
//!    and count as members from then on (they fill places, and go first on scale down);
//!    every other VM in the folder stays foreign, left alone;
//! 3. the folder is recorded in `status.folder` and the group goes on from there; the
//!    annotation is not read again.
//!
//! The seed's finalizer is replaced by bosun's at the first reconcile (one patch), so a
//! VmGroup deleted later is not left Terminating for want of the seed operator. A VmGroup
//! deleted before bosun ever reconciled it loses the seed's finalizer and nothing in vCenter
//! is touched (its VMs were never marked).
use bosun_vsphere::{Client, FolderInfo};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::VmGroup;
use crate::error::{Error, Problem};
use crate::owner::{Mark, OWNER_FIELD};
use crate::reason::Reason;
use crate::reconcile::FINALIZER;

/// The seed operator's finalizer.
pub const SEED_FINALIZER: &str = "vm-operator";
/// On a VmGroup: the inventory path of the seed's folder of this group, to take it over.
pub const ADOPT_ANNOTATION: &str = "vmgroup.bosun.dev/adopt-seed-folder";

/// The finalizers the VmGroup should carry: bosun's (`keep`) and never the seed's.
fn wanted(current: &[String], keep: bool) -> Vec<String> {
    let mut next: Vec<String> = current
        .iter()
        .filter(|f| *f != SEED_FINALIZER && *f != FINALIZER)
        .cloned()
        .collect();
    if keep {
        next.push(FINALIZER.to_string());
    }
    next
}

/// Sets bosun's finalizer (`keep`) or removes it, and removes the seed's, in one merge
/// patch guarded by the resourceVersion; nothing is sent when they are as wanted.
pub async fn set_finalizers(api: &Api<VmGroup>, vg: &VmGroup, keep: bool) -> Result<(), Error> {
    let next = wanted(vg.finalizers(), keep);
    if next == vg.finalizers() {
        return Ok(());
    }
    let patch = json!({"metadata": {"finalizers": next, "resourceVersion": vg.resource_version()}});
    match api
        .patch(
            &vg.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 && !keep => Ok(()),
        other => other.map(|_| ()).map_err(Error::from),
    }
}

/// Whether `vm_name` is one of the seed's names for the VmGroup `group`.
pub fn seed_vm_name(group: &str, vm_name: &str) -> bool {
    vm_name
        .strip_prefix(group)
        .and_then(|r| r.strip_prefix("-replica-"))
        .is_some_and(|r| r.len() == 8 && r.bytes().all(|b| b.is_ascii_lowercase()))
}

/// The folder to adopt, when the VmGroup asks for it and has no folder yet.
pub fn adopt_path(vg: &VmGroup) -> Option<&str> {
    if vg.status.as_ref().is_some_and(|s| s.folder.is_some()) {
        return None;
    }
    vg.meta()
        .annotations
        .as_ref()?
        .get(ADOPT_ANNOTATION)
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
}

/// Marks the seed's folder at `path` and its `<name>-replica-<rand>` VMs as this group's;
/// returns the folder and the names of the VMs marked now.
pub async fn adopt(
    vc: &Client,
    group: &str,
    mark: &Mark,
    path: &str,
) -> Result<(FolderInfo, Vec<String>), Error> {
    let at =
        |e: bosun_vsphere::Error| Error::vsphere(&format!("adopting the seed's folder {path}"), &e);
    let refuse = |why: String| {
        Error::VCenter(Problem::new(
            Reason::FolderNotOwned,
            format!("cannot adopt {path} (annotation {ADOPT_ANNOTATION}): {why}"),
        ))
    };
    let Some(found) = vc.find_by_inventory_path(path).await.map_err(at)? else {
        return Err(refuse("nothing is at that inventory path".into()));
    };
    let Some(folder) = vc.folder_info(&found).await.map_err(at)? else {
        return Err(refuse(format!("{found} is not a folder")));
    };
    match folder.custom_values.get(&mark.field_key) {
        Some(v) if v != &mark.uid && !v.is_empty() => {
            return Err(refuse(format!(
                "it carries {OWNER_FIELD} = {v}, another VmGroup's"
            )))
        }
        Some(_) => {}
        None => vc
            .set_field(&folder.folder, mark.field_key, &mark.uid)
            .await
            .map_err(at)?,
    }
    let vms = vc.vms_in_folder(&folder.folder).await.map_err(at)?;
    let mut marked = Vec::new();
    for v in mark.sort(vms).foreign {
        let unmarked = !v.custom_values.contains_key(&mark.field_key)
            && !v.extra_config.contains_key(crate::owner::OWNER_KEY);
        if unmarked && seed_vm_name(group, &v.name) {
            vc.set_field(&v.vm, mark.field_key, &mark.uid)
                .await
                .map_err(at)?;
            marked.push(v.name);
        }
    }
    marked.sort();
    let folder = vc
        .folder_info(&folder.folder)
        .await
        .map_err(at)?
        .ok_or_else(|| refuse("the folder went away meanwhile".into()))?;
    Ok((folder, marked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_seeds_names_for_this_group_are_taken() {
        assert!(seed_vm_name("web", "web-replica-abcdefgh"));
        for other in [
            "web-replica-abcdefg",
            "web-replica-abcdefghi",
            "web-replica-ABCDEFGH",
            "web-replica-abcd3fgh",
            "b-web-replica-abcdefgh",
            "web-1",
            "keep-me",
        ] {
            assert!(!seed_vm_name("web", other), "{other}");
        }
        // Groups sharing the seed's folder (`a-b` + `c`, `a` + `b-c`) take only their own.
        assert!(!seed_vm_name("c", "b-c-replica-abcdefgh"));
    }

    #[test]
    fn the_seeds_finalizer_gives_way_to_bosuns() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            wanted(&f(&["other", SEED_FINALIZER]), true),
            f(&["other", FINALIZER])
        );
        assert_eq!(wanted(&f(&[FINALIZER, SEED_FINALIZER]), false), f(&[]));
        assert_eq!(wanted(&f(&[FINALIZER]), true), f(&[FINALIZER]));
    }
}
