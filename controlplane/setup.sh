#!/usr/bin/env bash
# Builds the real control plane from Go modules (go.mod beside this script):
#   bin/kube-apiserver           k8s.io/kubernetes v1.36.x cmd/kube-apiserver
#   bin/kube-controller-manager  k8s.io/kubernetes v1.36.x cmd/kube-controller-manager
#   bin/etcd                     go.etcd.io/etcd/server/v3 at the version Kubernetes pins
# The binaries are kept per machine in $FIELDGUARD_CACHE/controlplane/KEY (KEY: a hash of this
# script, go.mod, go.sum and etcd/main.go), so a fresh clone on the same machine links nothing
# again; Go's own module and build caches serve a rebuild after a change.
#
#   CONTROLPLANE_OUT   where bin/ goes (default: .controlplane in the project root)
#   FIELDGUARD_CACHE   the machine's cache (default: ${XDG_CACHE_HOME:-~/.cache}/fieldguard)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${CONTROLPLANE_OUT:-$ROOT/.controlplane}
CACHE=${FIELDGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fieldguard}
BINS=(kube-apiserver kube-controller-manager etcd)
if ! command -v go >/dev/null 2>&1; then
  echo "controlplane: go not found (Go >= 1.26 is needed to build kube-apiserver)" >&2
  exit 1
fi
KEY=$(cat "$HERE/setup.sh" "$HERE/go.mod" "$HERE/go.sum" "$HERE/etcd/main.go" | sha256sum | cut -c1-16)
KEPT="$CACHE/controlplane/$KEY"
have() { for b in "${BINS[@]}"; do [ -x "$1/$b" ] || return 1; done; }
if ! have "$KEPT"; then
  # The Kubernetes release the module is (reported at /version, as a release build does).
  KV=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$HERE/go.mod")
  MINOR=$(echo "$KV" | cut -d. -f2)
  VP=k8s.io/component-base/version
  LD="-s -w -X $VP.gitMajor=1 -X $VP.gitMinor=$MINOR -X $VP.gitVersion=$KV -X $VP.gitCommit=module-$KV -X $VP.gitTreeState=clean"
  echo "controlplane: building kube-apiserver, kube-controller-manager ($KV) and etcd from Go modules" >&2
  tmp="$KEPT.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  start=$(date +%s)
  (cd "$HERE" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -ldflags "$LD" -o "$tmp/" \
       k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./etcd)
  rm -rf "$KEPT" && mv "$tmp" "$KEPT"
  echo "controlplane: built in $(( $(date +%s) - start )) s ($(go version | awk '{print $3}'))" >&2
fi
mkdir -p "$OUT/bin"
for b in "${BINS[@]}"; do
  if ! cmp -s "$KEPT/$b" "$OUT/bin/$b"; then
    cp "$KEPT/$b" "$OUT/bin/$b.new" && mv -f "$OUT/bin/$b.new" "$OUT/bin/$b"
  fi
done
have "$OUT/bin" || { echo "controlplane: binaries missing in $OUT/bin" >&2; exit 1; }
echo "controlplane: $("$OUT/bin/kube-apiserver" --version), etcd $("$OUT/bin/etcd" --version | awk 'NR==1 {print $3}') in $OUT/bin" >&2
