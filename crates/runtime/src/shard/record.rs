//! A durable record of each controller's child kinds, kept on the Leases a replica already
//! renews: the kinds the Helm and Ansible flavours only meet while reconciling (a template
//! that renders later, a templated `kind:`) are otherwise known to the one replica that met
//! them, and a failover or a move would find them cold or unlabelled.
//!
//! * **Where.** One annotation, [`CHILD_KINDS_ANNOTATION`], on the leader Lease (leader
//!   election), and with `--sharding` on each member's Lease and on the sharder Lease. It is
//!   written with the renewal that holder sends anyway (no write of its own: a record that
//!   grows reaches the Lease within one retry period), and read where the Lease is read
//!   anyway: a standby's campaign, the sharder's round over the member Leases, every
//!   replica's campaign for the sharder Lease. So every replica converges on the union of
//!   what any replica met, within a few retry periods, and no new kind or object is needed.
//! * **What.** `{"<controller>": ["<group>/<version>/<Kind>", ...]}` (the core group as
//!   `v1/<Kind>`): what a replica's controllers started, and what it read from a record,
//!   merged. A kind is never dropped within a process (a kind whose CRD went keeps its entry
//!   and fails to start, reported and skipped).
//! * **Bounded, validated when read.** At most [`MAX_KINDS`] kinds and [`MAX_BYTES`] of text;
//!   every name checked. A record that someone edited into something else (not JSON, a bad
//!   name, too big) is ignored whole with one warning per distinct value, never a crash; a
//!   replica that holds the Lease then writes its own record over it.
//! * **Who acts on it.** A wired [`crate::dynamic::DynamicChildren`] starts the cache of each
//!   kind recorded for its controller (a standby before it leads; everyone as the record
//!   grows); the sharder's takeover and a member's hand-off relabel children of every kind
//!   recorded, not only those started on the replica doing the move.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use kube::core::GroupVersionKind;
use tokio::sync::watch;

/// The annotation that carries the record on a Lease.
pub const CHILD_KINDS_ANNOTATION: &str = "bosun.dev/child-kinds";
/// Kinds at most in one record, all controllers together.
pub const MAX_KINDS: usize = 200;
/// Characters at most of one record's text (a Lease is written every retry period).
pub const MAX_BYTES: usize = 8 * 1024;

/// Why a record read from a Lease was ignored.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("{0} bytes, more than the {MAX_BYTES} a record may hold")]
    TooLong(usize),
    #[error("{0} kinds, more than the {MAX_KINDS} a record may hold")]
    TooMany(usize),
    #[error("not a JSON object of controller names to kind lists: {0}")]
    Shape(String),
    #[error("{0:?} is not a controller name")]
    Controller(String),
    #[error("{0:?} is not <group>/<version>/<Kind> (or v1/<Kind>)")]
    Kind(String),
}

/// Kinds per controller, each as [`kind_text`] writes it (checked).
pub type Kinds = BTreeMap<String, BTreeSet<String>>;

/// `<group>/<version>/<Kind>`, or `<version>/<Kind>` for the core group.
pub fn kind_text(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{}/{}", gvk.version, gvk.kind)
    } else {
        format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
    }
}

fn parse_kind(s: &str) -> Option<GroupVersionKind> {
    let (api_version, kind) = s.rsplit_once('/')?;
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let group_ok = group.len() <= 253
        && group
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        || group.is_empty();
    let version_ok = !version.is_empty()
        && version.len() <= 63
        && version
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let kind_ok = !kind.is_empty()
        && kind.len() <= 63
        && kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind.chars().all(|c| c.is_ascii_alphanumeric());
    (group_ok && version_ok && kind_ok).then(|| GroupVersionKind::gvk(group, version, kind))
}

fn controller_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.chars().all(|c| c.is_ascii_graphic())
}

