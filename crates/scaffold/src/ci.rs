//! The CI job `init` writes: `bosun verify --quick` on every push and pull request (GitHub
//! Actions, the CI most operator projects use; the job is one command, so another CI takes
//! the same lines). The local control plane's binaries are built from Go modules on first use
//! and cached with bosun itself, so a warm run pays only for the verify.

use crate::Plugin;

/// `.github/workflows/verify.yml`.
pub fn verify_workflow(plugin: Plugin) -> String {
    let version = env!("CARGO_PKG_VERSION");
    // A Rust project's operator is built (`cargo build`, once) by bosun verify inside the
    // job: its target dir is worth caching too.
    let cache_target = match plugin {
        Plugin::Rust => "\n            target",
        Plugin::Helm | Plugin::Ansible => "",
    };
    format!(
        r#"# bosun verify --quick: the operator on a local control plane under faults (kill -9 while it
# converges, an API server restart, stale watch events, children edited and deleted behind its
# back, a restart served an old view of its custom resources, a second spec mid-convergence),
# each followed by the invariant checks (converges to the fault-free end state, no orphaned or
# doubled children, no write at rest or on a restart, nothing destroyed on an old view,
# finalizers clear, failures shown in status, no Secret value in its log). A failure prints
# the command that replays it (same --seed); the JUnit report and the operator's logs are
# kept as artifacts. Written by `bosun init`.
name: verify

on:
  push:
  pull_request:

jobs:
  verify:
    runs-on: ubuntu-latest
    timeout-minutes: 60
    steps:
      - uses: actions/checkout@v4
      # The first run builds etcd and kube-apiserver from Go modules (then cached).
      - uses: actions/setup-go@v5
        with:
          go-version: stable
      - uses: actions/cache@v4
        with:
          path: |
            ~/.cache/bosun
            ~/.cargo/bin/bosun{cache_target}
          key: bosun-verify-${{{{ runner.os }}}}-v{version}
      - name: Install bosun
        run: command -v bosun || cargo install --locked --git https://github.com/bosun-dev/bosun --tag v{version} bosun
      - name: bosun verify --quick
        run: bosun verify --quick --junit verify.xml --logs verify-logs
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: bosun-verify
          path: |
            verify.xml
            verify-logs
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_runs_verify_quick_and_keeps_the_report() {
        for plugin in [Plugin::Helm, Plugin::Ansible, Plugin::Rust] {
            let y = verify_workflow(plugin);
            let doc: serde_yaml::Value = serde_yaml::from_str(&y).expect("valid YAML");
            let steps = doc["jobs"]["verify"]["steps"].as_sequence().expect("steps");
            let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
            assert!(
                runs.contains(&"bosun verify --quick --junit verify.xml --logs verify-logs"),
                "{y}"
            );
            assert!(y.contains(&format!("--tag v{}", env!("CARGO_PKG_VERSION"))));
            assert!(y.contains("key: bosun-verify-${{ runner.os }}-v"), "{y}");
            assert_eq!(y.contains("\n            target\n"), plugin == Plugin::Rust);
        }
    }
}
