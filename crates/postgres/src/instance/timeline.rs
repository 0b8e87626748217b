//! Whether a replica's WAL has diverged from its primary's timeline (pure).
//!
//! A replica that replayed WAL its primary never had (it received more than the replica
//! promoted in a failover, or it is an old primary restarted as a replica without a rewind)
//! can never stream from that primary: each attempt of its WAL receiver is refused. The
//! receiver still fetches the primary's timeline history files into `pg_wal` first, which
//! is what tells it apart: a history file of a newer timeline whose fork off the replica's
//! timeline lies before the replica's replay position. PostgreSQL 15 reports such a receiver
//! as `streaming` for the moment of each attempt; without this check the replica looked
//! ready once in a while, and the operator never rejoined it (it follows the right primary).
use super::parse_lsn;

/// The newest timeline named by a history file, and the newest timeline of a WAL segment,
/// among `pg_wal`'s file names.
pub fn newest_timelines<'a>(names: impl Iterator<Item = &'a str>) -> (Option<u32>, Option<u32>) {
    let mut history = None;
    let mut segment = None;
    for n in names {
        let tli = |hex: &str| u32::from_str_radix(hex, 16).ok();
        if let Some(t) = n
            .strip_suffix(".history")
            .filter(|t| t.len() == 8)
            .and_then(tli)
        {
            history = history.max(Some(t));
        } else if n.len() == 24 && n.chars().all(|c| c.is_ascii_hexdigit()) {
            segment = segment.max(tli(&n[..8]));
        }
    }
    (history, segment)
}

/// Why the replica on timeline `mine`, replayed up to `replayed`, cannot follow timeline
/// `newest` whose history file reads `history`; None when it can.
pub fn divergence(newest: u32, history: &str, mine: u32, replayed: &str) -> Option<String> {
    if newest <= mine {
        return None;
    }
    let replayed_at = parse_lsn(replayed)?;
    // Lines: parent timeline, switch point (where the parent ended), reason.
    let fork = history
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let parent: u32 = f.next()?.parse().ok()?;
            let at = f.next()?;
            (parent == mine).then(|| at.to_string())
        });
    match fork {
        None => Some(format!(
            "timeline {newest} does not descend from this replica's timeline {mine}: it needs a rewind"
        )),
        Some(at) if parse_lsn(&at).is_some_and(|s| replayed_at > s) => Some(format!(
            "timeline {newest} forked off timeline {mine} at {at}, before this replica's replay position {replayed}: it needs a rewind"
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timelines_are_read_from_pg_wal_names() {
        let names = [
            "000000010000000000000003",
            "000000010000000000000004",
            "00000002.history",
            "archive_status",
            "000000010000000000000005.partial",
        ];
        assert_eq!(newest_timelines(names.into_iter()), (Some(2), Some(1)));
        assert_eq!(newest_timelines([].into_iter()), (None, None));
    }

    #[test]
    fn a_replica_past_the_fork_has_diverged_one_before_it_has_not() {
        let history = "1\t0/3000148\tno recovery target specified\n";
        // Past the point where timeline 2 forked: never streams from timeline 2.
        assert!(divergence(2, history, 1, "0/3000200").is_some_and(|w| w.contains("0/3000148")));
        // At or before it: it follows timeline 2 once it reaches the switch.
        assert_eq!(divergence(2, history, 1, "0/3000148"), None);
        assert_eq!(divergence(2, history, 1, "0/2000000"), None);
        // Already on the newest timeline.
        assert_eq!(divergence(2, history, 2, "0/9000000"), None);
        // A timeline that does not descend from this replica's at all.
        let other = "1\t0/3000148\tx\n3\t0/5000000\ty\n";
        assert!(divergence(4, other, 2, "0/4000000").is_some());
        // Through an intermediate timeline: 1 → 2 at 0/3000148, 2 → 3 at 0/5000000.
        let chain = "1\t0/3000148\tx\n2\t0/5000000\ty\n";
        assert_eq!(divergence(3, chain, 2, "0/4000000"), None);
        assert!(divergence(3, chain, 2, "0/5000100").is_some());
    }
}
