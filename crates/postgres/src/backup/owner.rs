//! Which cluster a backup store belongs to (issue 32, H12).
//!
//! A store outlives its cluster (the backup claim has no owner; a bucket prefix is named after
//! the cluster), so a cluster deleted and created again under the same name finds the old
//! one's WAL and backups at its own path. Without a record of who wrote them, the new cluster
//! archived into them (its first segment conflicted, and PostgreSQL retried it forever), took
//! no first backup (the store "had" some) and, after losing its data, restored the *old*
//! database. The store therefore records the UID of the cluster that owns it
//! (`bosun-owner.json` at its root), written by the first archive or backup into an empty
//! store and checked by every later one; a store owned by another UID is refused for
//! archiving, backups and automatic disaster recovery.
//!
//! Two ways past a refusal, both chosen by the operator from the spec and status, never by
//! the instance: [`Claim::TakeOver`] when the spec restores this cluster from that very store
//! (`bootstrap.recovery` naming it: the restored database is the old one's continuation), and
//! [`Claim::Adopt`] for a store without a record that this cluster's own status shows it
//! archived into (written before records existed).
use serde::{Deserialize, Serialize};

/// The record's name at the store's root.
pub const OWNER_FILE: &str = "bosun-owner.json";

/// The record, as stored.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRecord {
    /// `metadata.uid` of the PostgresCluster that owns the store.
    pub cluster_uid: String,
    /// Its name, for the messages.
    pub cluster: String,
    /// Owners before a take-over, oldest first (what was restored from).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<String>,
}

/// What a cluster may claim beyond an empty store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Claim {
    /// Only an empty store, or one recorded as its own.
    #[default]
    Empty,
    /// Also a store without a record (its status shows it archived there before records).
    Adopt,
    /// Any store: the spec restores this cluster from it.
    TakeOver,
}

impl Claim {
    pub fn as_str(self) -> &'static str {
        match self {
            Claim::Empty => "empty",
            Claim::Adopt => "adopt",
            Claim::TakeOver => "take-over",
        }
    }
}

/// Who is asking: the cluster an instance belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: String,
    pub cluster: String,
    pub claim: Claim,
}

/// What to do with a store before writing to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Recorded as ours: write.
    Ours,
    /// Write this record first, then write.
    Record(OwnerRecord),
    /// Not ours: why, with the fix.
    Refuse(String),
}

/// The decision (pure). `empty`: the store holds no WAL and no backup.
pub fn verdict(record: Option<&OwnerRecord>, empty: bool, me: &Owner) -> Verdict {
    let mine = || OwnerRecord {
        cluster_uid: me.uid.clone(),
        cluster: me.cluster.clone(),
        previous: Vec::new(),
    };
    match record {
        Some(r) if r.cluster_uid == me.uid => Verdict::Ours,
        Some(r) if me.claim == Claim::TakeOver => {
            let mut new = mine();
            new.previous = r.previous.clone();
            new.previous.push(r.cluster_uid.clone());
            Verdict::Record(new)
        }
        Some(r) => Verdict::Refuse(format!(
            "the backup store belongs to another cluster (PostgresCluster {} with UID {}, deleted \
             and created again under this name?); nothing is archived or backed up there. Either \
             give this cluster another store (spec.backup.store: another s3 prefix, or remove \
             the old backup claim), or restore this cluster from it (spec.bootstrap.recovery \
             naming this store)",
            r.cluster, r.cluster_uid
        )),
        None if empty || me.claim != Claim::Empty => Verdict::Record(mine()),
        None => Verdict::Refuse(
            "the backup store already holds WAL or backups that no cluster is recorded as \
             owning (another cluster's, written before owner records?); nothing is archived or \
             backed up there. Either give this cluster another store (spec.backup.store), or \
             restore this cluster from it (spec.bootstrap.recovery naming this store)"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(claim: Claim) -> Owner {
        Owner {
            uid: "new-uid".into(),
            cluster: "pg".into(),
            claim,
        }
    }

    fn rec(uid: &str) -> OwnerRecord {
        OwnerRecord {
            cluster_uid: uid.into(),
            cluster: "pg".into(),
            previous: Vec::new(),
        }
    }

    #[test]
    fn an_empty_store_is_claimed_and_then_ours() {
        let v = verdict(None, true, &me(Claim::Empty));
        assert_eq!(v, Verdict::Record(rec("new-uid")));
        assert_eq!(
            verdict(Some(&rec("new-uid")), false, &me(Claim::Empty)),
            Verdict::Ours
        );
    }

    #[test]
    fn another_uids_store_is_refused_naming_the_fix_unless_taken_over() {
        for claim in [Claim::Empty, Claim::Adopt] {
            let Verdict::Refuse(why) = verdict(Some(&rec("old-uid")), false, &me(claim)) else {
                panic!("{claim:?} took another cluster's store");
            };
            assert!(why.contains("old-uid") && why.contains("spec.bootstrap.recovery"));
            assert!(why.contains("spec.backup.store"), "{why}");
        }
        let Verdict::Record(r) = verdict(Some(&rec("old-uid")), false, &me(Claim::TakeOver)) else {
            panic!("a take-over was refused");
        };
        assert_eq!(r.cluster_uid, "new-uid");
        assert_eq!(r.previous, ["old-uid"]);
    }

    #[test]
    fn a_store_with_data_and_no_record_is_adopted_only_when_asked() {
        assert!(matches!(
            verdict(None, false, &me(Claim::Empty)),
            Verdict::Refuse(_)
        ));
        assert_eq!(
            verdict(None, false, &me(Claim::Adopt)),
            Verdict::Record(rec("new-uid"))
        );
        assert_eq!(
            verdict(None, false, &me(Claim::TakeOver)),
            Verdict::Record(rec("new-uid"))
        );
    }
}
