#!/usr/bin/env bash
# Render times, bosun vs Helm's engine (libhelm, helm-python-sdk), median of N renders, for
# the book-store chart and the large generated chart. One line per chart.
# Usage: scripts/bench-helm-render.sh [N]   (BOSUN_BIN=path/to/bosun to measure that binary;
# by default the static release build of scripts/static-build.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-50}
VENV=$("$ROOT/scripts/setup-helm.sh")
BOSUN=${BOSUN_BIN:-}
if [ -z "$BOSUN" ]; then
  BOSUN="$(bash "$ROOT/scripts/static-build.sh")/bosun"
fi
for chart in examples/helm-bookstore/helm-charts/book-store crates/helm/tests/charts/large; do
  b=$("$BOSUN" render "$ROOT/$chart" --kube-version v1.31.0 --bench "$N")
  h=$("$VENV/bin/python" "$ROOT/scripts/helm-oracle.py" bench "$ROOT/$chart" '{}' '{"kube_version": "v1.31.0"}' "$N")
  echo "$(basename "$chart"): bosun ${b} (median of $N); helm ${h}"
done
