//! What to do to a group, decided (purely) from the plan and the VMs it owns as one property
//! retrieval showed them ([`crate::owner`] sorted them from the foreign ones). VMs are
//! numbered `<name>-1` … `<name>-<replicas>`; scale down removes the highest numbers first,
//! so the group stays `1..=replicas` without gaps.
//!
//! A VM the group owns under another name (the seed operator's `<name>-replica-<rand>`,
//! adopted by [`crate::migrate`]) is a member too: it fills a place, so fewer numbers are
//! cloned, and it goes first when the group shrinks.
//!
//! A number held by two VMs is a clone repeated after a crash: the crashed operator's clone
//! finished after its replacement cloned the same name again. vCenter refuses a second VM
//! of one name in a folder, but not every server does (vcsim 0.24 accepts it), so the
//! extra one is removed rather than trusted never to exist.
//!
//! A number whose name a foreign VM holds is not cloned (vCenter would refuse the name, and
//! taking that VM would take what the group did not make): it is reported as blocked.
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
    /// VMs beyond `replicas`: other-named members first, then the highest numbers.
    pub remove: Vec<VmInfo>,
    /// Second VMs of a number already held: removed, the one in the best state kept.
    pub duplicates: Vec<VmInfo>,
    /// VMs in the folder the group did not make: left alone.
    pub foreign: Vec<String>,
    /// Names the group would clone that a foreign VM holds: not cloned.
    pub blocked: Vec<String>,
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

/// The group's members split: numbered (one per number, see [`rank`]), other-named (sorted
/// by name), and the duplicates.
struct Split<'a> {
    numbered: Vec<(u32, &'a VmInfo)>,
    other: Vec<&'a VmInfo>,
    duplicates: Vec<&'a VmInfo>,
}

fn split<'a>(plan: &Plan, owned: &'a [VmInfo]) -> Split<'a> {
    let mut by_rank: Vec<&VmInfo> = owned.iter().collect();
    by_rank.sort_by_key(|v| rank(plan, v));
    let mut taken = std::collections::BTreeSet::new();
    let mut s = Split {
        numbered: Vec::new(),
        other: Vec::new(),
        duplicates: Vec::new(),
    };
    for v in by_rank {
        match plan.vm_index(&v.name) {
            Some(n) if !taken.insert(n) => s.duplicates.push(v),
            Some(n) => s.numbered.push((n, v)),
            None => s.other.push(v),
        }
    }
    s.other.sort_by(|a, b| a.name.cmp(&b.name));
    s
}

/// How many of the other-named members stay, and how many numbers are kept.
fn places(plan: &Plan, other: usize) -> (usize, u32) {
    let kept = other.min(plan.replicas as usize);
    (kept, plan.replicas - kept as u32)
}

/// Members that count as current: kept, of the planned shape, powered on.
pub fn current(plan: &Plan, owned: &[VmInfo]) -> u32 {
    let s = split(plan, owned);
    let (kept, slots) = places(plan, s.other.len());
    let ready = |v: &VmInfo| shaped(plan, v) && v.power_state == Some(PowerState::PoweredOn);
    let other = s.other[..kept].iter().filter(|v| ready(v)).count();
    let numbered = s
        .numbered
        .iter()
        .filter(|(n, v)| *n <= slots && ready(v))
        .count();
    (other + numbered) as u32
}

fn shaped(plan: &Plan, v: &VmInfo) -> bool {
    v.num_cpu == Some(plan.shape.num_cpus) && v.memory_mb == Some(plan.shape.memory_mb)
}