/// A record's text, validated whole: any fault rejects all of it.
pub fn parse(text: &str) -> Result<Kinds, RecordError> {
    if text.len() > MAX_BYTES {
        return Err(RecordError::TooLong(text.len()));
    }
    let raw: BTreeMap<String, Vec<String>> =
        serde_json::from_str(text).map_err(|e| RecordError::Shape(e.to_string()))?;
    let total: usize = raw.values().map(Vec::len).sum();
    if total > MAX_KINDS {
        return Err(RecordError::TooMany(total));
    }
    let mut out = Kinds::new();
    for (controller, kinds) in raw {
        if !controller_ok(&controller) {
            return Err(RecordError::Controller(controller));
        }
        let set = out.entry(controller).or_default();
        for k in kinds {
            let gvk = parse_kind(&k).ok_or(RecordError::Kind(k))?;
            set.insert(kind_text(&gvk));
        }
    }
    Ok(out)
}

/// `kinds` as a record's text, within the bounds (what does not fit is left out, the
/// controllers in name order, so every writer keeps the same part).
pub fn render(kinds: &Kinds) -> String {
    let mut raw: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut count = 0;
    let mut len = 2;
    'all: for (controller, set) in kinds {
        for text in set {
            let text = text.clone();
            // The kind's text, its quotes and comma; a new controller's key besides.
            let extra = text.len()
                + 3
                + if raw.contains_key(controller.as_str()) {
                    0
                } else {
                    controller.len() + 6
                };
            if count == MAX_KINDS || len + extra > MAX_BYTES {
                tracing::warn!(
                    kinds = count,
                    "the record of child kinds is full: the rest is left out"
                );
                break 'all;
            }
            count += 1;
            len += extra;
            raw.entry(controller).or_default().push(text);
        }
    }
    serde_json::to_string(&raw).unwrap_or_default()
}

/// One process's record: the kinds its controllers started and those it read, shared by its
/// Lease writers, its readers and its child caches (cheap to clone).
#[derive(Clone)]
pub struct Record {
    inner: Arc<Inner>,
}

struct Inner {
    kinds: Mutex<Kinds>,
    /// The last value refused, so a bad record is reported once, not every retry period.
    refused: Mutex<Option<String>>,
    /// Bumped whenever a kind is added (started or read).
    grown: watch::Sender<u64>,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            inner: Arc::new(Inner {
                kinds: Mutex::default(),
                refused: Mutex::default(),
                grown: watch::channel(0).0,
            }),
        }
    }
}

impl Record {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kinds> {
        self.inner.kinds.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds what `kinds` holds; true when something was new.
    pub fn merge(&self, kinds: &Kinds) -> bool {
        let mut grew = false;
        {
            let mut all = self.lock();
            for (controller, set) in kinds {
                let mine = all.entry(controller.clone()).or_default();
                for gvk in set {
                    grew |= mine.insert(gvk.clone());
                }
            }
        }
        if grew {
            self.inner.grown.send_modify(|n| *n += 1);
        }
        grew
    }

    /// A kind `controller` started on this replica.
    pub fn note(&self, controller: &str, gvk: &GroupVersionKind) {
        self.merge(&Kinds::from([(
            controller.to_string(),
            BTreeSet::from([kind_text(gvk)]),
        )]));
    }

    /// Reads the record on a Lease's annotations: merged when valid; refused with a warning
    /// (once per distinct value) when not.
    pub fn read(&self, annotations: Option<&BTreeMap<String, String>>, lease: &str) {
        let Some(text) = annotations.and_then(|a| a.get(CHILD_KINDS_ANNOTATION)) else {
            return;
        };
        match parse(text) {
            Ok(kinds) => {
                if self.merge(&kinds) {
                    tracing::info!(lease = %lease, "child kinds read from a lease's record");
                }
            }
            Err(e) => {
                let mut refused = self.inner.refused.lock().unwrap_or_else(|e| e.into_inner());
                if refused.as_deref() != Some(text.as_str()) {
                    tracing::warn!(lease = %lease, error = %e, "the record of child kinds on a lease is ignored");
                    *refused = Some(text.clone());
                }
            }
        }
    }

    /// Writes this record on a Lease's annotations (about to be sent with a renewal).
    pub fn write(&self, annotations: &mut Option<BTreeMap<String, String>>) {
        let kinds = self.lock().clone();
        if kinds.values().all(BTreeSet::is_empty) {
            return;
        }
        annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(CHILD_KINDS_ANNOTATION.to_string(), render(&kinds));
    }

    /// The kinds recorded for `controller`.
    pub fn kinds_of(&self, controller: &str) -> Vec<GroupVersionKind> {
        self.lock()
            .get(controller)
            .into_iter()
            .flatten()
            .filter_map(|k| parse_kind(k))
            .collect()
    }

