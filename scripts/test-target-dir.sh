#!/usr/bin/env bash
# The scripts that run built binaries (bench/run, scripts/static-check.sh, through
# scripts/static-build.sh) find them where cargo put them, wherever CARGO_TARGET_DIR points
# (issue 14). Cheap: it builds nothing; run it after static-check.sh so the last check sees the
# binaries that check just built.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok() { passed=$((passed+1)); }
ko() { echo "test-target-dir: FAILED: $*" >&2; failed=$((failed+1)); }

# CARGO_TARGET_DIR elsewhere, absolute and relative (cargo takes a relative one from the
# directory it runs in, the workspace root here).
profile=${BOSUN_STATIC_PROFILE:-release}
want=$tmp/elsewhere/x86_64-unknown-linux-gnu/$profile
got=$(CARGO_TARGET_DIR=$tmp/elsewhere bash scripts/static-build.sh --print-dir)
if [ "$got" = "$want" ]; then ok; else ko "CARGO_TARGET_DIR=$tmp/elsewhere: looks in $got, cargo builds in $want"; fi
want=$PWD/rel-target/x86_64-unknown-linux-gnu/$profile
got=$(cd "$tmp" && CARGO_TARGET_DIR=rel-target bash "$OLDPWD/scripts/static-build.sh" --print-dir)
if [ "$got" = "$want" ]; then ok; else ko "CARGO_TARGET_DIR=rel-target: looks in $got, cargo builds in $want"; fi

# In this environment, the directory named is the one holding what the last build made.
dir=$(bash scripts/static-build.sh --print-dir)
for b in bosun bosun-bench; do
  if [ -x "$dir/$b" ]; then ok; else ko "$b not in $dir (run scripts/static-check.sh first)"; fi
done

# No script guesses the path itself any more.
for f in bench/run bench/heap scripts/static-check.sh; do
  if grep -n 'target/' "$f" >&2; then ko "$f names a target/ path of its own"; else ok; fi
done

echo "test-target-dir: $passed of $((passed+failed)) checks ok" >&2
[ "$failed" = 0 ]
