//! The primary's isolation check (issue 32, H6).
//!
//! The operator cannot fence a primary it cannot reach: its node lost or partitioned, the pod
//! stays Terminating, or someone force-deletes it while postgres still runs there. So the
//! primary fences itself when it has lost both the operator (no poll carrying the API token)
//! and every replica (none streaming) for the isolation timeout. The operator, for its part,
//! promotes a replica over such an unconfirmed primary only once it has been unseen for
//! longer than that (`contract::ISOLATION_WAIT_SECS`): by then the old one has stopped.
//!
//! The check is armed only once a replica has streamed from this primary since it became
//! one: a single instance has no one to fail over to, and would only stop itself whenever
//! the operator is down. Replicas streaming count as contact, so an operator outage never
//! stops a cluster whose replicas are fine.
//!
//! What it cannot cover: a partition that leaves the primary with some of its replicas on
//! its side while the operator promotes another on the other side (the old primary keeps
//! streaming to its side; synchronous replication then blocks its commits, asynchronous
//! does not); and process mode cannot partition a node, so the e2e proof is the decision
//! (`lifecycle`) plus this check with the operator and replicas gone.
use std::time::{Duration, Instant};

/// How often the primary checks.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct Isolation {
    /// A replica streamed since this instance became the primary.
    armed: bool,
    /// When a replica was last seen streaming.
    last_replica: Option<Instant>,
}

impl Isolation {
    /// A replica streamed since this instance became the primary: it would fence itself.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// One check: `running_primary` (else the state resets), the replicas streaming now
    /// (None: unknown — the query failed), the operator's last poll. True: fence now.
    pub fn observe(
        &mut self,
        running_primary: bool,
        streaming: Option<u32>,
        operator: Option<Instant>,
        now: Instant,
        timeout: Duration,
    ) -> bool {
        if !running_primary {
            *self = Isolation::default();
            return false;
        }
        if streaming.is_some_and(|n| n > 0) {
            self.armed = true;
            self.last_replica = Some(now);
        }
        if !self.armed {
            return false;
        }
        let last = [self.last_replica, operator].into_iter().flatten().max();
        let fence = last.is_none_or(|t| now.saturating_duration_since(t) > timeout);
        if fence {
            *self = Isolation::default();
        }
        fence
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn a_primary_that_lost_its_replicas_and_the_operator_fences_itself_after_the_timeout() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut i = Isolation::default();
        assert!(!i.observe(true, Some(1), Some(t0), t0, T));
        // Replicas gone, the operator's polls go on: fine.
        assert!(!i.observe(true, Some(0), Some(at(20)), at(20), T));
        // Neither for longer than the timeout: fence.
        assert!(!i.observe(true, Some(0), Some(at(20)), at(30), T));
        assert!(i.observe(true, Some(0), Some(at(20)), at(31), T));
    }

    #[test]
    fn an_operator_outage_never_stops_a_primary_with_streaming_replicas_or_a_single_one() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut with_replicas = Isolation::default();
        let mut alone = Isolation::default();
        for s in 0..600 {
            assert!(!with_replicas.observe(true, Some(2), None, at(s), T));
            // Never armed: no replica ever streamed.
            assert!(!alone.observe(true, Some(0), None, at(s), T));
        }
        // A failing query is not "no replica".
        let mut i = Isolation::default();
        assert!(!i.observe(true, Some(1), None, t0, T));
        assert!(!i.observe(true, None, None, at(5), T));
        assert!(i.observe(true, None, None, at(11), T));
    }

    #[test]
    fn a_replica_or_a_fenced_instance_is_never_fenced_and_starts_over_as_primary() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut i = Isolation::default();
        assert!(!i.observe(true, Some(1), None, t0, T));
        assert!(!i.observe(false, Some(0), None, at(60), T));
        // Promoted again later: disarmed until a replica streams.
        assert!(!i.observe(true, Some(0), None, at(120), T));
    }
}
