#!/usr/bin/env bash
# A real OCI registry for `create api --helm-chart oci://…`'s tests (crates/scaffold,
# tests/oci.rs): Debian bookworm's `docker-registry` package (CNCF distribution 2.8.2, the
# registry behind Docker Hub and most private registries). The tests start
# `docker-registry serve CONFIG` themselves on a free loopback port with a temporary storage;
# the package's own service is not used. Idempotent: does nothing when the binary is present.
# Prints the binary's path.
set -euo pipefail

log() { printf '[setup-oci-registry] %s\n' "$*" >&2; }

if BIN=$(command -v docker-registry); then
  log "docker-registry present at $BIN"
  echo "$BIN"
  exit 0
fi

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
command -v apt-get >/dev/null || {
  log "no apt-get: install CNCF distribution's registry (2.8 or later) as docker-registry on the PATH"
  exit 3
}
apt_update() {
  # Error-Mode=any: by default apt-get update exits 0 when no index could be fetched.
  $SUDO apt-get update -qq -o APT::Update::Error-Mode=any -o Acquire::http::Timeout=30
}
install() {
  $SUDO apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
}
log "apt-get install docker-registry"
# Package lists that are missing or stale (a file the mirror no longer has) are refreshed once.
if ! apt-cache show docker-registry >/dev/null 2>&1; then apt_update; fi
install || { apt_update; install; }
# The tests start their own registries; the package's service (port 5000) is not wanted.
if command -v systemctl >/dev/null && systemctl is-active --quiet docker-registry 2>/dev/null; then
  $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi
BIN=$(command -v docker-registry) || { log "docker-registry is not on the PATH after the install"; exit 1; }
log "docker-registry ready at $BIN"
echo "$BIN"
