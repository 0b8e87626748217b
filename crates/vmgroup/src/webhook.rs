//! VmGroup's admission webhooks: what the schema cannot say.
//!
//! **Defaulting** (`/default-vmgroup`, `failurePolicy: Ignore`): `spec.template` is trimmed
//! and a bare name is resolved to its inventory path under the operator's parent folder
//! (`ubuntu` → `/DC0/vm/ubuntu`), so the stored VmGroup names exactly the template its VMs
//! come from, and a later change of the operator's parent folder does not silently point the
//! group at another VM. On UPDATE a template that resolves to the stored one keeps the stored
//! spelling, so re-applying the original manifest changes nothing. `Ignore`: the operator
//! resolves a bare name the same way when it reconciles, so a skipped default loses only the
//! pinning, never a VM.
//!
//! **Validation** (`/validate-vmgroup`, `failurePolicy: Fail`):
//! * `spec.template` cannot change after creation: the existing VMs were cloned from the old
//!   template and would not follow, leaving a group of two different images. This can only
//!   be enforced at admission — once a change is stored, the old value is gone — hence `Fail`.
//! * the template may not be inside the group's own folder (one of its own VMs): scaling down
//!   or deleting the group would destroy its own template (the reconcile refuses it too).
//! * a template outside the operator's `BOSUN_VMGROUP_TEMPLATE_ROOTS`, when set.
//! * what vCenter would refuse (name lengths), the same checks as the reconcile's
//!   ([`crate::validate`]), told at `kubectl apply` instead of in the status later.
//!
//! `cpu` and `memory` may change: the operator reconfigures the VMs (each powered off,
//! reconfigured, powered on again — the "applied to the VMs"); the answer carries a
//! warning saying so, since it interrupts each VM. An UPDATE that leaves the spec as it is —
//! a label, the operator releasing its finalizer — is always allowed, so a group stored
//! before the webhooks existed can still be changed in metadata and deleted.
use bosun_runtime::webhook::config::{self, CaInjection, FailurePolicy, Hook, Target};
use bosun_runtime::webhook::{Admission, Configurations, Operation, Verdict, Webhooks};

use crate::api::VmGroup;
use crate::validate::validate;

pub const DEFAULT_PATH: &str = "/default-vmgroup";
pub const VALIDATE_PATH: &str = "/validate-vmgroup";
/// The name of both configurations.
pub const CONFIGURATION: &str = "bosun-vmgroup";

/// `template` as the operator reads it: an inventory path.
pub fn resolve_template(template: &str, parent: &str) -> String {
    let t = template.trim();
    if t.starts_with('/') || t.is_empty() {
        t.to_string()
    } else {
        format!("{}/{t}", parent.trim_end_matches('/'))
    }
}

/// The defaulting webhook: the object to store, or None when nothing changes.
pub fn default(a: Admission<VmGroup>, parent: &str) -> Result<Option<VmGroup>, String> {
    let Some(mut vg) = a.object else {
        return Ok(None);
    };
    let resolved = resolve_template(&vg.spec.template, parent);
    let unchanged = a
        .old_object
        .as_ref()
        .filter(|old| resolve_template(&old.spec.template, parent) == resolved);
    vg.spec.template = match unchanged {
        Some(old) => old.spec.template.clone(),
        None => resolved,
    };
    Ok(Some(vg))
}

