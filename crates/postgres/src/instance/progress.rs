//! A restore's deadline that moves while the replay moves: a restore of weeks of WAL takes as
//! long as it takes, but one that stopped advancing is reported instead of waited on forever.
//! A fixed deadline wiped a restore that was progressing after 20 minutes (issue 32, H8).
use std::time::{Duration, Instant};

pub struct Progress {
    window: Duration,
    last: Option<u64>,
    deadline: Instant,
}

impl Progress {
    /// Expires `window` after `now` unless a position advances meanwhile.
    pub fn new(now: Instant, window: Duration) -> Progress {
        Progress {
            window,
            last: None,
            deadline: now + window,
        }
    }

    /// A replay position seen at `now`: one past the last moves the deadline to `now + window`.
    pub fn saw(&mut self, lsn: u64, now: Instant) {
        if self.last.is_none_or(|l| lsn > l) {
            self.last = Some(lsn);
            self.deadline = now + self.window;
        }
    }

    pub fn expired(&self, now: Instant) -> bool {
        now > self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_that_advances_is_never_cut_short_and_a_stalled_one_is() {
        let t0 = Instant::now();
        let min = Duration::from_secs(60);
        let mut p = Progress::new(t0, 20 * min);
        assert!(!p.expired(t0 + 19 * min));
        // Hours of replay, advancing every 10 minutes.
        for step in 1..=30u32 {
            p.saw(u64::from(step) << 24, t0 + step * 10 * min);
            assert!(!p.expired(t0 + step * 10 * min + 19 * min), "step {step}");
        }
        // Stalled at the last position: the same position again does not extend it.
        let end = t0 + 300 * min;
        p.saw(30 << 24, end + 15 * min);
        assert!(p.expired(end + 21 * min));
    }
}
