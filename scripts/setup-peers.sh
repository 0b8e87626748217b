#!/usr/bin/env bash
# Installs operator-sdk's own operators, bosun's peers in the differential tests
# (crates/bosun/tests/peer_*.rs) and the peer cases of the benchmark (bench/run --only
# helm-peer|ansible-peer), built with the machine's Go from the Go module proxy at the versions
# pinned in scripts/peers/go.mod (one place: its `tool` directives name the main packages, its
# `require` lines the releases, go.sum the contents):
#   helm-operator     github.com/operator-framework/operator-sdk/cmd/helm-operator (what the
#                     quay.io/operator-framework/helm-operator image runs)
#   ansible-operator  github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator
#   operator-sdk      github.com/operator-framework/operator-sdk/cmd/operator-sdk (the CLI)
#   myownshell-controller-runtime
#                     seed 004's MyOwnShell as a small controller-runtime program of the project's
#                     own (scripts/peers/controller-runtime: main.go, and its go.mod pinning
#                     controller-runtime), the coded operators' peer in the benchmarks
#   venv/             ansible-operator's Python side, as its image has it: the Ansible venv of
#                     scripts/setup-ansible.sh (ansible-runner, ansible-core, kubernetes.core)
#                     plus the ansible-runner HTTP event plugin shipped in the pinned
#                     ansible-operator-plugins module, which ansible-operator reads events from
#
# Usage: setup-peers.sh            Prints the directory holding them.
# Idempotent: when everything is in the cache it returns at once.
# BOSUN_PEERS overrides the cache directory (default ~/.cache/bosun/peers/<operator-sdk version>).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pins=$here/peers
log() { printf '[setup-peers] %s\n' "$*" >&2; }

pinned() { sed -n "s|^[[:space:]]*github.com/operator-framework/$1 \(v[^ ]*\).*|\1|p" "$pins/go.mod" | head -n1; }
SDK=$(pinned operator-sdk)
AOP=$(pinned ansible-operator-plugins)
[ -n "$SDK" ] && [ -n "$AOP" ] || { log "scripts/peers/go.mod pins no operator-sdk or ansible-operator-plugins"; exit 2; }

CR=$(sed -n 's|^[[:space:]]*sigs.k8s.io/controller-runtime \(v[^ ]*\).*|\1|p' "$pins/controller-runtime/go.mod" | head -n1)
[ -n "$CR" ] || { log "scripts/peers/controller-runtime/go.mod pins no controller-runtime"; exit 2; }

PEERS=${BOSUN_PEERS:-$HOME/.cache/bosun/peers/$SDK}
BINARIES=(helm-operator ansible-operator operator-sdk)
# The controller-runtime peer is rebuilt when its pin or its source changes.
crstamp() { cat "$pins/controller-runtime/go.mod" "$pins/controller-runtime/go.sum" "$pins/controller-runtime/main.go" | sha256sum | cut -c1-16; }
cr_present() { [ -x "$PEERS/myownshell-controller-runtime" ] && [ "$(cat "$PEERS/myownshell-controller-runtime.stamp" 2>/dev/null)" = "$(crstamp)" ]; }

python_ok() {
  [ -x "$PEERS/venv/bin/ansible-runner" ] &&
    "$PEERS/venv/bin/python" -c "import ansible_runner, ansible_runner_http, requests_unixsocket, kubernetes, ansible_collections.kubernetes.core" 2>/dev/null
}
all_present() {
  for b in "${BINARIES[@]}"; do [ -x "$PEERS/$b" ] || return 1; done
  cr_present && python_ok
}
if all_present; then
  log "operator-sdk $SDK peers cached in $PEERS"
  echo "$PEERS"
  exit 0
fi

cannot() {
  log "cannot build operator-sdk's peers here: $*"
  log "instead, set BOSUN_PEERS to a directory holding official helm-operator, ansible-operator and operator-sdk $SDK binaries"
  exit 3
}

export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
command -v go >/dev/null || cannot "no Go toolchain on PATH (the build needs go 1.26 or newer and the Go module proxy)"
gover=$(go env GOVERSION 2>/dev/null | sed -E 's/^go([0-9]+)\.([0-9]+).*/\1 \2/')
read -r gomajor gominor <<<"${gover:-0 0}"
if [ "$gomajor" -lt 1 ] || { [ "$gomajor" -eq 1 ] && [ "$gominor" -lt 26 ]; }; then
  cannot "Go $(go env GOVERSION) is too old (scripts/peers/go.mod needs go 1.26 or newer)"
fi

