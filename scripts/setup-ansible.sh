#!/usr/bin/env bash
# Real Ansible for bosun: the oracle of the differential tests of crates/ansible, and the engine
# of the fallback (crates/ansible-runner) for roles the native engine does not cover. PyPI's
# ansible 11.13.0 (ansible-core 2.18, kubernetes.core 5.4 — what operator-sdk's
# ansible-operator image runs), ansible-runner 2.4 and the kubernetes client, in a venv cached
# at ~/.cache/bosun/ansible-venv (BOSUN_ANSIBLE_VENV overrides). Galaxy is unreachable, so
# operator_sdk.util is not installed: bosun ships its own stand-in collection for the fallback
# and the tests carry theirs. Prints the venv path.
set -euo pipefail
VENV=${BOSUN_ANSIBLE_VENV:-$HOME/.cache/bosun/ansible-venv}
check() {
  [ -x "$VENV/bin/ansible-playbook" ] && [ -x "$VENV/bin/ansible-runner" ] &&
    "$VENV/bin/python" -c "import kubernetes, yaml, jmespath, ansible_runner, ansible_collections.kubernetes.core" 2>/dev/null
}
if check; then echo "$VENV"; exit 0; fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "ansible==11.13.0" "ansible-runner==2.4.3" "kubernetes==33.1.0" "jmespath" "pyyaml>=6" >&2
check || { echo "ansible venv at $VENV is incomplete" >&2; exit 1; }
echo "$VENV"
