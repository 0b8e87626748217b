//! A VmGroup in, the [`Plan`] out: what the schema cannot check (names vCenter accepts) and
//! every value the pipeline needs — folder, template path, VM names and shape — computed once.
use bosun_vsphere::Shape;
use kube::ResourceExt;

use crate::api::VmGroup;
use crate::error::Problem;
use crate::reason::Reason;

/// vCenter refuses inventory names longer than this.
pub const MAX_NAME: usize = 80;

/// Which VmGroup and where its VMs live: known even when the spec is invalid (the finalizer
/// needs it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: Option<i64>,
    /// `<namespace>_<name>`: Kubernetes allows no `_` in either, so no two VmGroups share a
    /// folder name (with `-`, namespace `a-b` + group `c` and namespace `a` + group `b-c`
    /// did).
    pub folder_name: String,
    /// `<parent>/<namespace>_<name>`.
    pub folder_path: String,
}

impl Identity {
    pub fn of(vg: &VmGroup, parent: &str) -> Identity {
        let namespace = vg.namespace().unwrap_or_default();
        let name = vg.name_any();
        let folder_name = format!("{namespace}_{name}");
        Identity {
            folder_path: format!("{}/{folder_name}", parent.trim_end_matches('/')),
            folder_name,
            namespace,
            name,
            uid: vg.uid().unwrap_or_default(),
            generation: vg.metadata.generation,
        }
    }
}

/// Everything the pipeline needs from a valid VmGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub id: Identity,
    /// Inventory path of the template.
    pub template_path: String,
    pub shape: Shape,
    pub replicas: u32,
}

impl Plan {
    /// The name of VM `n` (1-based): `<name>-<n>`. Deterministic, so a clone interrupted by
    /// a crash is found again by name (a second clone fails with DuplicateName) instead of
    /// becoming an untracked extra VM.
    pub fn vm_name(&self, n: u32) -> String {
        format!("{}-{n}", self.id.name)
    }

    /// The number of a VM of this group from its name; None for any other name.
    pub fn vm_index(&self, vm_name: &str) -> Option<u32> {
        let rest = vm_name.strip_prefix(&self.id.name)?.strip_prefix('-')?;
        if rest.is_empty() || rest.starts_with('0') || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        rest.parse().ok().filter(|n| *n >= 1)
    }

    pub fn vm_path(&self, vm_name: &str) -> String {
        format!("{}/{vm_name}", self.id.folder_path)
    }
}

/// An inventory path in one spelling: absolute, no empty components (`//`, a trailing `/`).
/// vCenter's inventory paths have no `.` or `..`: a path with either is refused rather than
/// resolved, so what is checked is exactly what vCenter is asked for.
pub fn normalize_path(path: &str) -> Result<String, String> {
    let path = path.trim();
    if !path.starts_with('/') {
        return Err(format!("{path:?} is not an inventory path starting with /"));
    }
    let mut out = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(format!(
                "{path:?} contains {part:?}: vCenter inventory paths have no relative parts"
            ));
        }
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        return Err(format!("{path:?} names no object"));
    }
    Ok(out)
}

