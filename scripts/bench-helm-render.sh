#!/usr/bin/env bash
# Render times, bosun vs Helm's engine (libhelm), median of N renders, for the
# book-store chart and the large generated chart. Prints one JSON line per engine/chart.
# Usage: scripts/bench-helm-render.sh [N]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-50}
VENV=$("$ROOT/scripts/setup-helm.sh")
(cd "$ROOT" && cargo build -q --release -p bosun-helm --example render_bench >&2)
for chart in examples/helm-bookstore/helm-charts/book-store crates/helm/tests/charts/large; do
  printf '{"engine": "bosun", %s\n' "$("$ROOT/target/release/examples/render_bench" "$ROOT/$chart" "$N" | cut -c2-)"
  printf '{"engine": "helm", "chart": "%s", %s\n' "$chart" \
    "$("$VENV/bin/python" "$ROOT/scripts/helm-oracle.py" bench "$ROOT/$chart" '{}' '{"kube_version": "v1.31.0"}' "$N" | cut -c2-)"
done
