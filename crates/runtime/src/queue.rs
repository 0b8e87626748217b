//! A controller's work queue, with two priorities.
//!
//! kube-runtime's scheduler takes triggers in the order they came: on a restart every listed
//! object (and every listed child's owner) is queued before the object a user creates a
//! moment later, which then waits for the whole list. Here a trigger carries a [`Priority`]:
//! a watch event — someone created, changed or deleted an object, or one of its children —
//! is [`Priority::User`]; a (re-)list, a requeue timer and an error retry are
//! [`Priority::Background`]. Within a priority, first in, first out.
//!
//! * **Aging.** A steady stream of user changes must not starve the background work (a
//!   resync, a retry) forever: once the oldest background key has waited [`QueueConfig::aging`],
//!   every `aged_share + 1`-th start takes a background key, so the background drains at no
//!   less than that share of the starts while user work keeps coming. Before that, user work
//!   always goes first — a new object waits behind at most the reconciles already running.
//! * **A worker kept for user changes.** With two or more workers, background work may hold
//!   all of them but one: a re-list whose reconciles each take seconds (a chart with a hook,
//!   a role run by real Ansible) cannot make a new object wait for one of them to end. The
//!   price is one idle worker while only background work is queued.
//! * **One entry per key.** A key already queued is not queued twice; a user change of a
//!   key queued as background moves it to the user priority (it keeps the time it was first
//!   queued, for the queue-duration metric).
//! * **Never two reconciles of one key at once.** A key added while it runs is remembered
//!   (at the highest priority it was added with) and queued again when it finishes.
//! * **An interrupted reconcile goes first.** A reconcile aborted because this replica
//!   stopped leading ([`Queue::interrupted`]) is queued at the front of the user lane: its
//!   object may be half done, and it is the first work when this replica leads again.
//! * **Requeue timers.** [`Queue::add_after`] sets the key's one timer (a later call
//!   replaces it); a due timer queues the key as background. Starting a key clears its timer:
//!   the reconcile that starts then says when to come back. A timer due while every worker
//!   runs waits for one to end ([`Queue::next_due`]): nothing could start it before.
//!
//! The queue is pure (time is passed in) so that its rules are tested without a clock.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Why a key is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// A (re-)list, a requeue timer, an error retry.
    Background,
    /// A watch event: a user's create, change or delete (of the object or a child).
    User,
}

impl Priority {
    /// The `priority` label of the workqueue metrics: controller-runtime's numbers (its
    /// `handler.LowPriority` is -100, everything else 0), so its dashboards read bosun's.
    pub fn label(self) -> &'static str {
        match self {
            Priority::Background => "-100",
            Priority::User => "0",
        }
    }

    pub const ALL: [Priority; 2] = [Priority::User, Priority::Background];

    fn lane(self) -> usize {
        match self {
            Priority::User => 0,
            Priority::Background => 1,
        }
    }
}

/// The aging rule (see the module documentation).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// How long the oldest background key may wait before it gets a share of the starts.
    pub aging: Duration,
    /// User starts between two aged background starts.
    pub aged_share: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        // 5 s: longer than any burst of user changes takes to start at the default
        // concurrency, short enough that a retry is late by seconds, not by the length of a
        // busy period. One in five starts then goes to the background.
        QueueConfig {
            aging: Duration::from_secs(5),
            aged_share: 4,
        }
    }
}

enum State {
    Queued {
        priority: Priority,
        since: Instant,
        ticket: u64,
    },
    /// Running at `lane`'s priority; `again` when it was added meanwhile.
    Running {
        lane: Priority,
        again: Option<(Priority, Instant)>,
    },
}

/// A key handed out by [`Queue::pop`].
#[derive(Debug, PartialEq, Eq)]
pub struct Popped<Key> {
    pub key: Key,
    pub priority: Priority,
    /// How long it waited in the queue.
    pub waited: Duration,
}

pub struct Queue<Key> {
    config: QueueConfig,
    /// Per priority, keys in the order they were queued, with the ticket they were queued
    /// under: an entry whose ticket is no longer the key's (moved to the user lane, started)
    /// is skipped when it reaches the front.
    lanes: [VecDeque<(u64, Key)>; 2],
    state: HashMap<Key, State>,
    depth: [usize; 2],
    tickets: u64,
    timers: BTreeMap<(Instant, u64), Key>,
    due: HashMap<Key, (Instant, u64)>,
    /// User starts since the last background start, while background keys waited.
    user_run: u32,
    /// Reconciles at once, and how many of them run background work now.
    workers: Option<usize>,
    running: [usize; 2],
}

