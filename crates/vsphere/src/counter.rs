//! Calls per vim25 method, for an operator to export as a metric and for tests to assert on.
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct CallCounts(Mutex<BTreeMap<String, u64>>);

impl CallCounts {
    pub(crate) fn add(&self, method: &str) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(method.to_string()).or_insert(0) += 1;
        }
    }

    /// Calls of one method so far.
    pub fn get(&self, method: &str) -> u64 {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(method).copied())
            .unwrap_or(0)
    }

    /// Every method's count so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// The counts as an OpenMetrics counter family `name` (`<name>_total{method="…"}`),
    /// for a `/metrics` endpoint.
    pub fn openmetrics(&self, name: &str, help: &str) -> String {
        let mut out = format!("# HELP {name} {help}\n# TYPE {name} counter\n");
        for (method, n) in self.snapshot() {
            let method = method
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            out.push_str(&format!("{name}_total{{method=\"{method}\"}} {n}\n"));
        }
        out
    }

    /// All calls so far.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_an_openmetrics_counter_family() {
        let c = CallCounts::default();
        assert!(c
            .openmetrics("vc_calls", "Calls.")
            .ends_with("# TYPE vc_calls counter\n"));
        c.add("CloneVM_Task");
        c.add("CloneVM_Task");
        c.add("Odd\"name");
        let text = c.openmetrics("vc_calls", "Calls.");
        assert!(
            text.contains("vc_calls_total{method=\"CloneVM_Task\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"vc_calls_total{method="Odd\"name"} 1"#),
            "{text}"
        );
    }
}
