#!/usr/bin/env bash
# The Ansible oracle for the differential tests of crates/ansible: PyPI's ansible 11.13.0
# (ansible-core 2.18, kubernetes.core 5.4 — what operator-sdk's ansible-operator image runs)
# plus the kubernetes client, in a venv cached at ~/.cache/bosun/ansible-venv
# (BOSUN_ANSIBLE_VENV overrides). Galaxy is unreachable, so operator_sdk.util is not installed:
# the tests carry their own stand-in collection. Prints the venv path.
set -euo pipefail
VENV=${BOSUN_ANSIBLE_VENV:-$HOME/.cache/bosun/ansible-venv}
check() {
  [ -x "$VENV/bin/ansible-playbook" ] &&
    "$VENV/bin/python" -c "import kubernetes, yaml, jmespath, ansible_collections.kubernetes.core" 2>/dev/null
}
if check; then echo "$VENV"; exit 0; fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "ansible==11.13.0" "kubernetes==33.1.0" "jmespath" "pyyaml>=6" >&2
check || { echo "ansible venv at $VENV is incomplete" >&2; exit 1; }
echo "$VENV"
