//! The sharder's decision for one object: pure, from what it sees of the object and of the
//! members. The rules, in precedence order:
//!
//! 1. no live member: leave everything where it is;
//! 2. no shard label: assign the object to its owner on the ring — unless the view holds
//!    first placements ([`MemberView::holding`]: fewer members live than expected, early in
//!    the sharder's term), and the object carries no drain label (so it was never placed);
//! 3. labelled with a live member that is its owner: nothing to do;
//! 4. labelled with a live member that is not its owner: ask that member to hand it to its
//!    owner (the drain label names the owner; once no reconcile of it runs, the member
//!    relabels the object's children, then the object, with that owner);
//! 5. labelled with a member whose Lease the sharder took over (it expired or was released):
//!    assign it to its owner at once — that member's write fence stopped it before its
//!    Lease could expire, and it cannot come back while the sharder holds the Lease;
//! 6. labelled with any other member (expired but not yet taken over, or with no Lease at
//!    all): wait for the takeover.
use std::collections::HashSet;

/// What the sharder knows of the members this round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberView {
    /// Members whose Lease was renewed within its duration (by the sharder's clock), sorted.
    pub live: Vec<String>,
    /// Members whose Lease the sharder holds: objects labelled with them may move at once.
    pub taken: HashSet<String>,
    /// Until when `taken` may be acted on: the renew deadline after the start of the round
    /// that renewed those takeovers. A replica restarting under a taken member's name waits
    /// the lease duration (longer) from the last renewal it saw, so no object moves away from
    /// a member that is back.
    pub taken_until: Option<std::time::Instant>,
    /// Hold the first placement of unlabelled objects this round: fewer members are live than
    /// the replicas expected (`bosun run --shards N`) and the sharder's grace has not passed
    /// ([`holds_first_placement`]). Nothing else is held: an object labelled with a live or a
    /// taken-over member, or one a hand-off left unlabelled with its drain label, is decided
    /// as ever.
    pub holding: bool,
}

/// Whether the sharder holds first placements: while fewer than `expected` members are live,
/// for at most `grace` since it began leading. A rollout of N replicas then starts balanced
/// instead of placing everything on the first member and moving most of it as the others
/// join; a replica that never comes delays the first placement by `grace` at most.
pub fn holds_first_placement(
    expected: usize,
    live: usize,
    leading_for: std::time::Duration,
    grace: std::time::Duration,
) -> bool {
    // Expecting one member (`--sharding` alone) holds nothing: today's placement, and rounds
    // that settle as before.
    expected > 1 && live < expected && leading_for < grace
}

impl MemberView {
    /// This view with `taken` emptied once its deadline passed.
    pub fn at(&self, now: std::time::Instant) -> MemberView {
        let mut v = self.clone();
        if v.taken_until.is_none_or(|t| now >= t) {
            v.taken.clear();
        }
        v
    }
}

/// One object's labels as the sharder sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen<'a> {
    pub uid: &'a str,
    /// The member its shard label names.
    pub shard: Option<&'a str>,
    /// Whether it carries the drain label.
    pub draining: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    None,
    /// Write the shard label (and remove a drain label left by a member that died).
    Assign(String),
    /// Write the drain label naming the member the object goes to: the member that holds it
    /// hands it, and its children, to that one.
    Drain(String),
}

