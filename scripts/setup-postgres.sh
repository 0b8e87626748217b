#!/usr/bin/env bash
# Real PostgreSQL for the process-mode node agent (crates/testenv, issue 21): Debian's
# postgresql-15 (its programs under /usr/lib/postgresql/15/bin, which the agent maps the
# `postgres:15` image to) and an unprivileged system user the agent runs pods' processes as —
# PostgreSQL refuses to run as root. Idempotent: returns at once when both are present.
# Prints the binary directory. BOSUN_PG_USER names another user (default bosun-pg).
set -euo pipefail

PG_MAJOR=15
BIN=/usr/lib/postgresql/$PG_MAJOR/bin
USER_NAME=${BOSUN_PG_USER:-bosun-pg}

log() { printf '[setup-postgres] %s\n' "$*" >&2; }

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

# python3 (Debian's, in /usr/bin: pods see the host's /usr) serves HTTP in the agent's
# probe tests.
if [ -x "$BIN/postgres" ] && [ -x "$BIN/initdb" ] && command -v psql >/dev/null && [ -x /usr/bin/python3 ]; then
  log "postgresql-$PG_MAJOR present in $BIN"
else
  command -v apt-get >/dev/null || { log "no apt-get: install PostgreSQL $PG_MAJOR so that $BIN/postgres exists"; exit 3; }
  # Error-Mode=any: by default apt-get update exits 0 when no index could be fetched.
  $SUDO apt-get update -qq -o APT::Update::Error-Mode=any -o Acquire::http::Timeout=30
  log "apt-get install postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR python3"
  # The package's postinst creates and starts a `main` cluster on 127.0.0.1:5432 where an init
  # system runs; the agent's pods never use it (they listen on their own pod IPs).
  $SUDO apt-get install -y -qq --no-install-recommends "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR" python3 >/dev/null
fi

if ! getent passwd "$USER_NAME" >/dev/null; then
  log "creating system user $USER_NAME"
  $SUDO useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$USER_NAME"
fi
echo "$BIN"