impl<Key: Clone + Eq + Hash> Queue<Key> {
    pub fn new(config: QueueConfig) -> Self {
        Queue {
            config,
            lanes: [VecDeque::new(), VecDeque::new()],
            state: HashMap::new(),
            depth: [0, 0],
            tickets: 0,
            timers: BTreeMap::new(),
            due: HashMap::new(),
            user_run: 0,
            workers: None,
            running: [0, 0],
        }
    }

    /// The runner starts up to `workers` reconciles at once; with two or more, background
    /// work may hold all of them but one.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Queues `key`; true when it was not queued yet (a new entry, counted as an add).
    pub fn add(&mut self, key: Key, priority: Priority, now: Instant) -> bool {
        match self.state.get_mut(&key) {
            Some(State::Running { again, .. }) => {
                *again = Some(match *again {
                    Some((p, since)) => (p.max(priority), since),
                    None => (priority, now),
                });
                false
            }
            Some(State::Queued {
                priority: p, since, ..
            }) => {
                let (p, since) = (*p, *since);
                if priority > p {
                    self.depth[p.lane()] -= 1;
                    self.enqueue(key, priority, since);
                }
                false
            }
            None => {
                self.enqueue(key, priority, now);
                true
            }
        }
    }

    fn enqueue(&mut self, key: Key, priority: Priority, since: Instant) {
        self.tickets += 1;
        let ticket = self.tickets;
        self.lanes[priority.lane()].push_back((ticket, key.clone()));
        self.depth[priority.lane()] += 1;
        self.state.insert(
            key,
            State::Queued {
                priority,
                since,
                ticket,
            },
        );
    }

    /// Queues `key` as background work at `now + delay`, replacing its timer.
    pub fn add_after(&mut self, key: Key, delay: Duration, now: Instant) {
        self.cancel_timer(&key);
        let at = now + delay;
        self.tickets += 1;
        self.timers.insert((at, self.tickets), key.clone());
        self.due.insert(key, (at, self.tickets));
    }

    fn cancel_timer(&mut self, key: &Key) {
        if let Some(t) = self.due.remove(key) {
            self.timers.remove(&t);
        }
    }

    /// When the runner must wake for a timer: the next one's instant, or None while every
    /// worker runs. A timer is fired only by [`Queue::pop`], which the runner calls when a
    /// worker is free; a due timer it woke for with none free would stay due, and wake it
    /// again at once — a runner with a requeue due and every worker busy (a member's hook
    /// waits, at the Helm flavour's 60 s resync) spun on its loop until a reconcile ended.
    /// The end of a reconcile wakes the runner anyway.
    pub fn next_due(&self) -> Option<Instant> {
        if self
            .workers
            .is_some_and(|w| self.running.iter().sum::<usize>() >= w)
        {
            return None;
        }
        self.timers.keys().next().map(|(at, _)| *at)
    }

    fn fire(&mut self, now: Instant) {
        while let Some(entry) = self.timers.first_entry() {
            let at = entry.key().0;
            if at > now {
                break;
            }
            let key = entry.remove();
            self.due.remove(&key);
            self.add(key, Priority::Background, at);
        }
    }

    /// Drops stale entries from the front of a lane; the front's queued time.
    fn front(&mut self, lane: usize) -> Option<Instant> {
        while let Some((ticket, key)) = self.lanes[lane].front() {
            match self.state.get(key) {
                Some(State::Queued {
                    ticket: t, since, ..
                }) if t == ticket => return Some(*since),
                _ => {
                    self.lanes[lane].pop_front();
                }
            }
        }
        None
    }

    /// The next key to reconcile, marked running; None when nothing is queued (timers due
    /// by `now` are queued first).
    pub fn pop(&mut self, now: Instant) -> Option<Popped<Key>> {
        self.fire(now);
        let user = self.front(Priority::User.lane());
        let background = self.front(Priority::Background.lane());
        let lane = match (user, background) {
            (None, None) => return None,
            (Some(_), None) => Priority::User,
            (None, Some(_)) => Priority::Background,
            (Some(_), Some(oldest)) => {
                let aged = now.saturating_duration_since(oldest) >= self.config.aging;
                if aged && self.user_run >= self.config.aged_share && self.background_may_start() {
                    Priority::Background
                } else {
                    Priority::User
                }
            }
        };
        if lane == Priority::Background && !self.background_may_start() {
            // The last free worker is kept for a user change: a new object must not wait
            // for a reconcile of the list (a Helm hook, a role run by real Ansible) to end.
            return None;
        }
        match lane {
            Priority::User if background.is_some() => self.user_run += 1,
            _ => self.user_run = 0,
        }
        let (_, key) = self.lanes[lane.lane()].pop_front()?;
        self.running[lane.lane()] += 1;
        let since = match self
            .state
            .insert(key.clone(), State::Running { lane, again: None })
        {
            Some(State::Queued { since, .. }) => since,
            _ => now,
        };
        self.depth[lane.lane()] -= 1;
        self.cancel_timer(&key);
        Some(Popped {
            key,
            priority: lane,
            waited: now.saturating_duration_since(since),
        })
    }

