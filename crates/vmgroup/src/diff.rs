//! What to do to a group, decided (purely) from the plan and its VMs as one property
//! retrieval showed them. VMs are numbered `<name>-1` … `<name>-<replicas>`; scale down
//! removes the highest numbers first, so the group stays `1..=replicas` without gaps.
//!
//! A number held by two VMs is a clone repeated after a crash: the crashed operator's clone
//! finished after its replacement cloned the same name again. vCenter refuses a second VM
//! of one name in a folder, but not every server does (vcsim 0.24 accepts it), so the
//! extra one is removed rather than trusted never to exist.
use bosun_vsphere::{PowerState, VmInfo};

use crate::validate::Plan;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actions {
    /// Names of the VMs to clone, in number order.
    pub clone: Vec<String>,
    /// VMs with another shape: reconfigured (powered off first when on), then powered on.
    pub reshape: Vec<VmInfo>,
    /// VMs of the right shape that are not powered on.
    pub power_on: Vec<VmInfo>,
    /// VMs numbered above `replicas`, highest first.
    pub remove: Vec<VmInfo>,
    /// Second VMs of a number already held: removed, the one in the best state kept.
    pub duplicates: Vec<VmInfo>,
    /// Other VMs in the folder (not named as this group's): left alone.
    pub foreign: Vec<String>,
}

impl Actions {
    pub fn is_empty(&self) -> bool {
        self.clone.is_empty()
            && self.reshape.is_empty()
            && self.power_on.is_empty()
            && self.remove.is_empty()
            && self.duplicates.is_empty()
    }
}

/// Which of two VMs of one number to keep: the one that needs the least work (shaped, then
/// powered on), then the lower reference (usually the older), so every reconcile picks the
/// same one.
fn rank(plan: &Plan, v: &VmInfo) -> (bool, bool, String) {
    (
        !shaped(plan, v),
        v.power_state != Some(PowerState::PoweredOn),
        v.vm.value.clone(),
    )
}

/// The VMs of the group, one per number (see [`rank`]), and the duplicates.
fn one_per_number<'a>(plan: &Plan, seen: &'a [VmInfo]) -> (Vec<&'a VmInfo>, Vec<&'a VmInfo>) {
    let mut by_rank: Vec<&VmInfo> = seen.iter().collect();
    by_rank.sort_by_key(|v| rank(plan, v));
    let mut taken = std::collections::BTreeSet::new();
    let (mut kept, mut duplicates) = (Vec::new(), Vec::new());
    for v in by_rank {
        match plan.vm_index(&v.name) {
            Some(n) if !taken.insert(n) => duplicates.push(v),
            _ => kept.push(v),
        }
    }
    (kept, duplicates)
}

/// VMs of the group that count as current: numbered within `replicas`, of the planned shape,
/// powered on.
pub fn current(plan: &Plan, seen: &[VmInfo]) -> u32 {
    one_per_number(plan, seen)
        .0
        .into_iter()
        .filter(|v| {
            plan.vm_index(&v.name).is_some_and(|n| n <= plan.replicas)
                && shaped(plan, v)
                && v.power_state == Some(PowerState::PoweredOn)
        })
        .count() as u32
}

fn shaped(plan: &Plan, v: &VmInfo) -> bool {
    v.num_cpu == Some(plan.shape.num_cpus) && v.memory_mb == Some(plan.shape.memory_mb)
}