    /// Changes whenever the record grows.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.grown.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(g: &str, v: &str, k: &str) -> GroupVersionKind {
        GroupVersionKind::gvk(g, v, k)
    }

    #[test]
    fn a_record_reads_back_what_was_written() {
        let r = Record::default();
        r.note("helm-a", &gvk("", "v1", "Secret"));
        r.note("helm-a", &gvk("apps", "v1", "Deployment"));
        r.note(
            "ansible-b",
            &gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        );
        let mut ann = None;
        r.write(&mut ann);
        let text = ann
            .as_ref()
            .and_then(|a| a.get(CHILD_KINDS_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("\"v1/Secret\"") && text.contains("apps/v1/Deployment"));
        let other = Record::default();
        let mut grown = other.subscribe();
        other.read(ann.as_ref(), "l");
        assert!(grown.has_changed().unwrap_or(false));
        assert_eq!(other.kinds_of("helm-a"), r.kinds_of("helm-a"));
        assert_eq!(other.kinds_of("ansible-b").len(), 1);
        // Read again: nothing new, no change.
        grown.mark_unchanged();
        other.read(ann.as_ref(), "l");
        assert!(!grown.has_changed().unwrap_or(true));
    }

    #[test]
    fn a_malformed_or_oversized_record_is_refused_whole() {
        for (text, want) in [
            ("not json", "JSON"),
            ("[\"v1/Secret\"]", "JSON"),
            ("{\"op\":\"v1/Secret\"}", "JSON"),
            ("{\"op\":[\"Secret\"]}", "Secret"),
            ("{\"op\":[\"v1/secret-x\"]}", "secret-x"),
            ("{\"op\":[\"Bad_Group/v1/Thing\"]}", "Bad_Group"),
            ("{\"op\":[\"apps/V1/Deployment\"]}", "V1"),
            ("{\"\":[\"v1/Secret\"]}", "controller"),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let many: Vec<String> = (0..=MAX_KINDS).map(|i| format!("v1/K{i}")).collect();
        let text = serde_json::json!({ "op": many }).to_string();
        assert_eq!(parse(&text), Err(RecordError::TooMany(MAX_KINDS + 1)));
        let long = format!("{{\"op\":[\"{}/v1/K\"]}}", "a".repeat(MAX_BYTES));
        assert!(matches!(parse(&long), Err(RecordError::TooLong(_))));

        // Read from a Lease: ignored, what the record held before is kept.
        let r = Record::default();
        r.note("op", &gvk("", "v1", "Secret"));
        for bad in ["not json", &long, &text] {
            let ann = BTreeMap::from([(CHILD_KINDS_ANNOTATION.to_string(), bad.to_string())]);
            r.read(Some(&ann), "edited");
        }
        assert_eq!(r.kinds_of("op").len(), 1);
    }

    #[test]
    fn a_full_record_is_written_within_its_bounds() {
        let r = Record::default();
        for i in 0..(MAX_KINDS + 50) {
            r.note(
                &format!("c{}", i % 7),
                &gvk("example.com", "v1", &format!("K{i}")),
            );
        }
        let mut ann = None;
        r.write(&mut ann);
        let text = ann
            .and_then(|a| a.get(CHILD_KINDS_ANNOTATION).cloned())
            .unwrap_or_default();
        let back = parse(&text).expect("what is written is read back");
        assert_eq!(back.values().map(BTreeSet::len).sum::<usize>(), MAX_KINDS);

        // Long names: the byte bound holds first.
        let r = Record::default();
        let group = format!("{}.example.com", "g".repeat(200));
        for i in 0..100 {
            r.note("op", &gvk(&group, "v1", &format!("K{i}")));
        }
        let mut ann = None;
        r.write(&mut ann);
        let text = ann
            .and_then(|a| a.get(CHILD_KINDS_ANNOTATION).cloned())
            .unwrap_or_default();
        assert!(text.len() <= MAX_BYTES, "{}", text.len());
        assert!(parse(&text).is_ok());
    }

    #[test]
    fn an_empty_record_writes_nothing() {
        let mut ann = None;
        Record::default().write(&mut ann);
        assert!(ann.is_none());
    }
}
