#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the test control plane's binaries
# (cached in ~/.cache/bosun), builds, checks formatting-independent lints, runs every test
# against a real kube-apiserver, then the quick benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== test control plane assets"
bash scripts/setup-assets.sh >/dev/null

echo "== chart renderer (Helm's engine from PyPI)"
bash scripts/setup-helm.sh >/dev/null

echo "== Ansible oracle (ansible-core 2.18 from PyPI, for crates/ansible's differential tests)"
bash scripts/setup-ansible.sh >/dev/null

echo "== PostgreSQL 15 and the bosun-pg user (for the process-mode node agent's pods)"
bash scripts/setup-postgres.sh >/dev/null

echo "== S3-compatible server (moto from PyPI, for the PostgresCluster S3 backup store's tests)"
bash scripts/setup-moto.sh >/dev/null

echo "== vSphere simulator (vcsim from Debian's govmomi source, for crates/vsphere's tests)"
bash scripts/setup-vcsim.sh >/dev/null
bash scripts/setup-oci-registry.sh >/dev/null  # CNCF distribution, for create api --helm-chart oci://

echo "== build"
# A clean checkout gains nothing from incremental state, and it was a third of the target dir.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# Nor from debug info in the test binaries (std's own included): a failed assertion reports
# its file:line without it. That halves the target dir again (4.3 GB with line tables).
export CARGO_PROFILE_DEV_STRIP=${CARGO_PROFILE_DEV_STRIP:-debuginfo}
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
echo "disk free where the build goes: $(df -h --output=avail "$target" | tail -1 | tr -d ' ')"
cargo build --workspace --all-targets --locked

echo "== format"
cargo fmt --version >/dev/null 2>&1 || { echo "rustfmt is missing: rustup component add rustfmt" >&2; exit 1; }
cargo fmt --all -- --check

echo "== clippy (unwrap denied outside tests)"
cargo clippy --version >/dev/null 2>&1 || { echo "clippy is missing: rustup component add clippy" >&2; exit 1; }
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== tests"
# Test binaries run one after another; tests within one share its control plane. Every
# binary runs even after a failure, so one CI run reports every failing test.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked --no-fail-fast -- --test-threads=4 2>&1 | tee "$log"

echo "== a scaffolded Rust operator (bosun init/create api --plugins rust) builds and its tests pass"
# Its own cargo build, on this workspace's crates, target dir and lock file.
cargo test -p bosun-scaffold --locked --test rust_plugin -- --ignored 2>&1 | tee -a "$log"

echo "target dir after the tests: $(du -sh "$target" | cut -f1)"

echo "== workflow syntax"
bash scripts/validate-workflows.sh

# The static binary of the checks, the quick bench and the quick chaos suite: the release
# build without LTO (Cargo.toml, profile ci); the full bench/run and bench/chaos use release.
export BOSUN_STATIC_PROFILE=${BOSUN_STATIC_PROFILE:-ci}

echo "== static binary runs with no libc present"
bash scripts/static-check.sh >/dev/null

echo "== built binaries found wherever CARGO_TARGET_DIR points"
bash scripts/test-target-dir.sh

if [ -x bench/run ]; then
  echo "== benchmark (quick)"
  bench/run --quick
fi

if [ -x bench/chaos ]; then
  # Fails the suite when an invariant breaks (the full form: bench/chaos).
  echo "== chaos suite (quick)"
  bench/chaos --quick
fi

# One closing line for the whole suite (every cargo test binary summed).
total=$(grep -E '^test result:' "$log" | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/' | awk '{p+=$1; f+=$2} END {print p+0, f+0}')
echo "bosun: ${total% *} passed, ${total#* } failed"
