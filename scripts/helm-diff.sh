#!/usr/bin/env bash
# Differential check of bosun's Helm renderer against Helm's own engine (libhelm).
# Usage: scripts/helm-diff.sh CHART [-f values.yaml]... [--set a=b]... [--name R]
#        [--namespace N] [--kube-version V] [--api-versions G/V]...
# Prints, per template file, "same" or the first differing line; exits 1 on any difference.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${BOSUN_HELM_VENV:-$HOME/.cache/bosun/helm-venv}
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import helm_python" 2>/dev/null; then
  echo "Helm's engine is not installed: run scripts/setup-helm.sh" >&2
  exit 2
fi
BOSUN=${BOSUN_BIN:-}
if [ -z "$BOSUN" ]; then
  (cd "$ROOT" && cargo build -q -p bosun >&2)
  BOSUN="$ROOT/target/debug/bosun"
fi
exec "$VENV/bin/python" "$ROOT/scripts/helm-diff.py" "$BOSUN" "$@"
