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

    /// All calls so far.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}
