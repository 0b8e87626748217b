//! ansible-operator's own reconcile metric, `ansible_operator_reconciles`: a histogram of how
//! long each reconcile takes, in seconds, labelled by `GVK` (Go's `GroupVersionKind.String()`,
//! `charts.example.com/v1alpha1, Kind=BookStore`), with Prometheus' default buckets — the
//! name, help, label and buckets ansible-operator registers, so its dashboards keep working.
//!
//! ansible-operator times each `runner.Run` (the call that starts ansible-runner); bosun times
//! each reconcile of a role or playbook entry, either engine, from its start to its status
//! write, with a guard dropped at the end (a cancelled reconcile is observed too).
//! The figures are process-wide, as ansible-operator's registry is, and served on `/metrics`
//! beside the `osdk_metric` families ([`crate::AnsibleFlavor`]'s `metrics_text`).
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The family's name, as ansible-operator exposes it.
pub const NAME: &str = "ansible_operator_reconciles";
const HELP: &str = "How long in seconds a reconcile takes.";
/// Prometheus' `DefBuckets`, which ansible-operator's histogram uses.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Debug, Default, PartialEq)]
struct Series {
    /// Per bucket, not cumulative; observations above the last bucket are only counted.
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Series {
    fn observe(&mut self, secs: f64) {
        if let Some(i) = BUCKETS.iter().position(|le| secs <= *le) {
            self.buckets[i] += 1;
        }
        self.sum += secs;
        self.count += 1;
    }
}

/// The histogram, one series per GVK.
#[derive(Default)]
pub struct Reconciles(Mutex<BTreeMap<String, Series>>);

impl Reconciles {
    /// The process-wide histogram `/metrics` serves.
    pub fn global() -> &'static Reconciles {
        static GLOBAL: OnceLock<Reconciles> = OnceLock::new();
        GLOBAL.get_or_init(Reconciles::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Series>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn observe(&self, gvk: &str, took: Duration) {
        let mut m = self.lock();
        match m.get_mut(gvk) {
            Some(s) => s.observe(took.as_secs_f64()),
            None => {
                let mut s = Series::default();
                s.observe(took.as_secs_f64());
                m.insert(gvk.to_string(), s);
            }
        }
    }

    /// Starts timing one reconcile of `gvk`'s kind: observed when the guard is dropped.
    pub fn timer(&'static self, gvk: Arc<str>) -> Timer {
        Timer {
            into: self,
            gvk,
            start: Instant::now(),
        }
    }

    /// The family as OpenMetrics text (nothing before the first reconcile, as a Go
    /// `HistogramVec` without children).
    pub fn encode_openmetrics(&self) -> String {
        let m = self.lock();
        let mut out = String::new();
        if m.is_empty() {
            return out;
        }
        let _ = writeln!(out, "# HELP {NAME} {HELP}\n# TYPE {NAME} histogram");
        for (gvk, s) in m.iter() {
            let gvk = gvk
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            let mut cum = 0;
            for (le, n) in BUCKETS.iter().zip(&s.buckets) {
                cum += n;
                let _ = writeln!(out, "{NAME}_bucket{{GVK=\"{gvk}\",le=\"{le:?}\"}} {cum}");
            }
            let _ = writeln!(
                out,
                "{NAME}_bucket{{GVK=\"{gvk}\",le=\"+Inf\"}} {}\n{NAME}_sum{{GVK=\"{gvk}\"}} {:?}\n{NAME}_count{{GVK=\"{gvk}\"}} {}",
                s.count, s.sum, s.count
            );
        }
        out
    }
}

/// Go's `schema.GroupVersionKind.String()`: `group/version, Kind=kind` (`/version, Kind=…`
/// for the core group).
pub fn gvk_label(gvk: &kube::core::GroupVersionKind) -> String {
    format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
}

/// Observes the time since it was made when dropped.
pub struct Timer {
    into: &'static Reconciles,
    gvk: Arc<str>,
    start: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.into.observe(&self.gvk, self.start.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_family_is_ansible_operators() {
        let r: &'static Reconciles = Box::leak(Box::default());
        assert_eq!(r.encode_openmetrics(), "", "no series before a reconcile");
        let gvk = gvk_label(&kube::core::GroupVersionKind::gvk(
            "charts.example.com",
            "v1alpha1",
            "BookStore",
        ));
        assert_eq!(gvk, "charts.example.com/v1alpha1, Kind=BookStore");
        r.observe(&gvk, Duration::from_millis(3));
        r.observe(&gvk, Duration::from_millis(300));
        r.observe(&gvk, Duration::from_secs(20));
        drop(r.timer(gvk.as_str().into()));
        let text = r.encode_openmetrics();
        let line = |s: &str| {
            text.lines()
                .find(|l| l.starts_with(s))
                .unwrap_or_else(|| panic!("{s} in {text}"))
                .rsplit(' ')
                .next()
                .map(str::to_string)
                .unwrap_or_default()
        };
        let series = "ansible_operator_reconciles_bucket{GVK=\"charts.example.com/v1alpha1, Kind=BookStore\",";
        assert_eq!(line(&format!("{series}le=\"0.005\"}}")), "2");
        assert_eq!(line(&format!("{series}le=\"0.25\"}}")), "2");
        assert_eq!(line(&format!("{series}le=\"0.5\"}}")), "3");
        assert_eq!(line(&format!("{series}le=\"10.0\"}}")), "3");
        assert_eq!(line(&format!("{series}le=\"+Inf\"}}")), "4");
        assert_eq!(line("ansible_operator_reconciles_count{"), "4");
        assert!(text.starts_with(
            "# HELP ansible_operator_reconciles How long in seconds a reconcile takes.\n# TYPE ansible_operator_reconciles histogram\n"
        ));
        let sum: f64 = line("ansible_operator_reconciles_sum{")
            .parse()
            .expect("a number");
        assert!(sum >= 20.303, "{sum}");
    }
}