    /// `key`'s reconcile ended: queued again if it was added meanwhile (true then).
    pub fn done(&mut self, key: &Key) -> bool {
        match self.state.remove(key) {
            Some(State::Running { lane, again }) => {
                self.running[lane.lane()] -= 1;
                match again {
                    Some((priority, since)) => {
                        self.enqueue(key.clone(), priority, since);
                        true
                    }
                    None => false,
                }
            }
            Some(State::Queued {
                priority,
                since,
                ticket,
            }) => {
                // Not running: leave it queued as it was.
                self.state.insert(
                    key.clone(),
                    State::Queued {
                        priority,
                        since,
                        ticket,
                    },
                );
                false
            }
            _ => false,
        }
    }

    /// `key`'s reconcile was aborted before it ended (this replica stopped leading): it is
    /// not running any more and goes to the front of the user lane, ahead of everything
    /// queued, so it is the first work when this replica leads again — its object was half
    /// done. False when `key` was not running.
    pub fn interrupted(&mut self, key: &Key, now: Instant) -> bool {
        let Some(&State::Running { lane, again }) = self.state.get(key) else {
            return false;
        };
        self.running[lane.lane()] -= 1;
        let since = again.map_or(now, |(_, since)| since.min(now));
        self.tickets += 1;
        let ticket = self.tickets;
        let user = Priority::User;
        self.lanes[user.lane()].push_front((ticket, key.clone()));
        self.depth[user.lane()] += 1;
        self.state.insert(
            key.clone(),
            State::Queued {
                priority: user,
                since,
                ticket,
            },
        );
        true
    }

    /// Whether a background key may start now: with `workers` of two or more, one is kept free
    /// for user work.
    fn background_may_start(&self) -> bool {
        match self.workers {
            Some(w) if w >= 2 => self.running[Priority::Background.lane()] < w - 1,
            _ => true,
        }
    }

    /// Keys queued (not running) at `priority`.
    pub fn depth(&self, priority: Priority) -> usize {
        self.depth[priority.lane()]
    }

