//! The Ansible oracle: `ansible-playbook` from the venv `scripts/setup-ansible.sh` installs
//! (ansible 11.13.0 = ansible-core 2.18), run with the JSON stdout callback.
#![allow(dead_code)]
pub mod diff;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The oracle venv; installing it when missing (the script is idempotent and cached).
pub fn ansible_venv() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/setup-ansible.sh"))
        .output()
        .expect("run scripts/setup-ansible.sh");
    assert!(
        out.status.success(),
        "scripts/setup-ansible.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs a playbook (JSON text) against localhost with `extra_vars` and returns the JSON
/// callback's report.
pub fn run_playbook(
    dir: &Path,
    playbook: &serde_json::Value,
    extra_vars: &serde_json::Value,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let venv = ansible_venv();
    std::fs::write(
        dir.join("playbook.yml"),
        serde_json::to_string_pretty(playbook).expect("test value"),
    )
    .expect("test value");
    std::fs::write(
        dir.join("extra_vars.json"),
        serde_json::to_string(extra_vars).expect("test value"),
    )
    .expect("test value");
    let python = venv.join("bin/python");
    let mut cmd = Command::new(venv.join("bin/ansible-playbook"));
    cmd.current_dir(dir)
        .arg("-i")
        .arg("localhost,")
        .arg("-c")
        .arg("local")
        .arg("-e")
        .arg(format!("ansible_python_interpreter={}", python.display()))
        .arg("-e")
        .arg("@extra_vars.json")
        .arg("playbook.yml")
        .env("ANSIBLE_STDOUT_CALLBACK", "json")
        .env("ANSIBLE_LOCALHOST_WARNING", "false")
        .env("ANSIBLE_DEPRECATION_WARNINGS", "false")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_HOME", dir.join(".ansible"))
        .env("ANSIBLE_LOCAL_TEMP", dir.join(".ansible/tmp"))
        .env("ANSIBLE_GATHERING", "explicit");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run ansible-playbook");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let start = stdout.find('{').unwrap_or_else(|| {
        panic!(
            "no JSON from ansible-playbook:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&stdout[start..]).unwrap_or_else(|e| {
        panic!(
            "bad JSON from ansible-playbook ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The per-task results for localhost, in order: (task name, result).
pub fn task_results(report: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    for play in report["plays"].as_array().expect("test value") {
        for t in play["tasks"].as_array().expect("test value") {
            let name = t["task"]["name"].as_str().unwrap_or_default().to_string();
            out.push((name, t["hosts"]["localhost"].clone()));
        }
    }
    out
}
