#!/usr/bin/env bash
# Builds bosun as a fully static binary (glibc, crt-static: the musl toolchain of the
# Dockerfile is not installable here) and proves it starts with no libc present: it runs in an
# empty chroot holding nothing but the binary. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(bash scripts/static-build.sh)/bosun
# A dynamically linked executable names its loader in a PT_INTERP header; a static(-pie) one
# has none.
if readelf -l "$BIN" | grep -q INTERP; then
  echo "static-check: FAILED: $BIN is dynamically linked" >&2; readelf -l "$BIN" | grep -A1 INTERP >&2; exit 1
fi
# A fixed-address executable (ELF type EXEC), unless BOSUN_PIE=1 asked for a static-pie: see
# scripts/static-build.sh for why.
if [ "${BOSUN_PIE:-0}" != 1 ] && ! readelf -h "$BIN" | grep -q 'Type:.*EXEC'; then
  echo "static-check: FAILED: $BIN is position-independent (it relocates itself at every start)" >&2
  readelf -h "$BIN" | grep Type: >&2; exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cp "$BIN" "$root/bosun"
passed=0; failed=0
check() { if "$@" >/dev/null 2>&1; then passed=$((passed+1)); else echo "static-check: FAILED: $*" >&2; failed=$((failed+1)); fi; }
if [ "$(id -u)" = 0 ]; then
  check chroot "$root" /bosun version
  check chroot "$root" /bosun crd
  check chroot "$root" /bosun manifests
else
  echo "static-check: not root, running outside a chroot" >&2
  check "$root/bosun" version
fi
ls "$root" >&2
echo "static-check: $passed of $((passed+failed)) checks ok" >&2
[ "$failed" = 0 ]
echo "$BIN"