/// Whether the normalized `path` is `root` or lies under it, compared by whole components
/// (`/dc/vm/templates-evil` is not under `/dc/vm/templates`). A root that is not a valid
/// inventory path holds nothing.
pub fn is_under(path: &str, root: &str) -> bool {
    let Ok(root) = normalize_path(root) else {
        return false;
    };
    path == root
        || path
            .strip_prefix(root.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The plan of `vg`, VMs under the parent folder `parent`, its template under one of `roots`
/// (None: anywhere); or the problem with its spec.
pub fn validate(vg: &VmGroup, parent: &str, roots: Option<&[String]>) -> Result<Plan, Problem> {
    let id = Identity::of(vg, parent);
    let s = &vg.spec;
    let invalid = |m: String| Err(Problem::new(Reason::InvalidSpec, m));
    if !(1..=4).contains(&s.cpu) {
        return invalid(format!("cpu is {}; it must be 1 to 4", s.cpu));
    }
    if !(1..=8).contains(&s.memory) {
        return invalid(format!("memory is {} GB; it must be 1 to 8", s.memory));
    }
    if s.replicas < 1 {
        return invalid(format!("replicas is {}; it must be at least 1", s.replicas));
    }
    let template = s.template.trim();
    if template.is_empty() {
        return invalid("template is empty; name the VM or template to clone".into());
    }
    if id.folder_name.len() > MAX_NAME {
        return invalid(format!(
            "the folder name {} has {} characters; vCenter allows {MAX_NAME}: use a shorter name or namespace",
            id.folder_name,
            id.folder_name.len()
        ));
    }
    let replicas = s.replicas as u32;
    let last = format!("{}-{replicas}", id.name);
    if last.len() > MAX_NAME {
        return invalid(format!(
            "VM names such as {last} would exceed vCenter's {MAX_NAME} characters: use a shorter VmGroup name"
        ));
    }
    let resolved = if template.starts_with('/') {
        template.to_string()
    } else {
        format!("{}/{template}", parent.trim_end_matches('/'))
    };
    let not_allowed = |why: String| {
        Err(Problem::new(
            Reason::TemplateNotAllowed,
            format!(
                "{why}; this operator clones only templates under {} (BOSUN_VMGROUP_TEMPLATE_ROOTS): \
                 nothing was cloned",
                match roots.unwrap_or_default() {
                    [] => "no path (the setting lists none)".to_string(),
                    some => some.join(", "),
                }
            ),
        ))
    };
    let template_path = match normalize_path(&resolved) {
        Ok(p) => p,
        Err(e) if roots.is_some() => return not_allowed(format!("spec.template {e}")),
        Err(e) => return invalid(format!("spec.template {e}")),
    };
    if let Some(roots) = roots {
        if !roots.iter().any(|r| is_under(&template_path, r)) {
            return not_allowed(format!("spec.template {template_path} is not allowed"));
        }
    }
    if let Some(folder) = own_folder(&id, &template_path) {
        return invalid(format!(
            "spec.template {template_path} is inside this group's own folder {folder}: scaling \
             down or deleting the group would destroy its own template. Clone from a VM or \
             template outside the folder"
        ));
    }
    Ok(Plan {
        id,
        template_path,
        shape: Shape {
            num_cpus: s.cpu as u32,
            memory_mb: 1024 * s.memory as u64,
        },
        replicas,
    })
}

/// The group's folder (normalized) when `template_path` (normalized) lies inside it.
pub fn own_folder(id: &Identity, template_path: &str) -> Option<String> {
    let folder = normalize_path(&id.folder_path).ok()?;
    (template_path != folder && is_under(template_path, &folder)).then_some(folder)
}

#[cfg(test)]
pub mod fixtures {
    use crate::api::{VmGroup, VmGroupSpec};

    pub fn sample() -> VmGroup {
        let mut vg = VmGroup::new(
            "web",
            VmGroupSpec {
                cpu: 2,
                memory: 3,
                template: "DC0_H0_VM0".into(),
                replicas: 2,
            },
        );
        vg.metadata.namespace = Some("team".into());
        vg.metadata.uid = Some("uid-1".into());
        vg.metadata.generation = Some(4);
        vg
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::sample;
    use super::*;

    #[test]
    fn the_plan_holds_folder_template_names_and_shape() {
        let p = validate(&sample(), "/DC0/vm/", None).expect("valid");
        assert_eq!(p.id.folder_path, "/DC0/vm/team_web");
        assert_eq!(p.template_path, "/DC0/vm/DC0_H0_VM0");
        assert_eq!(
            p.shape,
            Shape {
                num_cpus: 2,
                memory_mb: 3072
            }
        );
        assert_eq!(p.vm_name(1), "web-1");
        assert_eq!(p.vm_path("web-1"), "/DC0/vm/team_web/web-1");
        let mut vg = sample();
        vg.spec.template = "/Other/vm/tpl".into();
        assert_eq!(
            validate(&vg, "/DC0/vm", None).expect("valid").template_path,
            "/Other/vm/tpl"
        );
    }

    #[test]
    fn paths_are_compared_by_whole_components_in_one_spelling() {
        assert_eq!(normalize_path("//DC0//vm/t/").as_deref(), Ok("/DC0/vm/t"));
        for bad in ["/DC0/vm/t/../evil", "/DC0/./vm", "..", "DC0/vm", "/", "//"] {
            assert!(normalize_path(bad).is_err(), "{bad}");
        }
        assert!(is_under("/dc/vm/templates/ubuntu", "/dc/vm/templates"));
        assert!(is_under("/dc/vm/templates/a/b", "/dc//vm/templates/"));
        assert!(is_under("/dc/vm/templates", "/dc/vm/templates"));
        assert!(!is_under("/dc/vm/templates-evil/x", "/dc/vm/templates"));
        assert!(!is_under("/dc/vm/templatesx", "/dc/vm/templates"));
        assert!(!is_under("/dc/vm", "/dc/vm/templates"));
        assert!(
            !is_under("/dc/vm/x", "/dc/vm/templates/.."),
            "an invalid root holds nothing"
        );
        assert!(!is_under("/dc/vm/x", "relative"));
    }

    #[test]
    fn a_template_outside_the_roots_is_not_allowed_and_nothing_fools_the_check() {
        let roots = vec!["/DC0/vm/templates".to_string(), "/DC1/vm/gold/".to_string()];
        let with = |t: &str| {
            let mut vg = sample();
            vg.spec.template = t.into();
            validate(&vg, "/DC0/vm", Some(&roots))
        };
        assert_eq!(
            with("/DC0/vm/templates/ubuntu")
                .expect("allowed")
                .template_path,
            "/DC0/vm/templates/ubuntu"
        );
        assert_eq!(
            with("//DC1//vm/gold/x").expect("allowed").template_path,
            "/DC1/vm/gold/x",
            "the path cloned is the one checked"
        );
        for refused in [
            "/DC0/vm/templates-evil/x",
            "/DC0/vm/templates/../secret/dc01",
            "/DC0/vm/templates/./x",
            "DC0_H0_VM0",
            "/DC1/vm/golden",
        ] {
            let e = with(refused).expect_err(refused);
            assert_eq!(e.reason, Reason::TemplateNotAllowed, "{refused}");
            assert!(
                e.message.contains("/DC0/vm/templates, /DC1/vm/gold/"),
                "{}",
                e.message
            );
        }
        // A bare name resolves under the parent, so a root may be the parent itself.
        let mut vg = sample();
        vg.spec.template = "ubuntu".into();
        assert!(validate(&vg, "/DC0/vm/templates", Some(&roots)).is_ok());
        let e = validate(&vg, "/DC0/vm", Some(&[])).expect_err("no root");
        assert!(e.message.contains("no path"), "{}", e.message);
        // Unrestricted: any absolute template, as before; `..` is still no inventory path.
        assert!(with("/Other/vm/x").is_err());
        vg.spec.template = "/Other/vm/x".into();
        assert!(validate(&vg, "/DC0/vm", None).is_ok());
        vg.spec.template = "/DC0/vm/a/../b".into();
        let e = validate(&vg, "/DC0/vm", None).expect_err("..");
        assert_eq!(e.reason, Reason::InvalidSpec);
    }

    #[test]
    fn a_template_inside_the_groups_own_folder_is_invalid_without_any_webhook() {
        for t in [
            "/DC0/vm/team_web/web-1",
            "//DC0/vm//team_web/web-1",
            "team_web/web-1",
        ] {
            let mut vg = sample();
            vg.spec.template = t.into();
            let e = validate(&vg, "/DC0/vm", None).expect_err(t);
            assert_eq!(e.reason, Reason::InvalidSpec);
            assert!(
                e.message.contains("own folder /DC0/vm/team_web"),
                "{}",
                e.message
            );
        }
        let mut vg = sample();
        vg.spec.template = "/DC0/vm/team_web2/x".into();
        assert!(validate(&vg, "/DC0/vm", None).is_ok());
    }

    #[test]
    fn folder_names_of_different_groups_never_collide() {
        let id = |ns: &str, name: &str| {
            let mut vg = sample();
            vg.metadata.namespace = Some(ns.into());
            vg.metadata.name = Some(name.into());
            Identity::of(&vg, "/DC0/vm").folder_name
        };
        assert_ne!(id("a-b", "c"), id("a", "b-c"));
        assert_ne!(id("a", "b.c"), id("a-b", "c"));
        assert_eq!(id("a-b", "c"), "a-b_c");
    }

    #[test]
    fn only_the_groups_own_names_have_an_index() {
        let p = validate(&sample(), "/DC0/vm", None).expect("valid");
        assert_eq!(p.vm_index("web-1"), Some(1));
        assert_eq!(p.vm_index("web-12"), Some(12));
        for other in [
            "web-0", "web-01", "web-", "web", "web-1a", "webx-1", "web-x-1", "other-1",
        ] {
            assert_eq!(p.vm_index(other), None, "{other}");
        }
    }

    #[test]
    fn what_vcenter_would_refuse_is_refused_with_the_reason() {
        let mut vg = sample();
        vg.metadata.name = Some("n".repeat(79));
        let e = validate(&vg, "/DC0/vm", None).expect_err("too long");
        assert_eq!(e.reason, Reason::InvalidSpec);
        assert!(e.message.contains("80"), "{}", e.message);
        let mut vg = sample();
        vg.spec.cpu = 5;
        assert!(validate(&vg, "/DC0/vm", None)
            .expect_err("cpu")
            .message
            .contains("1 to 4"));
        let mut vg = sample();
        vg.spec.template = "  ".into();
        assert!(validate(&vg, "/DC0/vm", None).is_err());
    }
}