work=${BOSUN_BUILD_DIR:-$HOME/.cache/bosun/build}/peers-$SDK
rm -rf "$work"
mkdir -p "$work/out"
cp "$pins/go.mod" "$pins/go.sum" "$work/"
(cd "$work" && timeout 900 go mod download >"$work/download.log" 2>&1) || {
  tail -n 5 "$work/download.log" >&2
  cannot "the Go module proxy ($(go env GOPROXY)) could not be reached or refused a module (above)"
}

mkdir -p "$PEERS"
sdkv=github.com/operator-framework/operator-sdk/internal/version
aopv=github.com/operator-framework/ansible-operator-plugins/internal/version
for b in "${BINARIES[@]}"; do
  [ -x "$PEERS/$b" ] && continue
  case $b in
    ansible-operator) pkg=github.com/operator-framework/ansible-operator-plugins/cmd/$b v=$AOP vpkg=$aopv ;;
    *) pkg=github.com/operator-framework/operator-sdk/cmd/$b v=$SDK vpkg=$sdkv ;;
  esac
  log "building $b $v from Go modules (a few minutes each on 2 cores when nothing is cached)"
  # containers_image_openpgp: the pure-Go signature code of containers/image, as operator-sdk's
  # own Makefile builds (the default needs cgo and gpgme).
  (cd "$work" && go build -trimpath -tags containers_image_openpgp \
    -ldflags "-s -w -X $vpkg.Version=$v -X $vpkg.GitVersion=$v -X $vpkg.ImageVersion=$v" \
    -o "$work/out/$b" "$pkg") >"$work/build-$b.log" 2>&1 || {
    tail -n 40 "$work/build-$b.log" >&2
    log "$b did not build (above)"
    exit 1
  }
  # Each must be a program that runs (a library package built by mistake is an archive).
  "$work/out/$b" version >/dev/null 2>&1 ||
    { log "$b does not run: $(head -c 64 "$work/out/$b" | tr -cd '[:print:]')"; exit 1; }
  install -m 0755 "$work/out/$b" "$PEERS/$b"
done

if ! cr_present; then
  log "building myownshell-controller-runtime (controller-runtime $CR) from Go modules"
  crwork=$work/controller-runtime
  cp -r "$pins/controller-runtime" "$crwork"
  (cd "$crwork" && timeout 900 go build -trimpath -ldflags "-s -w" -o "$work/out/myownshell-controller-runtime" .) \
    >"$work/build-controller-runtime.log" 2>&1 || {
    tail -n 40 "$work/build-controller-runtime.log" >&2
    log "myownshell-controller-runtime did not build (above)"
    exit 1
  }
  "$work/out/myownshell-controller-runtime" --help >/dev/null 2>&1 ||
    { log "myownshell-controller-runtime does not run"; exit 1; }
  install -m 0755 "$work/out/myownshell-controller-runtime" "$PEERS/myownshell-controller-runtime"
  crstamp >"$PEERS/myownshell-controller-runtime.stamp"
fi

if ! python_ok; then
  # A venv of its own layered on the project's Ansible venv (a .pth file), so the peer's extra
  # packages never change what bosun's own Ansible fallback and oracle run with.
  avenv=$("$here/setup-ansible.sh")
  asite=$("$avenv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -rf "$PEERS/venv"
  "$avenv/bin/python" -m venv --without-pip "$PEERS/venv" 2>/dev/null || python3 -m venv --without-pip "$PEERS/venv"
  psite=$("$PEERS/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$asite" >"$psite/bosun-ansible-venv.pth"
  plugin=$(cd "$work" && go list -m -f '{{.Dir}}' github.com/operator-framework/ansible-operator-plugins)/images/ansible-operator/ansible_runner_http
  # The Pipfile of ansible-operator's image pins requests-unixsocket 0.4.1.
  cp -r "$plugin" "$work/ansible_runner_http"
  chmod -R u+w "$work/ansible_runner_http"
  "$avenv/bin/python" -m pip --python "$PEERS/venv/bin/python" install -q \
    "requests-unixsocket==0.4.1" "$work/ansible_runner_http" >&2 ||
    cannot "pip could not install requests-unixsocket 0.4.1 and ansible-operator's event plugin into $PEERS/venv"
  # ansible-operator runs `ansible-runner` and ansible-runner runs `ansible-playbook` from PATH:
  # both must start on the peer venv's Python to see the event plugin.
  for tool in ansible-runner ansible-playbook ansible-galaxy ansible; do
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$PEERS/venv/bin/python" "$avenv/bin/$tool" >"$PEERS/venv/bin/$tool"
    chmod 0755 "$PEERS/venv/bin/$tool"
  done
fi
rm -rf "$work"

all_present || { log "peers incomplete in $PEERS"; exit 1; }
"$PEERS/helm-operator" version >&2
log "operator-sdk peers ready in $PEERS"
echo "$PEERS"
