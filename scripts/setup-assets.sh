#!/usr/bin/env bash
# Installs the binaries of bosun's test control plane into a cache directory, built with the
# machine's Go from upstream Go modules (the Go module proxy), at the versions pinned in
# scripts/assets/:
#   kube-apiserver, kube-controller-manager  k8s.io/kubernetes, its staging modules pinned by
#                                            `replace` to the matching v0.x (assets/kube-<v>/go.mod)
#   etcd                                     the etcd release that Kubernetes version pins
#                                            (assets/etcd-<v>/go.mod)
#   sample-controller (+ its CRD)            client-go's sample-controller at the same version:
#                                            the MyOwnShell benchmark peer (current version only)
#
# Usage: setup-assets.sh [current|floor|vX.Y.Z]    (default: $BOSUN_KUBE_VERSION, else current)
# Prints the directory holding the binaries. Idempotent: when every binary is already in the
# cache it returns at once; the Go module and build caches make a rebuild fast.
# BOSUN_ASSETS overrides the cache directory (default ~/.cache/bosun/assets/<version>).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pins=${BOSUN_ASSET_PINS:-$here/assets}
log() { printf '[setup-assets] %s\n' "$*" >&2; }

# shellcheck source=assets/versions.env
. "$pins/versions.env"
want=${1:-${BOSUN_KUBE_VERSION:-current}}
case "$want" in
  current) KUBE=$KUBE_CURRENT ETCD=$ETCD_CURRENT PEER=1 ;;
  floor) KUBE=$KUBE_FLOOR ETCD=$ETCD_FLOOR PEER= ;;
  "$KUBE_CURRENT") KUBE=$KUBE_CURRENT ETCD=$ETCD_CURRENT PEER=1 ;;
  "$KUBE_FLOOR") KUBE=$KUBE_FLOOR ETCD=$ETCD_FLOOR PEER= ;;
  *)
    log "unknown Kubernetes version '$want': choose current ($KUBE_CURRENT) or floor ($KUBE_FLOOR)"
    exit 2
    ;;
esac

ASSETS=${BOSUN_ASSETS:-$HOME/.cache/bosun/assets/$KUBE}
BINARIES=(etcd kube-apiserver kube-controller-manager)
[ -z "$PEER" ] || BINARIES+=(sample-controller)

all_present() {
  for b in "${BINARIES[@]}"; do [ -x "$ASSETS/$b" ] || return 1; done
  [ -z "$PEER" ] || [ -f "$ASSETS/sample-controller-crd.yaml" ]
}

if all_present; then
  log "Kubernetes $KUBE assets cached in $ASSETS"
  echo "$ASSETS"
  exit 0
fi

absent() {
  local a=()
  for b in "${BINARIES[@]}"; do [ -x "$ASSETS/$b" ] || a+=("$b"); done
  [ -z "$PEER" ] || [ -f "$ASSETS/sample-controller-crd.yaml" ] || a+=(sample-controller-crd.yaml)
  echo "${a[*]}"
}
# Stops before writing anything, naming what is missing and the ways out.
cannot() {
  log "cannot build the test control plane here: $*"
  log "missing in $ASSETS: $(absent)"
  log "instead, set BOSUN_ASSETS to a directory holding official binaries of these names (Kubernetes $KUBE)"
  exit 3
}

# The machine's Go, never a downloaded toolchain (GOTOOLCHAIN=local): Kubernetes' go.mod names
# the oldest Go it builds with.
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
command -v go >/dev/null || cannot "no Go toolchain on PATH (the build needs go 1.26 or newer and the Go module proxy)"
gover=$(go env GOVERSION 2>/dev/null | sed -E 's/^go([0-9]+)\.([0-9]+).*/\1 \2/')
read -r gomajor gominor <<<"${gover:-0 0}"
if [ "$gomajor" -lt 1 ] || { [ "$gomajor" -eq 1 ] && [ "$gominor" -lt 26 ]; }; then
  cannot "Go $(go env GOVERSION) is too old (Kubernetes $KUBE needs go 1.26 or newer)"
fi

work=${BOSUN_BUILD_DIR:-$HOME/.cache/bosun/build}/$KUBE
rm -rf "$work"
mkdir -p "$work"
cp -r "$pins/kube-$KUBE" "$work/kube"
cp -r "$pins/etcd-$ETCD" "$work/etcd"

# Everything comes from the Go module proxy (or the module cache): check it answers before
# building, so a machine without it says so at once instead of failing mid-build.
for m in kube etcd; do
  (cd "$work/$m" && timeout 900 go mod download >"$work/download-$m.log" 2>&1) || {
    tail -n 5 "$work/download-$m.log" >&2
    cannot "the Go module proxy ($(go env GOPROXY)) could not be reached or refused a module (above)"
  }
done

mkdir -p "$ASSETS"
minor=${KUBE#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$KUBE -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
targets=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
[ -z "$PEER" ] || targets+=(k8s.io/sample-controller)
log "building Kubernetes $KUBE (${targets[*]##*/}) from Go modules (10 to 20 minutes on 2 cores when nothing is cached)"
mkdir -p "$work/out"
(cd "$work/kube" && go build -trimpath -ldflags "$ldflags" -o "$work/out/" "${targets[@]}") >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  exit 1
}
log "building etcd $ETCD from Go modules"
etcd_main=$(sed -n 's/^tool //p' "$work/etcd/go.mod")
(cd "$work/etcd" && go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" "$etcd_main") >>"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  exit 1
}
# Each must be a program that runs (a library package built by mistake is an archive).
for b in "${BINARIES[@]}"; do
  case $b in
    sample-controller) "$work/out/$b" --help >/dev/null 2>&1 ;;
    *) "$work/out/$b" --version >/dev/null ;;
  esac || { log "$b does not run: $(head -c 64 "$work/out/$b" | tr -cd '[:print:]')"; exit 1; }
  install -m 0755 "$work/out/$b" "$ASSETS/$b"
done
if [ -n "$PEER" ]; then
  sc=$(cd "$work/kube" && go list -m -f '{{.Dir}}' k8s.io/sample-controller)
  cp "$sc/artifacts/examples/crd-status-subresource.yaml" "$ASSETS/sample-controller-crd.yaml"
  chmod 0644 "$ASSETS/sample-controller-crd.yaml"
fi
rm -rf "$work"

all_present || { log "assets incomplete in $ASSETS: $(absent)"; exit 1; }
"$ASSETS/kube-apiserver" --version >&2
log "assets ready in $ASSETS"
echo "$ASSETS"
