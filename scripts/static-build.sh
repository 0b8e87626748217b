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
dir=$target_dir/$TARGET/$PROFILE
if [ "${1:-}" != --print-dir ]; then
  RUSTFLAGS="-C target-feature=+crt-static" cargo build --profile "$PROFILE" --locked -q --target "$TARGET" -p bosun -p bosun-bench
  for b in bosun bosun-bench bosun-chaos bosun-heap; do
    [ -x "$dir/$b" ] || { echo "static-build: cargo built $b, but it is not in $dir" >&2; exit 1; }
  done
fi
echo "$dir"
