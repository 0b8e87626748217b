//! Whether a replica that does not stream can still catch up from its primary (issue 32, M13).
//!
//! A replica's receiver asks its primary for WAL from where it stopped, and the primary
//! serves it only from its own `pg_wal`. A slot keeps the segments there, but a slot can be
//! dropped (by hand, or never made when the best-effort `ensure_slot` of a start failed) or
//! invalidated by `max_slot_wal_keep_size` (`wal_status = 'lost'`), after which a checkpoint
//! removes them. A missing slot is made again and a lost one replaced (it never serves
//! again); if the segment the replica needs is still on the primary, it then streams.
//!
//! Once the primary has removed that segment, streaming alone never resumes. A replica of a
//! cluster with a backup store reads the archive then (its `restore_command`, see
//! `backup::restore_wal`): PostgreSQL replays what the archive holds and streams again from
//! where the primary's `pg_wal` begins, as CloudNativePG's replicas do. Only when the
//! archive does not hold the segment either (or there is no store) does the instance report
//! it (`cannotCatchUp` in `/state`), and the operator orders a re-clone
//! (`lifecycle::decide`), which is safe only for a replica of a live primary: see there. A
//! store that cannot be read is no verdict: the replica stays unready with the reason, and
//! the archive is asked again.
use tokio_postgres::Client;

use super::config::Credentials;
use super::error::Error;
use super::{parse_lsn, SUPERUSER};
use crate::backup::owner::Owner;
use crate::backup::wal::Segment;
use crate::backup::Store;

/// The file in the instance's run directory where a replica's `restore_command` says why the
/// archive could not be read (gone once it answers).
pub const ARCHIVE_REPORT: &str = "archive-failure";

/// The replica's slot on its primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Missing,
    /// Invalidated: the primary removed WAL it held for it (`wal_status = 'lost'`).
    Lost,
    Kept,
}

/// What the primary can still serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimaryWal {
    pub slot: Slot,
    /// The oldest segment in its `pg_wal`, by name (None: none listed).
    pub oldest: Option<String>,
}

/// The segment number of a WAL file name (`TTTTTTTTXXXXXXXXYYYYYYYY`), whatever its timeline.
pub fn segment_number(name: &str, segment_size: u64) -> Option<u64> {
    if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let log = u64::from_str_radix(name.get(8..16)?, 16).ok()?;
    let seg = u64::from_str_radix(name.get(16..24)?, 16).ok()?;
    let per_log = 0x1_0000_0000u64.checked_div(segment_size)?;
    log.checked_mul(per_log)?.checked_add(seg)
}

/// Why the replica can never stream again from this primary (None: it can, once its slot
/// is there). `needed` is the WAL position it asks for next, `segment_size` in bytes.
pub fn cannot_catch_up(needed: u64, segment_size: u64, primary: &PrimaryWal) -> Option<String> {
    let needed_segment = needed.checked_div(segment_size)?;
    let oldest = primary.oldest.as_deref()?;
    let oldest_segment = segment_number(oldest, segment_size)?;
    if needed_segment >= oldest_segment {
        return None;
    }
    let lsn = format!("{:X}/{:X}", needed >> 32, needed & 0xFFFF_FFFF);
    let slot = match primary.slot {
        Slot::Lost => {
            "; its replication slot there was invalidated (max_slot_wal_keep_size), so the \
             primary removed the WAL it kept for it"
        }
        Slot::Missing => "; its replication slot there was missing",
        Slot::Kept => "",
    };
    Some(format!(
        "the WAL it needs from {lsn} is no longer on its primary (the oldest segment there is \
         {oldest}){slot}"
    ))
}

/// What the backup store's archive says of the segment a replica needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Archive {
    /// No backup store: nothing but the primary can feed the replica.
    NoStore,
    /// The archive holds it (this name): PostgreSQL replays it from there.
    Holds(String),
    /// Not there (why, for the verdict).
    Lacks(String),
    /// The store could not be read: no verdict.
    Failed(String),
}

/// The verdict once the primary no longer holds the WAL (`gone`, from [`cannot_catch_up`]):
/// None while the archive can still feed the replica, or while that is unknown.
pub fn verdict(gone: String, archive: &Archive) -> Option<String> {
    let archive = match archive {
        Archive::Holds(_) | Archive::Failed(_) => return None,
        Archive::NoStore => "there is no backup store to read it from".to_string(),
        Archive::Lacks(why) => why.clone(),
    };
    Some(format!(
        "{gone}, and {archive}: only a re-clone brings it back"
    ))
}