/// What to do, from the VMs the group owns and the names of the foreign ones beside them.
pub fn decide(plan: &Plan, owned: &[VmInfo], foreign: &[String]) -> Actions {
    let mut a = Actions::default();
    let s = split(plan, owned);
    let (kept, slots) = places(plan, s.other.len());
    a.duplicates = s.duplicates.into_iter().cloned().collect();
    a.duplicates.sort_by(|x, y| x.name.cmp(&y.name));
    let mut present = vec![false; slots as usize + 1];
    let mut extra: Vec<(u32, VmInfo)> = Vec::new();
    let keep = |v: &VmInfo, a: &mut Actions| {
        if !shaped(plan, v) {
            a.reshape.push(v.clone());
        } else if v.power_state != Some(PowerState::PoweredOn) {
            a.power_on.push(v.clone());
        }
    };
    for v in &s.other[..kept] {
        keep(v, &mut a);
    }
    for (n, v) in s.numbered {
        if n <= slots {
            present[n as usize] = true;
            keep(v, &mut a);
        } else {
            extra.push((n, v.clone()));
        }
    }
    for n in (1..=slots).filter(|n| !present[*n as usize]) {
        let name = plan.vm_name(n);
        if foreign.contains(&name) {
            a.blocked.push(name);
        } else {
            a.clone.push(name);
        }
    }
    extra.sort_by_key(|x| std::cmp::Reverse(x.0));
    a.remove = s.other[kept..]
        .iter()
        .rev()
        .map(|v| (*v).clone())
        .chain(extra.into_iter().map(|(_, v)| v))
        .collect();
    a.foreign = foreign.to_vec();
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
            custom_values: Default::default(),
            extra_config: Default::default(),
        }
    }

    fn plan(replicas: i32) -> Plan {
        let mut vg = sample();
        vg.spec.replicas = replicas;
        validate(&vg, "/DC0/vm", None).expect("valid")
    }

    #[test]
    fn an_empty_folder_clones_every_number() {
        let a = decide(&plan(3), &[], &[]);
        assert_eq!(a.clone, ["web-1", "web-2", "web-3"]);
        assert!(a.reshape.is_empty() && a.power_on.is_empty() && a.remove.is_empty());
    }

    #[test]
    fn gaps_are_filled_and_a_group_in_shape_needs_nothing() {
        let p = plan(3);
        let seen = [vm("web-1", 2, 3072, true), vm("web-3", 2, 3072, true)];
        assert_eq!(decide(&p, &seen, &[]).clone, ["web-2"]);
        assert_eq!(current(&p, &seen), 2);
        let full = [
            vm("web-1", 2, 3072, true),
            vm("web-2", 2, 3072, true),
            vm("web-3", 2, 3072, true),
        ];
        assert!(decide(&p, &full, &[]).is_empty());
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
        let a = decide(&plan(1), &seen, &[]);
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
        let a = decide(&p, &seen, &[]);
        assert_eq!(a.duplicates, [fresh.clone()], "the unshaped copy goes");
        assert!(a.reshape.is_empty() && a.power_on.is_empty() && a.clone.is_empty());
        assert_eq!(current(&p, &seen), 2, "a number counts once");
        // Two alike: the lower reference is kept, whatever order they are read in.
        let (x, mut y) = (vm("web-1", 2, 3072, true), vm("web-1", 2, 3072, true));
        y.vm = MoRef::new("VirtualMachine", "vm-zz");
        for seen in [[x.clone(), y.clone()], [y.clone(), x.clone()]] {
            assert_eq!(decide(&plan(1), &seen, &[]).duplicates, [y.clone()]);
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
        ];
        let a = decide(&p, &seen, &["someone-elses".to_string()]);
        let names = |v: &[VmInfo]| v.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a.reshape), ["web-1", "web-2"]);
        assert_eq!(names(&a.power_on), ["web-3"]);
        assert_eq!(a.foreign, ["someone-elses"]);
        assert_eq!(current(&p, &seen), 0);
    }

    #[test]
    fn a_name_held_by_a_foreign_vm_is_blocked_not_cloned_or_counted() {
        let p = plan(2);
        let seen = [vm("web-2", 2, 3072, true)];
        let a = decide(&p, &seen, &["web-1".to_string(), "keep-me".to_string()]);
        assert!(a.clone.is_empty(), "{a:?}");
        assert_eq!(a.blocked, ["web-1"]);
        assert_eq!(a.foreign, ["keep-me", "web-1"]);
        assert_eq!(current(&p, &seen), 1);
    }

    #[test]
    fn other_named_members_fill_places_and_go_first_on_scale_down() {
        // Two of the seed's VMs adopted: with 3 replicas, one number is cloned.
        let seed = [
            vm("web-replica-abcdefgh", 2, 3072, true),
            vm("web-replica-zyxwvuts", 1, 1024, false),
        ];
        let a = decide(&plan(3), &seed, &[]);
        assert_eq!(a.clone, ["web-1"]);
        assert_eq!(a.reshape, [seed[1].clone()]);
        assert!(a.remove.is_empty());
        assert_eq!(current(&plan(3), &seed), 1);
        // Down to 1: the numbered VM and then the last other-named one go.
        let mut all = seed.to_vec();
        all.push(vm("web-1", 2, 3072, true));
        let a = decide(&plan(1), &all, &[]);
        let names: Vec<&str> = a.remove.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["web-replica-zyxwvuts", "web-1"]);
        assert!(a.clone.is_empty());
        assert_eq!(current(&plan(1), &all), 1);
    }
}