/// The validating webhook.
pub fn check(a: Admission<VmGroup>, parent: &str, roots: Option<&[String]>) -> Verdict {
    let Some(vg) = a.object else {
        return Verdict::allow();
    };
    let mut warnings = vec![];
    if let (Operation::Update, Some(old)) = (a.operation, &a.old_object) {
        if old.spec == vg.spec {
            return Verdict::allow();
        }
        let (was, is) = (
            resolve_template(&old.spec.template, parent),
            resolve_template(&vg.spec.template, parent),
        );
        if was != is {
            return Verdict::deny(format!(
                "spec.template cannot change after creation (it is {was:?}; this sets {is:?}): the \
                 VMs were cloned from it and would not follow. To move the group to another \
                 template, create a new VmGroup with that template, then delete this one"
            ));
        }
        if (old.spec.cpu, old.spec.memory) != (vg.spec.cpu, vg.spec.memory) {
            warnings.push(format!(
                "each VM of {} is powered off, reconfigured to {} CPU and {} GB, and powered on again",
                vg.metadata.name.as_deref().unwrap_or("the group"),
                vg.spec.cpu,
                vg.spec.memory
            ));
        }
    }
    // The namespace is the request's: on CREATE the object may not carry it yet.
    let mut named = vg.clone();
    if named.metadata.namespace.is_none() {
        named.metadata.namespace = a.namespace.clone();
    }
    // The template roots and the group's own folder are the reconcile's checks, told here at
    // `kubectl apply`.
    if let Err(problem) = validate(&named, parent, roots) {
        return Verdict::deny(problem.message);
    }
    Verdict::Allow { warnings }
}

/// The handlers, for the operator's parent folder, any template allowed.
pub fn webhooks(parent: &str) -> Webhooks {
    webhooks_with(parent, None)
}

/// The handlers, for the operator's parent folder and template roots (None: any template).
pub fn webhooks_with(parent: &str, roots: Option<Vec<String>>) -> Webhooks {
    let (p1, p2) = (parent.to_string(), parent.to_string());
    Webhooks::new()
        .mutate(DEFAULT_PATH, move |a| default(a, &p1))
        .validate(VALIDATE_PATH, move |a| check(a, &p2, roots.as_deref()))
}

