//! Sharding across replicas: every replica reconciles its own share of each operator's
//! objects, on Leases and labels only (timebertt/kubernetes-controller-sharding's design).
//!
//! * **Members.** Each replica holds a membership Lease, `<lease>-member-<identity>`, with
//!   the leader election's timings, and its operators' client carries the write fence that
//!   Lease moves ([`crate::fence`]): a replica that cannot renew stops writing before anyone
//!   may count it gone.
//! * **The sharder.** The replica that holds `<lease>-sharder` places objects
//!   ([`coordinator`], [`kind`]): it labels each primary object
//!   `shard.bosun.dev/<operator>: <member>`, the member the UID hashes to among the live
//!   members ([`ring`]). Its label writes go through a client fenced by that Lease, and each
//!   carries the `resourceVersion` it decided on.
//! * **Each replica caches only its shard.** The primary watch selects
//!   `shard.bosun.dev/<operator>=<member>` (see [`crate::controller::Primary`]).
//! * **A move is a hand-off, never an overlap.** To move an object away from a live member
//!   the sharder labels it `drain.bosun.dev/<operator>`; that member starts no reconcile of
//!   it any more, waits for the one running, and removes both labels; only then does the
//!   sharder write the new member ([`place`]). A member whose Lease expired (`kill -9`) or
//!   was released (a graceful leave, after its in-flight reconciles ended) is not asked: the
//!   sharder first takes its Lease over (an update on the `resourceVersion` it judged expired,
//!   so a late renewal and the takeover cannot both win), keeps renewing it while objects
//!   carry that member's label, and relabels them at once. A replica that restarts under
//!   the same name waits for that Lease like a standby, so it never works an object the
//!   sharder is moving; once none is labelled with it, the sharder deletes the Lease.
//!
//! * **Children follow their owner.** Every child cache of a controller, wired before it
//!   starts or started at run time (the Helm and Ansible flavours' kinds), joins its
//!   [`children::ChildRegistry`] before its watches start: it then caches this member's
//!   children and the unlabelled ones ([`child_selectors`]), and a hand-off or a takeover
//!   relabels an object's children of every kind joined so far on that replica.
//!
//! * **Every replica knows every child kind.** The kinds started on any replica are written
//!   in the [`record`] each Lease carries (a member's, the sharder's) and read back by the
//!   others: the takeover relabels a dead member's children of each kind recorded (its own
//!   record included), a hand-off lists once the kinds recorded but not started on its
//!   replica, and both find children linked to their owner by operator-sdk's annotations.
//!
//! What it does not do: a role that falls back to real Ansible writes through its own,
//! unfenced client (as with leader election).
pub mod children;
pub mod coordinator;
pub mod kind;
pub mod place;
pub mod record;
pub mod ring;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use kube::Client;
use tokio::sync::watch;

use crate::leader::LeaderConfig;
pub use place::MemberView;

/// The prefix of the label that names an object's member, per operator.
pub const SHARD_LABEL: &str = "shard.bosun.dev/";
/// The prefix of the label that asks a member to hand an object back, per operator.
pub const DRAIN_LABEL: &str = "drain.bosun.dev/";

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(
        "the replica's identity {0:?} cannot name a shard: it must be 1-63 lowercase letters, \
         digits, '-' or '.', starting and ending with a letter or digit (set POD_NAME to \
         the pod's name)"
    )]
    Identity(String),
    #[error(transparent)]
    Timing(#[from] crate::leader::LeaderError),
}

/// Sharding settings: the leader election's Lease name (a prefix here), namespace, this
/// replica's identity (the member name written on its objects) and timings.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    leases: LeaderConfig,
    /// The members a rollout brings (`bosun run --shards N`; 1 with `--sharding`): the
    /// sharder holds first placements while fewer are live, for at most [`Self::grace`].
    expected: usize,
}

impl ShardConfig {
    pub fn new(leases: LeaderConfig) -> Result<Self, ShardError> {
        leases.validate()?;
        if !is_member_name(&leases.identity) {
            return Err(ShardError::Identity(leases.identity.clone()));
        }
        Ok(ShardConfig {
            leases,
            expected: 1,
        })
    }

