//! Which live member owns an object: rendezvous (highest random weight) hashing of the
//! object's UID against each member's name.
//!
//! Why rendezvous rather than a ring of virtual nodes: it gives the property the plan asks of
//! a consistent-hash ring — a member joining takes about 1/n of the objects, a member leaving
//! hands only its own objects out, every other object stays put — with no ring to build or
//! tune, and it is exact for the few members a Deployment runs. The hash is FNV-1a with a
//! final mix, written out here so that every replica of every build computes the same owner
//! (std's `DefaultHasher` promises no stability across Rust releases).

/// The member `uid` belongs to among `members` (None when there is none).
pub fn owner<'a>(uid: &str, members: &'a [String]) -> Option<&'a str> {
    members
        .iter()
        .max_by_key(|m| (weight(uid, m), m.as_str()))
        .map(String::as_str)
}

fn weight(uid: &str, member: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    // A separator that neither a UID nor a member name contains keeps ("ab","c") and
    // ("a","bc") apart.
    for b in uid.bytes().chain([0u8]).chain(member.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    // FNV's low bits mix poorly for inputs that differ only at the end (member names
    // `bosun-0`, `bosun-1`): finish with splitmix64's mixer.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uids(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("6f1c2d3e-0000-4000-8000-{i:012x}"))
            .collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_member_no_owner() {
        assert_eq!(owner("u", &[]), None);
    }

    #[test]
    fn the_owner_does_not_depend_on_the_members_order() {
        let a = names(&["bosun-0", "bosun-1", "bosun-2"]);
        let b = names(&["bosun-2", "bosun-0", "bosun-1"]);
        for u in uids(200) {
            assert_eq!(owner(&u, &a), owner(&u, &b));
        }
    }

    #[test]
    fn objects_spread_over_the_members() {
        let m = names(&["bosun-0", "bosun-1", "bosun-2"]);
        let all = uids(3000);
        for name in &m {
            let n = all.iter().filter(|u| owner(u, &m) == Some(name)).count();
            // 1000 expected each; binomial spread is about ±26, so ±150 is far outside chance.
            assert!((850..=1150).contains(&n), "{name} got {n} of 3000");
        }
    }

    #[test]
    fn a_join_moves_only_objects_to_the_newcomer_and_a_leave_only_the_leavers() {
        let before = names(&["bosun-0", "bosun-1", "bosun-2"]);
        let after = names(&["bosun-0", "bosun-1", "bosun-2", "bosun-3"]);
        let all = uids(2000);
        let mut moved = 0;
        for u in &all {
            let (a, b) = (owner(u, &before), owner(u, &after));
            if a != b {
                assert_eq!(
                    b,
                    Some("bosun-3"),
                    "a join moves objects only to the newcomer"
                );
                moved += 1;
            }
        }
        assert!(
            (350..=650).contains(&moved),
            "about a quarter moves: {moved}"
        );
        let left = names(&["bosun-0", "bosun-2"]);
        for u in &all {
            let (a, b) = (owner(u, &before), owner(u, &left));
            if a != Some("bosun-1") {
                assert_eq!(a, b, "a leave moves only the leaver's objects");
            }
        }
    }
}
