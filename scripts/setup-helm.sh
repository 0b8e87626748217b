#!/usr/bin/env bash
# A chart renderer for the Helm chart test: Helm's own template engine (libhelm, Helm v4) as
# shipped in PyPI's helm-python-sdk wheel, in a venv cached at ~/.cache/bosun/helm-venv.
# No helm binary is packaged in Debian or reachable here; this is the real engine all the same.
set -euo pipefail
VENV=${BOSUN_HELM_VENV:-$HOME/.cache/bosun/helm-venv}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import helm_python, yaml" 2>/dev/null; then
  echo "$VENV"; exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "helm-python-sdk==0.2.2" "pyyaml==6.0.3" >&2
echo "$VENV"