pub fn decide(plan: &Plan, seen: &[VmInfo]) -> Actions {
    let mut a = Actions::default();
    let mut present = vec![false; plan.replicas as usize + 1];
    let mut extra: Vec<(u32, VmInfo)> = Vec::new();
    let (kept, duplicates) = one_per_number(plan, seen);
    a.duplicates = duplicates.into_iter().cloned().collect();
    a.duplicates.sort_by(|x, y| x.name.cmp(&y.name));
    for v in kept {
        match plan.vm_index(&v.name) {
            Some(n) if n <= plan.replicas => {
                present[n as usize] = true;
                if !shaped(plan, v) {
                    a.reshape.push(v.clone());
                } else if v.power_state != Some(PowerState::PoweredOn) {
                    a.power_on.push(v.clone());
                }
            }
            Some(n) => extra.push((n, v.clone())),
            None => a.foreign.push(v.name.clone()),
        }
    }
    a.clone = (1..=plan.replicas)
        .filter(|n| !present[*n as usize])
        .map(|n| plan.vm_name(n))
        .collect();
    extra.sort_by_key(|x| std::cmp::Reverse(x.0));
    a.remove = extra.into_iter().map(|(_, v)| v).collect();
    a.foreign.sort();
    a.reshape.sort_by(|x, y| x.name.cmp(&y.name));
    a.power_on.sort_by(|x, y| x.name.cmp(&y.name));
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::{fixtures::sample, validate};
    use bosun_vsphere::MoRef;

    fn vm(name: &str, cpu: u32, mem: u64, on: bool) -> VmInfo {
        VmInfo {
            vm: MoRef::new("VirtualMachine", &format!("vm-{name}")),
            name: name.into(),
            num_cpu: Some(cpu),
            memory_mb: Some(mem),
            power_state: Some(if on {
                PowerState::PoweredOn
            } else {
                PowerState::PoweredOff
            }),
        }
    }

    fn plan(replicas: i32) -> Plan {
        let mut vg = sample();
        vg.spec.replicas = replicas;
        validate(&vg, "/DC0/vm").expect("valid")
    }

    #[test]
    fn an_empty_folder_clones_every_number() {
        let a = decide(&plan(3), &[]);
        assert_eq!(a.clone, ["web-1", "web-2", "web-3"]);
        assert!(a.reshape.is_empty() && a.power_on.is_empty() && a.remove.is_empty());
    }

    #[test]
    fn gaps_are_filled_and_a_group_in_shape_needs_nothing() {
        let p = plan(3);
        let seen = [vm("web-1", 2, 3072, true), vm("web-3", 2, 3072, true)];
        assert_eq!(decide(&p, &seen).clone, ["web-2"]);
        assert_eq!(current(&p, &seen), 2);
        let full = [
            vm("web-1", 2, 3072, true),
            vm("web-2", 2, 3072, true),
            vm("web-3", 2, 3072, true),
        ];
        assert!(decide(&p, &full).is_empty());
        assert_eq!(current(&p, &full), 3);
    }

    #[test]
    fn scale_down_removes_the_highest_numbers_first() {
        let seen = [
            vm("web-2", 2, 3072, true),
            vm("web-10", 2, 3072, true),
            vm("web-1", 2, 3072, true),
            vm("web-3", 2, 3072, false),
        ];
        let a = decide(&plan(1), &seen);
        let names: Vec<&str> = a.remove.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["web-10", "web-3", "web-2"]);
        assert!(a.clone.is_empty());
    }

    #[test]
    fn a_second_vm_of_a_number_is_removed_and_the_best_one_kept() {
        let p = plan(2);
        let mut fresh = vm("web-1", 1, 32, false);
        fresh.vm = MoRef::new("VirtualMachine", "vm-9");
        let seen = [
            fresh.clone(),
            vm("web-1", 2, 3072, true),
            vm("web-2", 2, 3072, true),
        ];
        let a = decide(&p, &seen);
        assert_eq!(a.duplicates, [fresh.clone()], "the unshaped copy goes");
        assert!(a.reshape.is_empty() && a.power_on.is_empty() && a.clone.is_empty());
        assert_eq!(current(&p, &seen), 2, "a number counts once");
        // Two alike: the lower reference is kept, whatever order they are read in.
        let (x, mut y) = (vm("web-1", 2, 3072, true), vm("web-1", 2, 3072, true));
        y.vm = MoRef::new("VirtualMachine", "vm-zz");
        for seen in [[x.clone(), y.clone()], [y.clone(), x.clone()]] {
            assert_eq!(decide(&plan(1), &seen).duplicates, [y.clone()]);
            assert_eq!(current(&plan(1), &seen), 1);
        }
    }

    #[test]
    fn wrong_shape_is_reshaped_and_powered_off_is_powered_on() {
        let p = plan(3);
        let seen = [
            vm("web-1", 1, 3072, true),
            vm("web-2", 2, 1024, false),
            vm("web-3", 2, 3072, false),
            vm("someone-elses", 1, 1024, true),
        ];
        let a = decide(&p, &seen);
        let names = |v: &[VmInfo]| v.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a.reshape), ["web-1", "web-2"]);
        assert_eq!(names(&a.power_on), ["web-3"]);
        assert_eq!(a.foreign, ["someone-elses"]);
        assert_eq!(current(&p, &seen), 0);
    }
}
