#!/usr/bin/env bash
# A real S3-compatible server for the S3 backup store's tests (crates/postgres, feature `s3`):
# PyPI's moto 5.2.5 with its server extras, in a venv cached at ~/.cache/bosun/moto-venv
# (BOSUN_MOTO_VENV overrides). The tests start `moto_server` themselves on a free port.
# Prints the venv path.
set -euo pipefail
VENV=${BOSUN_MOTO_VENV:-$HOME/.cache/bosun/moto-venv}
check() {
  [ -x "$VENV/bin/moto_server" ] && "$VENV/bin/python" -c "import moto, flask" 2>/dev/null
}
if check; then echo "$VENV"; exit 0; fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "moto[server]==5.2.5" >&2
check || { echo "moto venv at $VENV is incomplete" >&2; exit 1; }
echo "$VENV"