/// The two hooks, `namespace_selector` restricting them (None: every namespace). See the
/// module documentation for each failure policy.
pub fn hooks(
    namespace_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> (Hook, Hook) {
    let rules = vec![config::rule(
        "vm.codeconnect.vmworld.com",
        "v1alpha1",
        &["vmgroups"],
        &["CREATE", "UPDATE"],
    )];
    let defaulting = Hook {
        name: "default.vmgroups.vm.codeconnect.vmworld.com".into(),
        path: DEFAULT_PATH.into(),
        rules: rules.clone(),
        failure_policy: FailurePolicy::Ignore,
        namespace_selector: namespace_selector.clone(),
        timeout_seconds: 5,
    };
    let validating = Hook {
        name: "validate.vmgroups.vm.codeconnect.vmworld.com".into(),
        path: VALIDATE_PATH.into(),
        rules,
        failure_policy: FailurePolicy::Fail,
        namespace_selector,
        timeout_seconds: 5,
    };
    (defaulting, validating)
}

/// Both configurations, pointing at `target`, named `name`.
pub fn configurations(
    name: &str,
    target: &Target,
    ca: &CaInjection,
    hooks: (Hook, Hook),
) -> Configurations {
    Configurations {
        mutating: Some(config::mutating(name, target, ca, &[hooks.0])),
        validating: Some(config::validating(name, target, ca, &[hooks.1])),
        crds: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::sample;

    fn admission(op: Operation, old: Option<VmGroup>, new: VmGroup) -> Admission<VmGroup> {
        Admission {
            operation: op,
            object: Some(new),
            old_object: old,
            namespace: Some("team".into()),
            name: Some("web".into()),
            username: "alice".into(),
            dry_run: false,
        }
    }

    fn denied(v: Verdict) -> String {
        match v {
            Verdict::Deny { message, .. } => message,
            other => panic!("allowed: {other:?}"),
        }
    }

    #[test]
    fn a_bare_template_is_pinned_to_its_path_and_a_same_template_keeps_its_spelling() {
        let mut vg = sample();
        vg.spec.template = "  DC0_H0_VM0 ".into();
        let out = default(admission(Operation::Create, None, vg.clone()), "/DC0/vm/")
            .expect("ok")
            .expect("object");
        assert_eq!(out.spec.template, "/DC0/vm/DC0_H0_VM0");
        let mut stored = sample();
        stored.spec.template = "DC0_H0_VM0".into();
        let out = default(admission(Operation::Update, Some(stored), vg), "/DC0/vm")
            .expect("ok")
            .expect("object");
        assert_eq!(
            out.spec.template, "DC0_H0_VM0",
            "no change to the stored spec"
        );
    }

    #[test]
    fn the_template_cannot_change_and_the_message_says_what_to_do() {
        let old = sample();
        let mut new = sample();
        new.spec.template = "other".into();
        let m = denied(check(
            admission(Operation::Update, Some(old.clone()), new),
            "/DC0/vm",
            None,
        ));
        assert!(m.contains("cannot change after creation"), "{m}");
        assert!(m.contains("create a new VmGroup"), "{m}");
        // The same template spelled as its path is no change.
        let mut same = sample();
        same.spec.template = "/DC0/vm/DC0_H0_VM0".into();
        assert_eq!(
            check(
                admission(Operation::Update, Some(old), same),
                "/DC0/vm",
                None
            ),
            Verdict::allow()
        );
    }

    #[test]
    fn a_shape_change_is_allowed_with_a_warning() {
        let old = sample();
        let mut new = sample();
        new.spec.cpu = 4;
        match check(
            admission(Operation::Update, Some(old), new),
            "/DC0/vm",
            None,
        ) {
            Verdict::Allow { warnings } => {
                assert_eq!(warnings.len(), 1);
                assert!(warnings[0].contains("powered off"), "{warnings:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_template_in_the_groups_own_folder_is_refused() {
        let mut vg = sample();
        vg.spec.template = "/DC0/vm/team_web/web-1".into();
        let m = denied(check(
            admission(Operation::Create, None, vg),
            "/DC0/vm",
            None,
        ));
        assert!(m.contains("own folder /DC0/vm/team_web"), "{m}");
        let mut vg = sample();
        vg.spec.template = "/DC0/vm/team_web2/x".into();
        assert_eq!(
            check(admission(Operation::Create, None, vg), "/DC0/vm", None),
            Verdict::allow()
        );
    }

    #[test]
    fn a_template_outside_the_roots_is_refused_at_admission() {
        let roots = vec!["/DC0/vm/templates".to_string()];
        let mut vg = sample();
        vg.spec.template = "/DC0/vm/templates-evil/x".into();
        let m = denied(check(
            admission(Operation::Create, None, vg.clone()),
            "/DC0/vm",
            Some(&roots),
        ));
        assert!(m.contains("BOSUN_VMGROUP_TEMPLATE_ROOTS"), "{m}");
        vg.spec.template = "/DC0/vm/templates/x".into();
        assert_eq!(
            check(
                admission(Operation::Create, None, vg),
                "/DC0/vm",
                Some(&roots)
            ),
            Verdict::allow()
        );
    }

    #[test]
    fn names_vcenter_would_refuse_are_refused_at_admission() {
        let mut vg = sample();
        vg.metadata.name = Some("n".repeat(79));
        let m = denied(check(
            admission(Operation::Create, None, vg),
            "/DC0/vm",
            None,
        ));
        assert!(m.contains("80"), "{m}");
    }

    /// The policies the module documentation gives reasons for.
    #[test]
    fn defaulting_is_ignore_and_validation_is_fail() {
        let (defaulting, validating) = hooks(None);
        assert_eq!(defaulting.failure_policy, FailurePolicy::Ignore);
        assert_eq!(validating.failure_policy, FailurePolicy::Fail);
        assert_eq!(
            (defaulting.path.as_str(), validating.path.as_str()),
            (DEFAULT_PATH, VALIDATE_PATH)
        );
    }

    #[test]
    fn metadata_changes_of_an_invalid_group_are_allowed() {
        let mut old = sample();
        old.metadata.name = Some("n".repeat(79));
        let mut new = old.clone();
        new.metadata.finalizers = None;
        assert_eq!(
            check(
                admission(Operation::Update, Some(old), new),
                "/DC0/vm",
                None
            ),
            Verdict::allow()
        );
    }
}
