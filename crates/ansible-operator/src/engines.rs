//! Which engine runs each role or playbook entry, as a metric: `bosun_ansible_entry_engine`,
//! a gauge of 1 per entry labelled with its `GVK`, its `engine` (`native`, `ansible` for real
//! Ansible, `refused` for an entry that cannot run) and `reason` — the first construct the
//! native engine does not run (file:line:col and what), or why the entry is refused. Set
//! once at load, when the same reason is logged once: a dashboard shows which entries need
//! Python and why without reading logs.
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, OnceLock};

pub const NAME: &str = "bosun_ansible_entry_engine";

/// How long a reason label may be (a refusal can list many constructs).
const MAX_REASON: usize = 512;

#[derive(Default)]
pub struct Engines(Mutex<BTreeMap<String, (&'static str, String)>>);

impl Engines {
    pub fn global() -> &'static Engines {
        static GLOBAL: OnceLock<Engines> = OnceLock::new();
        GLOBAL.get_or_init(Engines::default)
    }

    /// Records the entry's engine (the last load of an entry wins).
    pub fn set(&self, gvk: &str, engine: &'static str, reason: &str) {
        let mut reason = reason.lines().next().unwrap_or_default().to_string();
        if reason.len() > MAX_REASON {
            let mut cut = MAX_REASON;
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
        }
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(gvk.to_string(), (engine, reason));
    }

    pub fn encode_openmetrics(&self) -> String {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "# HELP {NAME} The engine that runs a watches entry, and why (1 per entry).\n# TYPE {NAME} gauge\n"
        );
        for (gvk, (engine, reason)) in m.iter() {
            let _ = writeln!(
                out,
                "{NAME}{{GVK=\"{}\",engine=\"{engine}\",reason=\"{}\"}} 1",
                escape(gvk),
                escape(reason)
            );
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_entry_with_its_first_reason() {
        let e = Engines::default();
        assert_eq!(e.encode_openmetrics(), "");
        e.set("a/v1, Kind=A", "native", "");
        e.set(
            "b/v1, Kind=B",
            "ansible",
            "r/tasks/main.yml:4:3: module 'shell' is \"x\"\nsecond line",
        );
        let text = e.encode_openmetrics();
        assert!(text.contains(
            "bosun_ansible_entry_engine{GVK=\"b/v1, Kind=B\",engine=\"ansible\",reason=\"r/tasks/main.yml:4:3: module 'shell' is \\\"x\\\"\"} 1"
        ), "{text}");
        assert!(text.contains("engine=\"native\",reason=\"\"} 1"), "{text}");
        assert!(!text.contains("second line"), "{text}");
    }
}