pub fn decide(obj: &Seen<'_>, members: &MemberView) -> Step {
    let Some(owner) = super::ring::owner(obj.uid, &members.live) else {
        return Step::None;
    };
    match obj.shard {
        None if members.holding && !obj.draining => Step::None,
        None => Step::Assign(owner.to_string()),
        Some(current) if members.live.iter().any(|m| m == current) => {
            if current == owner || obj.draining {
                Step::None
            } else {
                Step::Drain(owner.to_string())
            }
        }
        Some(current) if members.taken.contains(current) => Step::Assign(owner.to_string()),
        Some(_) => Step::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(live: &[&str], taken: &[&str]) -> MemberView {
        MemberView {
            live: live.iter().map(|s| s.to_string()).collect(),
            taken: taken.iter().map(|s| s.to_string()).collect(),
            taken_until: None,
            holding: false,
        }
    }

    #[test]
    fn takeovers_are_acted_on_only_until_their_deadline() {
        let now = std::time::Instant::now();
        let mut v = view(&["a"], &["dead"]);
        v.taken_until = Some(now + std::time::Duration::from_secs(3));
        assert!(v.at(now).taken.contains("dead"));
        assert!(v
            .at(now + std::time::Duration::from_secs(3))
            .taken
            .is_empty());
        v.taken_until = None;
        assert!(v.at(now).taken.is_empty());
    }

    /// A UID the ring gives to `want` among `live`.
    fn uid_owned_by(want: &str, live: &MemberView) -> String {
        (0..10_000)
            .map(|i| format!("uid-{i}"))
            .find(|u| super::super::ring::owner(u, &live.live) == Some(want))
            .expect("some uid lands on every member")
    }

    fn seen<'a>(uid: &'a str, shard: Option<&'a str>, draining: bool) -> Seen<'a> {
        Seen {
            uid,
            shard,
            draining,
        }
    }

    #[test]
    fn nothing_moves_without_a_live_member() {
        let v = view(&[], &["a"]);
        assert_eq!(decide(&seen("u", None, false), &v), Step::None);
        assert_eq!(decide(&seen("u", Some("a"), false), &v), Step::None);
    }

    #[test]
    fn an_unlabelled_object_goes_to_its_owner() {
        let v = view(&["a", "b"], &[]);
        let u = uid_owned_by("b", &v);
        assert_eq!(decide(&seen(&u, None, false), &v), Step::Assign("b".into()));
        // A drain label left over (its member handed it back, or died) does not hold it.
        assert_eq!(decide(&seen(&u, None, true), &v), Step::Assign("b".into()));
    }

    #[test]
    fn a_live_member_is_asked_to_drain_and_never_overtaken() {
        let v = view(&["a", "b"], &[]);
        let u = uid_owned_by("b", &v);
        assert_eq!(decide(&seen(&u, Some("b"), false), &v), Step::None);
        assert_eq!(
            decide(&seen(&u, Some("a"), false), &v),
            Step::Drain("b".into()),
            "the drain names where it goes"
        );
        assert_eq!(
            decide(&seen(&u, Some("a"), true), &v),
            Step::None,
            "draining: wait for the member to hand it back"
        );
    }

    #[test]
    fn a_taken_over_member_loses_its_objects_at_once_an_expired_one_waits() {
        let v = view(&["a"], &["dead"]);
        assert_eq!(
            decide(&seen("u", Some("dead"), true), &v),
            Step::Assign("a".into())
        );
        assert_eq!(
            decide(&seen("u", Some("expired-not-taken"), false), &v),
            Step::None
        );
    }

    #[test]
    fn first_placements_are_held_while_too_few_members_are_live_within_the_grace() {
        use std::time::Duration;
        let grace = Duration::from_secs(8);
        let early = Duration::from_secs(1);
        // 1 of 3 live, within the grace: held.
        assert!(holds_first_placement(3, 1, early, grace));
        // 3 of 3 live: placed.
        assert!(!holds_first_placement(3, 3, early, grace));
        // The grace passed with 1 of 3: placed as today.
        assert!(!holds_first_placement(3, 1, grace, grace));
        // `--sharding` alone expects 1, and `--shards 1` on one replica: placed at once.
        assert!(!holds_first_placement(1, 1, Duration::ZERO, grace));
        // Nor before the sharder's own membership is seen live.
        assert!(!holds_first_placement(1, 0, Duration::ZERO, grace));
    }

    #[test]
    fn a_held_view_holds_only_never_placed_objects() {
        let mut v = view(&["a"], &["dead"]);
        v.holding = true;
        assert_eq!(decide(&seen("u", None, false), &v), Step::None, "held");
        // A takeover of a dead member is not held.
        assert_eq!(
            decide(&seen("u", Some("dead"), false), &v),
            Step::Assign("a".into())
        );
        // Unlabelled by a hand-off (its drain label left): not a first placement.
        assert_eq!(decide(&seen("u", None, true), &v), Step::Assign("a".into()));
        v.holding = false;
        assert_eq!(
            decide(&seen("u", None, false), &v),
            Step::Assign("a".into()),
            "placed once the hold ends"
        );
    }
}