/// The names the segment holding `needed` may have in the archive, newest timeline first
/// (the one PostgreSQL asks for): from the replica's timeline to its primary's.
pub fn archive_names(needed: u64, segment_size: u64, timelines: (u32, u32)) -> Vec<String> {
    let Some(number) = needed.checked_div(segment_size) else {
        return Vec::new();
    };
    let Some(per_log) = 0x1_0000_0000u64.checked_div(segment_size) else {
        return Vec::new();
    };
    let (Ok(log), Ok(seg)) = (
        u32::try_from(number / per_log),
        u32::try_from(number % per_log),
    ) else {
        return Vec::new();
    };
    let (low, high) = (timelines.0.max(1), timelines.1.max(timelines.0).max(1));
    (low..=high)
        .rev()
        .map(|timeline| Segment { timeline, log, seg }.name())
        .collect()
}

/// Asks the store (this cluster's only) for the first of `names` it holds.
pub async fn ask_archive(store: &Store, owner: Option<&Owner>, names: &[String]) -> Archive {
    if let Some(me) = owner {
        match store.refusal(me).await {
            Ok(Some(why)) => return Archive::Lacks(format!("the backup store is not read: {why}")),
            Ok(None) => {}
            Err(e) => return Archive::Failed(format!("the backup store could not be read: {e}")),
        }
    }
    for name in names {
        match store.has_wal(name).await {
            Ok(true) => return Archive::Holds(name.clone()),
            Ok(false) => {}
            Err(e) => {
                return Archive::Failed(format!("the backup store could not be read ({name}): {e}"))
            }
        }
    }
    Archive::Lacks(format!(
        "the backup store's archive does not hold it either ({})",
        names.join(", ")
    ))
}

/// The local replica's receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Receiver {
    /// The process id of a receiver that says it streams. A receiver refused at every
    /// attempt (its slot missing or its WAL gone) says so too, for a moment each time, but
    /// with a new process each attempt: only the same one seen twice streams.
    pub streaming_pid: Option<i32>,
    /// The WAL position it asks for next (the furthest received or replayed) and the
    /// segment size, in bytes.
    pub needed: Option<(u64, u64)>,
    /// The timeline of its last restart point (where the archive's names start).
    pub timeline: Option<u32>,
}

/// Reads the local replica's receiver.
pub async fn receiver(local: &Client) -> Result<Receiver, Error> {
    let row = local
        .query_one(
            "SELECT pg_last_wal_replay_lsn()::text, pg_last_wal_receive_lsn()::text, \
             (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size'), \
             (SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'), \
             (SELECT timeline_id FROM pg_control_checkpoint())",
            &[],
        )
        .await
        .map_err(Error::sql("reading the replica's WAL position"))?;
    let streaming_pid: Option<i32> = row.get(3);
    let replayed: Option<String> = row.get(0);
    let received: Option<String> = row.get(1);
    let size: Option<i64> = row.get(2);
    let at = [replayed, received]
        .iter()
        .flatten()
        .filter_map(|l| parse_lsn(l))
        .max();
    let needed = match (at, size.and_then(|s| u64::try_from(s).ok())) {
        (Some(at), Some(size)) if size > 0 => Some((at, size)),
        _ => None,
    };
    let timeline: Option<i32> = row.get(4);
    Ok(Receiver {
        streaming_pid,
        needed,
        timeline: timeline.and_then(|t| u32::try_from(t).ok()),
    })
}

/// Makes the slot usable on the primary: made if missing, replaced if lost; says what the
/// primary still holds. As the superuser: listing `pg_wal` needs it.
pub async fn repair_slot(
    host: &str,
    port: u16,
    creds: &Credentials,
    slot: &str,
) -> Result<PrimaryWal, Error> {
    let c = super::sql::connect_remote(host, port, SUPERUSER, &creds.superuser_password).await?;
    let status = slot_status(&c, slot).await?;
    if status == Slot::Lost {
        // Inactive only: a lost slot serves no receiver, and an active one is not ours to
        // take away.
        c.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE slot_name = $1 AND NOT active",
            &[&slot],
        )
        .await
        .map_err(Error::sql("dropping the invalidated replication slot"))?;
    }
    c.execute(
        "SELECT pg_create_physical_replication_slot($1) \
         WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)",
        &[&slot],
    )
    .await
    .map_err(Error::sql("creating the replication slot on the primary"))?;
    let oldest: Option<String> = c
        .query_one(
            "SELECT min(name) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'",
            &[],
        )
        .await
        .map_err(Error::sql("listing the primary's WAL"))?
        .get(0);
    Ok(PrimaryWal {
        slot: status,
        oldest,
    })
}