    /// Expect `n` members (at least 1): see [`place::holds_first_placement`].
    pub fn with_expected(mut self, n: usize) -> Self {
        self.expected = n.max(1);
        self
    }

    pub fn expected(&self) -> usize {
        self.expected
    }

    /// How long, since it began leading, the sharder holds first placements for the
    /// expected members: two lease durations (8 s by default). The replicas of one rollout
    /// each write their membership Lease on their first attempt, so siblings scheduled
    /// together are live well within it; a replica that cannot start (unschedulable, a
    /// crash loop) delays the first placement by no more than a standby takes to replace a
    /// dead leader.
    pub fn grace(&self) -> std::time::Duration {
        self.leases.lease_duration * 2
    }

    pub fn identity(&self) -> &str {
        &self.leases.identity
    }

    pub fn namespace(&self) -> &str {
        &self.leases.namespace
    }

    /// This replica's membership Lease.
    pub fn member_lease(&self) -> LeaderConfig {
        LeaderConfig {
            lease_name: format!("{}{}", self.member_prefix(), self.leases.identity),
            ..self.leases.clone()
        }
    }

    /// The Lease whose holder places objects.
    pub fn sharder_lease(&self) -> LeaderConfig {
        LeaderConfig {
            lease_name: format!("{}-sharder", self.leases.lease_name),
            ..self.leases.clone()
        }
    }

    pub(crate) fn member_prefix(&self) -> String {
        format!("{}-member-", self.leases.lease_name)
    }

    pub(crate) fn timings(&self) -> &LeaderConfig {
        &self.leases
    }
}

/// A member name must be a label value and the tail of a Lease name alike.
fn is_member_name(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| ok(c) || c == '-' || c == '.')
        && s.chars().next().is_some_and(ok)
        && s.chars().last().is_some_and(ok)
}

/// The shard and drain label keys of one operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels {
    pub shard: String,
    pub drain: String,
}

impl Labels {
    pub fn for_operator(operator: &str) -> Self {
        let name = label_name(operator);
        Labels {
            shard: format!("{SHARD_LABEL}{name}"),
            drain: format!("{DRAIN_LABEL}{name}"),
        }
    }
}

