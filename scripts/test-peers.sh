#!/usr/bin/env bash
# The differential tests against operator-sdk's own operators (issue 35): builds the peers
# (scripts/setup-peers.sh, once per machine) and the test control plane's binaries, then runs
# crates/bosun/tests/peer_*.rs on the real API server. Extra arguments go to the test binaries
# (a name filter, --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== test control plane assets (Kubernetes current lane, from Go modules)"
bash scripts/setup-assets.sh current >/dev/null
echo "== operator-sdk's helm-operator, ansible-operator and CLI (from Go modules)"
bash scripts/setup-peers.sh >/dev/null
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export CARGO_PROFILE_DEV_STRIP=${CARGO_PROFILE_DEV_STRIP:-debuginfo}
tests=()
for f in crates/bosun/tests/peer_*.rs; do
  t=${f##*/}
  tests+=(--test "${t%.rs}")
done
echo "== differential tests: ${tests[*]}"
cargo test --locked -p bosun "${tests[@]}" -- "$@"