async fn slot_status(c: &Client, slot: &str) -> Result<Slot, Error> {
    let row = c
        .query_opt(
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(Error::sql("reading the replication slot"))?;
    Ok(match row {
        None => Slot::Missing,
        Some(r) if r.get::<_, Option<String>>(0).as_deref() == Some("lost") => Slot::Lost,
        Some(_) => Slot::Kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB16: u64 = 16 * 1024 * 1024;

    #[test]
    fn segment_numbers_read_log_and_segment_whatever_the_timeline() {
        assert_eq!(segment_number("000000010000000000000003", MB16), Some(3));
        assert_eq!(
            segment_number("000000020000000100000002", MB16),
            Some(256 + 2)
        );
        // 1 GB segments: 4 per log file.
        assert_eq!(segment_number("000000010000000100000002", 1 << 30), Some(6));
        assert_eq!(segment_number("00000001000000000000000", MB16), None);
        assert_eq!(segment_number("00000001000000000000000X", MB16), None);
        assert_eq!(
            segment_number("000000010000000000000003.partial", MB16),
            None
        );
        assert_eq!(segment_number("000000010000000000000003", 0), None);
    }

    fn primary(slot: Slot, oldest: &str) -> PrimaryWal {
        PrimaryWal {
            slot,
            oldest: Some(oldest.into()),
        }
    }

    #[test]
    fn a_replica_catches_up_while_its_segment_is_on_the_primary() {
        // Needs segment 3, the primary's oldest is 3: it streams once the slot is there.
        let at = 3 * MB16 + 0x60;
        assert_eq!(
            cannot_catch_up(
                at,
                MB16,
                &primary(Slot::Missing, "000000010000000000000003")
            ),
            None
        );
        // A lost slot replaced, the segment still there: it streams too.
        assert_eq!(
            cannot_catch_up(at, MB16, &primary(Slot::Lost, "000000010000000000000002")),
            None
        );
        // Unknown: never a verdict.
        let unknown = PrimaryWal {
            slot: Slot::Lost,
            oldest: None,
        };
        assert_eq!(cannot_catch_up(at, MB16, &unknown), None);
    }

    #[test]
    fn a_segment_removed_from_the_primary_is_named_with_the_slot_that_lost_it() {
        let at = 3 * MB16 + 0x60;
        let why = cannot_catch_up(at, MB16, &primary(Slot::Lost, "000000010000000000000009"))
            .expect("it cannot catch up");
        assert!(why.contains("0/3000060"), "{why}");
        assert!(why.contains("000000010000000000000009"), "{why}");
        assert!(why.contains("max_slot_wal_keep_size"), "{why}");
        let why = cannot_catch_up(at, MB16, &primary(Slot::Kept, "000000020000000000000004"))
            .expect("removed on another timeline's file name too");
        assert!(!why.contains("invalidated"), "{why}");
    }

    #[test]
    fn only_an_archive_that_lacks_the_segment_makes_a_verdict() {
        let gone = || "the WAL it needs from 0/3000060 is no longer on its primary".to_string();
        assert_eq!(verdict(gone(), &Archive::Holds("x".into())), None);
        // An error is no answer: asked again, never a re-clone.
        assert_eq!(verdict(gone(), &Archive::Failed("503".into())), None);
        let why = verdict(gone(), &Archive::NoStore).expect("no store");
        assert!(why.contains("no backup store"), "{why}");
        let why = verdict(gone(), &Archive::Lacks("not in the archive".into())).expect("lacks");
        assert!(
            why.contains("not in the archive") && why.contains("re-clone"),
            "{why}"
        );
    }

    #[test]
    fn the_archive_is_asked_for_the_segment_on_each_timeline_newest_first() {
        let at = 3 * MB16 + 0x60;
        assert_eq!(
            archive_names(at, MB16, (1, 2)),
            vec!["000000020000000000000003", "000000010000000000000003"]
        );
        // 257 segments of 16 MB: log 1, segment 1.
        assert_eq!(
            archive_names(257 * MB16, MB16, (2, 1)),
            vec!["000000020000000100000001"]
        );
        assert!(archive_names(at, 0, (1, 1)).is_empty());
    }

    #[tokio::test]
    async fn the_archive_answers_holds_lacks_or_failed_and_only_for_its_owner() {
        use crate::backup::owner::Claim;
        use crate::backup::VolumeStore;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("store");
        let store = Store::Volume(VolumeStore::new(&root));
        let me = |uid: &str| Owner {
            uid: uid.into(),
            cluster: "pg".into(),
            claim: Claim::Empty,
        };
        store.ensure_owner(&me("a")).await.expect("owned");
        let seg = dir.path().join("seg");
        std::fs::write(&seg, b"wal").expect("write");
        let names = archive_names(3 * MB16, MB16, (1, 2));
        store.archive_wal(&seg, &names[1]).await.expect("archived");
        assert_eq!(
            ask_archive(&store, Some(&me("a")), &names).await,
            Archive::Holds(names[1].clone())
        );
        let other = ask_archive(&store, Some(&me("b")), &names).await;
        assert!(
            matches!(&other, Archive::Lacks(why) if why.contains("another cluster")),
            "{other:?}"
        );
        let later = archive_names(4 * MB16, MB16, (1, 1));
        assert!(matches!(
            ask_archive(&store, Some(&me("a")), &later).await,
            Archive::Lacks(_)
        ));
        std::fs::create_dir_all(root.join("wals").join(&later[0])).expect("mkdir");
        assert!(matches!(
            ask_archive(&store, Some(&me("a")), &later).await,
            Archive::Failed(_)
        ));
    }
}
