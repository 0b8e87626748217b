#!/usr/bin/env bash
# Builds bosun and the benchmark harness as fully static release binaries (glibc with
# crt-static: the musl toolchain of the Dockerfile is not installable here) and prints the
# directory holding them. The directory is cargo's answer (`cargo metadata`), never a guess, so
# CARGO_TARGET_DIR and a `build.target-dir` setting are honoured.
#   --print-dir   only resolve and print the directory, build nothing (scripts/test-target-dir.sh)
# BOSUN_STATIC_PROFILE picks the cargo profile (default release; CI uses ci, see Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=x86_64-unknown-linux-gnu
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
PROFILE=${BOSUN_STATIC_PROFILE:-release}
# A static executable at a fixed address, not a static-pie: a static-pie relocates itself at
# start, which reads all of its 2 MB relocation table (resident for good, as file pages) and
# dirties the 1.2 MB of pointer tables it patches (resident for good, as anonymous memory) —
# 3.2 MB of every operator's RSS (BENCHMARKS.md). Go builds operator-sdk's operators the same
# way (non-PIE). The price is no address randomization of the binary's own code; build with
# BOSUN_PIE=1 to keep it.
STATIC_RUSTFLAGS="-C target-feature=+crt-static"
[ "${BOSUN_PIE:-0}" = 1 ] || STATIC_RUSTFLAGS="$STATIC_RUSTFLAGS -C relocation-model=static"
dir=$target_dir/$TARGET/$PROFILE
if [ "${1:-}" != --print-dir ]; then
  RUSTFLAGS="$STATIC_RUSTFLAGS" cargo build --profile "$PROFILE" --locked -q --target "$TARGET" -p bosun -p bosun-bench
  for b in bosun bosun-bench bosun-chaos bosun-heap; do
    [ -x "$dir/$b" ] || { echo "static-build: cargo built $b, but it is not in $dir" >&2; exit 1; }
  done
fi
echo "$dir"