    /// Keys waiting for a timer.
    pub fn timers(&self) -> usize {
        self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> (Queue<&'static str>, Instant) {
        (Queue::new(QueueConfig::default()), Instant::now())
    }

    fn drain(q: &mut Queue<&'static str>, now: Instant) -> Vec<&'static str> {
        let mut out = Vec::new();
        while let Some(p) = q.pop(now) {
            out.push(p.key);
            q.done(&p.key);
        }
        out
    }

    #[test]
    fn user_changes_go_ahead_of_the_list_first_in_first_out_within_a_priority() {
        let (mut q, t) = queue();
        for k in ["l1", "l2", "l3"] {
            assert!(q.add(k, Priority::Background, t));
        }
        q.add("u1", Priority::User, t);
        q.add("u2", Priority::User, t);
        assert_eq!(q.depth(Priority::Background), 3);
        assert_eq!(q.depth(Priority::User), 2);
        assert_eq!(drain(&mut q, t), ["u1", "u2", "l1", "l2", "l3"]);
        assert_eq!(q.depth(Priority::Background), 0);
        assert_eq!(q.depth(Priority::User), 0);
    }

    #[test]
    fn a_key_is_queued_once_and_a_user_change_lifts_a_listed_key() {
        let (mut q, t) = queue();
        assert!(q.add("a", Priority::Background, t));
        assert!(q.add("b", Priority::Background, t));
        assert!(!q.add("a", Priority::Background, t), "deduplicated");
        assert!(!q.add("b", Priority::User, t + Duration::from_secs(1)));
        assert!(!q.add("b", Priority::Background, t), "never lowered");
        assert_eq!(q.depth(Priority::Background), 1);
        assert_eq!(q.depth(Priority::User), 1);
        let first = q.pop(t + Duration::from_secs(2)).expect("b");
        assert_eq!(
            first,
            Popped {
                key: "b",
                priority: Priority::User,
                waited: Duration::from_secs(2),
            },
            "waited since first queued"
        );
        q.done(&"b");
        assert_eq!(drain(&mut q, t), ["a"], "each key once");
    }

    #[test]
    fn a_running_key_is_not_handed_out_again_until_it_is_done() {
        let (mut q, t) = queue();
        q.add("a", Priority::Background, t);
        let a = q.pop(t).expect("a");
        assert_eq!(a.key, "a");
        assert!(!q.add("a", Priority::Background, t));
        assert!(!q.add("a", Priority::User, t));
        assert_eq!(q.pop(t), None, "a runs: not handed out twice");
        assert_eq!(q.depth(Priority::User), 0);
        assert!(q.done(&"a"), "added meanwhile: queued again");
        let again = q.pop(t).expect("a again");
        assert_eq!(
            (again.key, again.priority),
            ("a", Priority::User),
            "at the highest priority it was added with"
        );
        assert!(!q.done(&"a"));
        assert_eq!(q.pop(t), None);
    }

    #[test]
    fn an_interrupted_key_is_queued_again_ahead_of_everything() {
        let (mut q, t) = queue();
        q.add("l1", Priority::Background, t);
        q.add("r", Priority::Background, t);
        let r = q.pop(t).expect("l1");
        assert_eq!(r.key, "l1");
        q.add("u1", Priority::User, t);
        assert!(!q.interrupted(&"u1", t), "u1 was queued, not running");
        assert!(q.interrupted(&"l1", t));
        assert!(!q.interrupted(&"l1", t), "once");
        assert_eq!(q.depth(Priority::User), 2);
        assert_eq!(q.depth(Priority::Background), 1);
        assert_eq!(drain(&mut q, t), ["l1", "u1", "r"]);
    }

    #[test]
    fn an_interrupted_key_added_while_it_ran_is_queued_once() {
        let (q, t) = queue();
        let mut q = q.with_workers(1);
        q.add("a", Priority::Background, t);
        let _ = q.pop(t).expect("a");
        assert!(!q.add("a", Priority::User, t), "added while it runs");
        assert!(q.interrupted(&"a", t + Duration::from_secs(1)));
        assert_eq!(q.depth(Priority::User), 1);
        let again = q.pop(t + Duration::from_secs(3)).expect("a again");
        assert_eq!(again.waited, Duration::from_secs(3), "since it was added");
        assert!(!q.done(&"a"), "not queued a second time");
        assert_eq!(q.pop(t + Duration::from_secs(3)), None);
    }

    #[test]
    fn aged_background_work_gets_a_share_of_the_starts() {
        let (mut q, t) = queue();
        q.add("l1", Priority::Background, t);
        q.add("l2", Priority::Background, t);
        let mut users = ["u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9", "u10"].iter();
        // Young background work waits for every user change.
        for k in users.by_ref().take(5) {
            q.add(k, Priority::User, t);
        }
        let young = t + Duration::from_secs(1);
        assert_eq!(drain(&mut q, young).len(), 7);
        q.add("l1", Priority::Background, t);
        q.add("l2", Priority::Background, t);
        for k in users.by_ref() {
            q.add(k, Priority::User, t);
        }
        let old = t + QueueConfig::default().aging;
        assert_eq!(
            drain(&mut q, old),
            ["u6", "u7", "u8", "u9", "l1", "u10", "l2"],
            "after `aging`, one start in five is background"
        );
        // Nothing starves: with user work always waiting, background still drains.
        let (mut q, t) = queue();
        for k in ["l1", "l2", "l3"] {
            q.add(k, Priority::Background, t);
        }
        let later = t + Duration::from_secs(60);
        let mut background = 0;
        for _ in 0..20 {
            q.add("u", Priority::User, later);
            let p = q.pop(later).expect("work");
            if p.priority == Priority::Background {
                background += 1;
            }
            q.done(&p.key);
        }
        assert_eq!(background, 3, "every listed key started");
    }

    #[test]
    fn timers_queue_background_work_and_a_start_clears_them() {
        let (mut q, t) = queue();
        q.add_after("r", Duration::from_secs(10), t);
        assert_eq!(q.next_due(), Some(t + Duration::from_secs(10)));
        assert_eq!(q.pop(t + Duration::from_secs(9)), None);
        q.add("u", Priority::User, t + Duration::from_secs(9));
        let at = t + Duration::from_secs(10);
        let got: Vec<_> = std::iter::from_fn(|| {
            let p = q.pop(at)?;
            q.done(&p.key);
            Some((p.key, p.priority))
        })
        .collect();
        assert_eq!(
            got,
            [("u", Priority::User), ("r", Priority::Background)],
            "a due timer queues the key behind user work"
        );
        assert_eq!(q.timers(), 0);

        // A later call replaces the timer; an event starting the key clears it.
        q.add_after("r", Duration::from_secs(10), t);
        q.add_after("r", Duration::from_secs(30), t);
        assert_eq!(q.next_due(), Some(t + Duration::from_secs(30)));
        q.add("r", Priority::User, t);
        assert_eq!(q.pop(t).map(|p| p.key), Some("r"));
        assert_eq!(
            q.next_due(),
            None,
            "the starting reconcile says when to come back"
        );
        q.done(&"r");
        assert_eq!(q.pop(t + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_timer_due_while_every_worker_runs_wakes_nobody_until_one_ends() {
        let t = Instant::now();
        let mut q = Queue::new(QueueConfig::default()).with_workers(2);
        q.add("l1", Priority::Background, t);
        q.add("u1", Priority::User, t);
        assert_eq!(q.pop(t).map(|p| p.key), Some("u1"));
        assert_eq!(q.pop(t).map(|p| p.key), Some("l1"));
        q.add_after("r", Duration::from_secs(1), t);
        // Due, but no worker is free to start it: a wake-up now would start nothing, and
        // the runner would wake again at once (it looped on this without sleeping).
        assert_eq!(
            q.next_due(),
            None,
            "every worker runs: the end of one wakes the runner, not the timer"
        );
        q.done(&"u1");
        assert_eq!(q.next_due(), Some(t + Duration::from_secs(1)));
        let later = t + Duration::from_secs(2);
        assert_eq!(
            q.pop(later).map(|p| p.key),
            None,
            "the free worker is kept for user work"
        );
        assert_eq!(
            q.next_due(),
            None,
            "fired: queued, nothing left to wake for"
        );
        assert_eq!(q.depth(Priority::Background), 1);
        q.done(&"l1");
        assert_eq!(q.pop(later).map(|p| p.key), Some("r"));
    }

    #[test]
    fn a_timer_due_while_its_key_runs_queues_it_after() {
        let (mut q, t) = queue();
        q.add("a", Priority::User, t);
        let _a = q.pop(t).expect("a");
        q.add_after("a", Duration::from_secs(1), t);
        let later = t + Duration::from_secs(2);
        assert_eq!(q.pop(later), None, "still running");
        assert!(q.done(&"a"));
        assert_eq!(
            q.pop(later).map(|p| (p.key, p.priority)),
            Some(("a", Priority::Background))
        );
    }
    #[test]
    fn one_worker_is_kept_for_user_changes_while_background_work_runs() {
        let t = Instant::now();
        let mut q = Queue::new(QueueConfig::default()).with_workers(3);
        for k in ["l1", "l2", "l3", "l4"] {
            q.add(k, Priority::Background, t);
        }
        assert_eq!(q.pop(t).map(|p| p.key), Some("l1"));
        assert_eq!(q.pop(t).map(|p| p.key), Some("l2"));
        assert_eq!(
            q.pop(t),
            None,
            "the third worker waits for a user change, not for the list"
        );
        q.add("u1", Priority::User, t);
        q.add("u2", Priority::User, t);
        assert_eq!(q.pop(t).map(|p| p.key), Some("u1"));
        // Every worker busy: the runner asks again when one ends.
        q.done(&"l1");
        assert_eq!(
            q.pop(t).map(|p| p.key),
            Some("u2"),
            "a freed worker takes user work first"
        );
        q.done(&"u1");
        assert_eq!(
            q.pop(t).map(|p| p.key),
            Some("l3"),
            "background work may hold all workers but one"
        );
        assert_eq!(q.pop(t), None);
        q.done(&"u2");
        assert_eq!(q.pop(t), None, "l2 and l3 run: the last worker stays free");
        q.done(&"l2");
        assert_eq!(q.pop(t).map(|p| p.key), Some("l4"));

        // Aged background work still gets its share, within the same bound.
        let mut q = Queue::new(QueueConfig::default()).with_workers(2);
        q.add("l1", Priority::Background, t);
        q.add("l2", Priority::Background, t);
        let old = t + QueueConfig::default().aging;
        assert_eq!(q.pop(old).map(|p| p.key), Some("l1"));
        assert_eq!(q.pop(old), None);

        // One worker: nothing can be kept back.
        let mut q = Queue::new(QueueConfig::default()).with_workers(1);
        q.add("l1", Priority::Background, t);
        assert_eq!(q.pop(t).map(|p| p.key), Some("l1"));
    }
}
