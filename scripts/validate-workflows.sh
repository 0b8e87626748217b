#!/usr/bin/env bash
# Validates the GitHub Actions workflows against the workflow schema (action-validator from
# npm, cached under ~/.cache/bosun/node).
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=${BOSUN_NODE_TOOLS:-$HOME/.cache/bosun/node}
if [ ! -x "$TOOLS/node_modules/.bin/action-validator" ]; then
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund @action-validator/cli@0.6.0 @action-validator/core@0.6.0 >/dev/null)
fi
passed=0; failed=0
for f in .github/workflows/*.yml; do
  if "$TOOLS/node_modules/.bin/action-validator" "$f" >/dev/null; then passed=$((passed+1)); else
    echo "invalid workflow: $f" >&2; "$TOOLS/node_modules/.bin/action-validator" "$f" >&2 || true; failed=$((failed+1)); fi
done
echo "workflows valid: $passed of $((passed+failed))"
[ "$failed" = 0 ]