/// An operator's name as the name part of a label key: at most 63 characters of
/// `[A-Za-z0-9._-]`, starting and ending with a letter or digit; a longer name keeps its
/// start and a hash of the whole, so two long names stay apart.
pub fn label_name(operator: &str) -> String {
    let mapped: String = operator
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let name = if trimmed.len() <= 63 {
        trimmed.to_string()
    } else {
        let h = fnv(operator);
        let head = trimmed[..54].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
        format!("{head}-{:08x}", h & 0xffff_ffff)
    };
    if name.is_empty() {
        "operator".into()
    } else {
        name
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The labels a child of an object gets: its owner's shard labels (every
/// `shard.bosun.dev/<operator>` it carries; never the drain label, which is a request to one
/// member). The one decision the coded applier, the Helm flavour and the Ansible flavour all
/// take, so a child is written with the label of the member its owner is on from its first
/// write — the member's own cache sees it at once, and it is never labelled in a second write.
pub fn child_labels(owner_labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    owner_labels
        .into_iter()
        .flatten()
        .filter(|(k, v)| {
            k.strip_prefix(SHARD_LABEL).is_some_and(|n| !n.is_empty()) && !v.is_empty()
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The label selectors of one child watch of a sharded operator: the children of this
/// member's objects, and the children that carry no shard label of the operator at all (made
/// before sharding was turned on, by someone else, or whose label a user removed). A replica
/// caches the union: its share, and what no share holds — so no child is in no replica's
/// cache, and the applier never refuses (409) to create a child that exists unseen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSelectors {
    pub member: String,
    pub unlabelled: String,
}

impl ChildSelectors {
    /// Both selectors, in the order a child cache numbers its watches.
    pub fn both(&self) -> [&str; 2] {
        [&self.member, &self.unlabelled]
    }
}

/// The one decision of which children a child watch of `operator` on `member` selects,
/// the watch's own selector `own` (empty: none) kept in both. The Helm and Ansible flavours'
/// watches take it as the coded operators' caches do.
pub fn child_selectors(operator: &str, member: &str, own: &str) -> ChildSelectors {
    let key = Labels::for_operator(operator).shard;
    let with_own = |s: String| {
        if own.trim().is_empty() {
            s
        } else {
            format!("{own},{s}")
        }
    };
    ChildSelectors {
        member: with_own(format!("{key}={member}")),
        unlabelled: with_own(format!("!{key}")),
    }
}

/// The shard label value a member writes on an object it hands back, from the drain label the
/// sharder wrote (the member the object goes to): that member when it names one other than
/// `me`, else none (the labels are removed and the sharder places the object).
pub fn handoff_target<'a>(drain_value: Option<&'a str>, me: &str) -> Option<&'a str> {
    drain_value.filter(|d| is_member_name(d) && *d != me)
}

tokio::task_local! {
    /// The shard labels of the object a sharded controller is reconciling (its children's
    /// labels), for the writes made within that reconcile.
    static OWNER: BTreeMap<String, String>;
}

/// Runs `fut` (one reconcile of an object with `owner_labels`) with its children's labels in
/// scope: [`crate::apply::Applier`] writes them on every child it applies from within.
pub(crate) async fn reconciling<F: std::future::Future>(
    owner_labels: Option<&BTreeMap<String, String>>,
    fut: F,
) -> F::Output {
    OWNER.scope(child_labels(owner_labels), fut).await
}

/// The labels a child written now gets: those of the object the running reconcile works on
/// (empty outside a sharded reconcile, or in a task it spawned).
pub fn labels_in_scope() -> BTreeMap<String, String> {
    OWNER.try_with(Clone::clone).unwrap_or_default()
}

/// What each kind's placement loop reports to the coordinator: the members its objects are
/// labelled with, once its view has synced (a takeover Lease is deleted only when no kind
/// has an object on that member).
#[derive(Clone, Default)]
pub(crate) struct Reports(Arc<Mutex<HashMap<u64, HashSet<String>>>>);

impl Reports {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, HashSet<String>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn report(&self, kind: u64, members: HashSet<String>) {
        self.lock().insert(kind, members);
    }

    pub(crate) fn forget(&self, kind: u64) {
        self.lock().remove(&kind);
    }

    /// Every member some kind has objects on.
    pub(crate) fn in_use(&self) -> HashSet<String> {
        self.lock().values().flatten().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

/// What a controller gets from the manager when sharding is on.
#[derive(Clone)]
pub struct ShardContext {
    pub(crate) member: String,
    /// The client of the sharder's label writes, fenced by the sharder Lease.
    pub(crate) sharder_client: Client,
    /// The members, published each round while this replica holds the sharder Lease.
    pub(crate) view: watch::Receiver<Option<Arc<MemberView>>>,
    pub(crate) reports: Reports,
}

impl ShardContext {
    /// The member name this replica writes on its objects.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The label selector of this replica's share of `operator`'s objects.
    pub fn selector(&self, operator: &str) -> String {
        format!("{}={}", Labels::for_operator(operator).shard, self.member)
    }

    /// The selectors of a child watch of `operator` whose own selector is `own`.
    pub fn child_selectors(&self, operator: &str, own: &str) -> ChildSelectors {
        child_selectors(operator, &self.member, own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_are_label_values_and_lease_name_tails() {
        for ok in ["bosun-0", "bosun-7d9f8-x2k4q", "a", "a.b-1"] {
            assert!(is_member_name(ok), "{ok}");
        }
        for bad in ["", "Bosun", "-a", "a-", "a_b", "a/b", &"a".repeat(64)] {
            assert!(!is_member_name(bad), "{bad}");
        }
        let e = ShardConfig::new(LeaderConfig::new("l", "ns", "Not_A_Pod"))
            .expect_err("refused")
            .to_string();
        assert!(e.contains("Not_A_Pod") && e.contains("POD_NAME"), "{e}");
    }

    #[test]
    fn lease_names_derive_from_the_leader_lease() {
        let c = ShardConfig::new(LeaderConfig::new("bosun-leader", "ns", "bosun-0")).expect("ok");
        assert_eq!(c.member_lease().lease_name, "bosun-leader-member-bosun-0");
        assert_eq!(c.sharder_lease().lease_name, "bosun-leader-sharder");
        assert_eq!(c.member_lease().identity, "bosun-0");
    }

    #[test]
    fn label_names_are_valid_and_distinct() {
        assert_eq!(
            Labels::for_operator("bookstore").shard,
            "shard.bosun.dev/bookstore"
        );
        assert_eq!(
            label_name("BookStore.cache.example.com/v1"),
            "BookStore.cache.example.com-v1"
        );
        let a = label_name(&format!("{}-a", "x".repeat(80)));
        let b = label_name(&format!("{}-b", "x".repeat(80)));
        assert!(a.len() <= 63 && b.len() <= 63);
        assert_ne!(a, b);
        assert_eq!(label_name("//"), "operator");
    }

    #[test]
    fn a_child_gets_its_owners_shard_labels_only() {
        let owner: BTreeMap<String, String> = [
            ("shard.bosun.dev/bookstore", "bosun-1"),
            ("drain.bosun.dev/bookstore", "bosun-1"),
            ("app", "shop"),
            ("shard.bosun.dev/", "x"),
            ("shard.bosun.dev/empty", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let got = child_labels(Some(&owner));
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            vec![(
                "shard.bosun.dev/bookstore".to_string(),
                "bosun-1".to_string()
            )]
        );
        // An owner not placed yet (or sharding off): nothing.
        assert!(child_labels(None).is_empty());
        let unplaced: BTreeMap<String, String> = [("app".to_string(), "shop".to_string())].into();
        assert!(child_labels(Some(&unplaced)).is_empty());
    }

    #[test]
    fn a_child_watch_selects_its_members_share_and_the_unlabelled_ones() {
        let s = child_selectors("bookstore", "bosun-1", "");
        assert_eq!(s.member, "shard.bosun.dev/bookstore=bosun-1");
        assert_eq!(s.unlabelled, "!shard.bosun.dev/bookstore");
        // The watch's own selector is kept in both.
        let s = child_selectors("BookStore.x/v1", "b", "app=shop, tier in (db)");
        assert_eq!(
            s.both(),
            [
                "app=shop, tier in (db),shard.bosun.dev/BookStore.x-v1=b",
                "app=shop, tier in (db),!shard.bosun.dev/BookStore.x-v1"
            ]
        );
        assert_eq!(
            child_selectors("op", "m", "  ").member,
            "shard.bosun.dev/op=m"
        );
    }

    #[test]
    fn a_handed_back_object_goes_to_the_member_the_drain_names() {
        assert_eq!(handoff_target(Some("bosun-2"), "bosun-1"), Some("bosun-2"));
        // A drain naming the member itself (written by a sharder of before the children
        // followed their owners), nobody, or no member name: the labels are removed.
        assert_eq!(handoff_target(Some("bosun-1"), "bosun-1"), None);
        assert_eq!(handoff_target(Some(""), "bosun-1"), None);
        assert_eq!(handoff_target(Some("Not A Member"), "bosun-1"), None);
        assert_eq!(handoff_target(None, "bosun-1"), None);
    }

    #[tokio::test]
    async fn the_labels_are_in_scope_only_within_the_reconcile() {
        let owner: BTreeMap<String, String> =
            [("shard.bosun.dev/op".to_string(), "m".to_string())].into();
        assert!(labels_in_scope().is_empty());
        let inside = reconciling(Some(&owner), async { labels_in_scope() }).await;
        assert_eq!(
            inside.get("shard.bosun.dev/op").map(String::as_str),
            Some("m")
        );
        assert!(labels_in_scope().is_empty());
    }
}
