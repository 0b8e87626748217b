//! Shared by the differential tests: the oracle venv, a deterministic generator of values and
//! YAML texts, and comparison reporting.

#![allow(dead_code)]

pub mod fixtures;
pub mod gen;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The venv `scripts/setup-helm.sh` creates (helm-python-sdk and PyYAML).
pub fn oracle_python() -> PathBuf {
    let venv = std::env::var_os("BOSUN_HELM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/bosun/helm-venv")
        });
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "the oracle venv is missing at {}: run scripts/setup-helm.sh (or set BOSUN_HELM_VENV)",
        venv.display()
    );
    python
}

/// Runs `tests/oracle/<script>` once with `request` on stdin and returns its JSON answer.
pub fn run_oracle(script: &str, request: &serde_json::Value) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/oracle")
        .join(script);
    let mut child = Command::new(oracle_python())
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the oracle");
    let body = serde_json::to_vec(request).expect("encode request");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&body)
        .expect("write request");
    let out = child.wait_with_output().expect("oracle output");
    assert!(
        out.status.success(),
        "oracle {script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle answers JSON")
}

/// Collects mismatches and fails with the first few, so one run shows the shape of a bug.
#[derive(Default)]
pub struct Diff {
    pub checked: usize,
    pub failures: Vec<String>,
}

impl Diff {
    pub fn check(&mut self, what: &str, input: &str, expected: &str, actual: &str) {
        self.checked += 1;
        if expected != actual {
            self.failures.push(format!(
                "{what}\n  input:    {input:?}\n  oracle:   {expected:?}\n  bosun:    {actual:?}"
            ));
        }
    }

    pub fn finish(self, name: &str) {
        eprintln!(
            "{name}: {} cases checked, {} differ",
            self.checked,
            self.failures.len()
        );
        if !self.failures.is_empty() {
            let shown: Vec<&String> = self.failures.iter().take(25).collect();
            panic!(
                "{name}: {} of {} cases differ from the oracle; first ones:\n{}",
                self.failures.len(),
                self.checked,
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}
