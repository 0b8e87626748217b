#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the test control plane's binaries
# (cached in ~/.cache/bosun), builds, checks formatting-independent lints, runs every test
# against a real kube-apiserver, then the quick benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

# Kubernetes, built from upstream Go modules (scripts/assets/versions.env): the current lane
# first, then the floor lane's set in the background while the rest installs and cargo builds
# (each set is built once per machine and cached).
echo "== test control plane assets (Kubernetes current lane, from Go modules)"
bash scripts/setup-assets.sh current >/dev/null
floor_log=$(mktemp)
log=$(mktemp)
setsid bash scripts/setup-assets.sh floor >"$floor_log" 2>&1 &
floor_assets=$!
# operator-sdk's helm-operator and ansible-operator (and CLI), the oracles of the peer_*
# differential tests, also built once per machine from Go modules, also in the background.
# They use the Ansible venv, so they start once scripts/setup-ansible.sh has run (below).
peers_log=$(mktemp)
peers_build=
# An early exit (a lint failing, say) leaves no build running behind it.
trap 'kill -- -"$floor_assets" 2>/dev/null || true; [ -z "$peers_build" ] || kill -- -"$peers_build" 2>/dev/null || true; rm -f "$log" "$floor_log" "$peers_log"' EXIT

echo "== chart renderer (Helm's engine from PyPI)"
bash scripts/setup-helm.sh >/dev/null

echo "== Ansible oracle (ansible-core 2.18 from PyPI, for crates/ansible's differential tests)"
bash scripts/setup-ansible.sh >/dev/null
setsid bash scripts/setup-peers.sh >"$peers_log" 2>&1 &
peers_build=$!

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

echo "== tests (Kubernetes current lane)"
# Tests within one binary share its control plane; binaries share nothing, so two run at once
# (scripts/run-tests.py, as cargo test runs each). Every binary runs even after a failure, so
# one CI run reports every failing test.
wait "$peers_build" || { cat "$peers_log" >&2; echo "operator-sdk's peers failed to build" >&2; exit 1; }
status=0
python3 scripts/run-tests.py --jobs 2 -- --test-threads=4 2>&1 | tee "$log" || status=1
cargo test --workspace --locked --doc 2>&1 | tee -a "$log" || status=1

echo "== floor lane (the oldest supported Kubernetes): BookStore, Helm and Ansible flavours on the seed's operators, MyOwnShell, install manifests"
wait "$floor_assets" || { cat "$floor_log" >&2; echo "floor lane assets failed to build" >&2; exit 1; }
python3 scripts/run-tests.py --jobs 2 --label "[floor lane] " --env BOSUN_KUBE_VERSION=floor \
  --only bosun-bookstore:e2e --only bosun-helm-operator:seed --only bosun-ansible-operator:seed \
  --only bosun-myownshell:e2e --only bosun:install -- --test-threads=4 2>&1 | tee -a "$log" || status=1
[ "$status" = 0 ] || { echo "test failures above (grep FAILED)" >&2; exit 1; }

echo "== a scaffolded Rust operator (bosun init/create api --plugins rust) builds and its tests pass"
# Its own cargo build, on this workspace's crates, target dir and lock file.
cargo test -p bosun-scaffold --locked --test rust_plugin -- --ignored 2>&1 | tee -a "$log"
echo "== a scaffolded Rust operator with webhooks (create webhook, a second version converted) builds and its tests pass"
cargo test -p bosun-scaffold --locked --test webhook_build -- --ignored 2>&1 | tee -a "$log"

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
