//! Whether a replica that does not stream can still catch up from its primary (issue 32, M13).
//!
//! A replica's receiver asks its primary for WAL from where it stopped, and the primary
//! serves it only from its own `pg_wal`. A slot keeps the segments there, but a slot can be
//! dropped (by hand, or never made when the best-effort `ensure_slot` of a start failed) or
//! invalidated by `max_slot_wal_keep_size` (`wal_status = 'lost'`), after which a checkpoint
//! removes them. A missing slot is made again and a lost one replaced (it never serves
//! again); if the segment the replica needs is still on the primary, it then streams.
//!
//! Once the primary has removed that segment, streaming never resumes: replicas read no
//! archive (they have no `restore_command`), so only a fresh clone of the primary helps. The
//! instance reports that (`cannotCatchUp` in `/state`) and the operator orders the re-clone
//! (`lifecycle::decide`), which is safe only for a replica of a live primary: see there.
use tokio_postgres::Client;

use super::config::Credentials;
use super::error::Error;
use super::{parse_lsn, SUPERUSER};

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
         {oldest}){slot}, and replicas read no archive: only a re-clone brings it back"
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
}

/// Reads the local replica's receiver.
pub async fn receiver(local: &Client) -> Result<Receiver, Error> {
    let row = local
        .query_one(
            "SELECT pg_last_wal_replay_lsn()::text, pg_last_wal_receive_lsn()::text, \
             (SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size'), \
             (SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming')",
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
    Ok(Receiver {
        streaming_pid,
        needed,
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
}
