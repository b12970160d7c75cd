#!/usr/bin/env bash
# Regenerates examples/cluster/shop.yaml (overwriting it) from the real control plane: starts
# kube-apiserver and kube-controller-manager (controlplane/start.sh; built by controlplane/setup.sh
# into .controlplane/bin) on ports 24100-24103, plays the story of examples/README.md with the real
# tools (Helm 4 and kubectl from .helm4/bin, installed by scripts/setup.sh), exports the objects
# with `kubectl get ... -o yaml --show-managed-fields`, and finally applies examples/release as
# `helm` (server-side, no force, --dry-run=server) to show the server's 409 conflicts.
#
#   bash examples/cluster/generate.sh
#
# Every step waits for the deployment controller to settle, so the same objects come out of every
# run; uids, resourceVersions, cluster IPs and timestamps differ. The run directory (etcd data,
# logs) is removed on success and kept, with its path printed, on failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=examples/cluster/shop.yaml
HELM_BIN=$ROOT/.helm4/bin/helm
KUBECTL_BIN=$ROOT/.helm4/bin/kubectl
for f in "$HELM_BIN" "$KUBECTL_BIN"; do
  [ -x "$f" ] || { echo "generate: $f missing: run scripts/setup.sh" >&2; exit 1; }
done

RUN=$(mktemp -d /tmp/fieldguard-shop.XXXXXX)
cleanup() {
  local rc=$?
  # stop.sh signals by the pid files; wait for the processes to be gone before removing their
  # data.
  local pids
  pids=$(cat "$RUN"/*.pid 2>/dev/null || true)
  bash controlplane/stop.sh "$RUN"
  for p in $pids; do
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  done
  if [ "$rc" = 0 ]; then rm -rf "$RUN"; else echo "generate: failed; logs in $RUN" >&2; fi
}
trap cleanup EXIT

KC=$(CONTROLPLANE_PORT=24100 CONTROLPLANE_RUN="$RUN" bash controlplane/start.sh)
export KUBECONFIG=$KC
# Helm's and kubectl's state (repositories, discovery cache) in the run directory, not in $HOME.
export HELM_CONFIG_HOME=$RUN/helm/config HELM_CACHE_HOME=$RUN/helm/cache HELM_DATA_HOME=$RUN/helm/data
export KUBECACHEDIR=$RUN/kube-cache
unset KUBE_EDITOR HELM_DRIVER HELM_NAMESPACE HELM_KUBECONTEXT
kubectl() { "$KUBECTL_BIN" --context admin "$@"; }
helm() { "$HELM_BIN" --kube-context admin "$@"; }
say() { printf '\n== %s\n' "$*" >&2; }

# Waits until the deployment controller has observed the Deployment's latest generation and its
# status has stopped changing (the replica sets it scales have their Pods, which never run: there
# is no scheduler and no kubelet).
settle() {
  local last="" now gen observed
  for _ in $(seq 1 300); do
    now=$(kubectl get deploy/checkout -n shop -o jsonpath='{.metadata.generation} {.status.observedGeneration} {.metadata.annotations.deployment\.kubernetes\.io/revision} {.status}')
    read -r gen observed _ <<<"$now"
    if [ "$gen" = "$observed" ] && [ "$now" = "$last" ]; then return 0; fi
    last=$now
    sleep 1
  done
  echo "generate: the Deployment did not settle: $now" >&2
  exit 1
}
# $1 jsonpath, $2 the value it must have now.
expect() {
  local got
  got=$(kubectl get "${@:3}" -o jsonpath="$1")
  [ "$got" = "$2" ] || { echo "generate: ${*:3} $1 is '$got', not '$2'" >&2; exit 1; }
}

say "the cert-manager Certificate CRD (examples/cluster/crds)"
kubectl apply --server-side -f examples/cluster/crds/
kubectl wait --for condition=Established --timeout 60s crd/certificates.cert-manager.io

say "the namespace (kubectl-create)"
kubectl create namespace shop

say "helm install checkout 1.4.2 (Apply, field manager helm)"
# The chart's files end in .in here: examples/cluster is the snapshot directory, which fieldguard
# (and the repository's YAML tests) read recursively for .yaml files. Copied as a chart named
# checkout.
CHART=$RUN/chart/checkout
(cd examples/cluster/chart && find . -type f -name '*.in' | sort) | while read -r f; do
  mkdir -p "$CHART/$(dirname "$f")"
  cp "examples/cluster/chart/$f" "$CHART/${f%.in}"
done
helm install checkout "$CHART" -n shop --server-side=true
settle

say "the HPA scales checkout to 5 (Update of /scale, field manager kube-controller-manager)"
# What the HPA controller does: read the Scale, set spec.replicas, PUT it back (with the
# resourceVersion read: optimistic concurrency).
rv=$(kubectl get deploy/checkout -n shop --subresource=scale -o jsonpath='{.metadata.resourceVersion}')
printf '{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"checkout","namespace":"shop","resourceVersion":"%s"},"spec":{"replicas":5}}\n' "$rv" \
  > "$RUN/scale.json"
kubectl replace --raw "/apis/apps/v1/namespaces/shop/deployments/checkout/scale?fieldManager=kube-controller-manager" \
  -f "$RUN/scale.json" >/dev/null
expect '{.spec.replicas}' 5 deploy/checkout -n shop
settle

say "the on-call engineer hot-fixes the image (kubectl edit: kubectl-edit)"
EDITOR="sed -i -e 's|image: registry.example.com/shop/checkout:1.4.2\$|image: registry.example.com/shop/checkout:1.4.2-hotfix1|'" \
  kubectl edit deploy/checkout -n shop
expect '{.spec.template.spec.containers[?(@.name=="app")].image}' registry.example.com/shop/checkout:1.4.2-hotfix1 deploy/checkout -n shop
settle

say "the logging controller injects its sidecar and volume (Update, field manager log-injector)"
# A strategic merge patch; $setElementOrder keeps the sidecar after the app container (without
# it, the server puts a patch's new list items first).
kubectl patch deploy/checkout -n shop --type=strategic --field-manager=log-injector -p '{
  "spec": {"template": {
    "metadata": {"annotations": {"logging.example.com/injected": "true"}},
    "spec": {
      "$setElementOrder/containers": [{"name": "app"}, {"name": "log-shipper"}],
      "containers": [{"name": "log-shipper", "image": "fluent/fluent-bit:2.2.0",
                      "volumeMounts": [{"name": "app-logs", "mountPath": "/var/log/app"}]}],
      "volumes": [{"name": "app-logs", "emptyDir": {}}]}}}}'
expect '{.spec.template.spec.containers[*].name}' "app log-shipper" deploy/checkout -n shop
settle

say "the database password is rotated by hand (kubectl edit: kubectl-edit)"
# base64 of initial-pw-7f3a → base64 of rotated-by-hand-91c2
EDITOR="sed -i -e 's|password: aW5pdGlhbC1wdy03ZjNh\$|password: cm90YXRlZC1ieS1oYW5kLTkxYzI=|'" \
  kubectl edit secret/checkout-db -n shop
expect '{.data.password}' cm90YXRlZC1ieS1oYW5kLTkxYzI= secret/checkout-db -n shop

say "the platform policy tool applies duration and renewBefore (Apply, field manager platform-policy)"
kubectl apply --server-side --field-manager=platform-policy -f - <<'EOF'
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: checkout-tls
  namespace: shop
spec:
  duration: 2160h0m0s
  renewBefore: 360h0m0s
EOF
settle

say "export $OUT"
OBJECTS="namespace/shop deployment/checkout service/checkout horizontalpodautoscaler/checkout secret/checkout-db certificate/checkout-tls"
server=$(kubectl get --raw /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
client=$("$KUBECTL_BIN" version --client | sed -n 's/^Client Version: //p')
helm=$("$HELM_BIN" version --template '{{.Version}}')
{
  cat <<EOF
# Printed by \`kubectl get $OBJECTS -n shop -o yaml --show-managed-fields\`
# (kubectl $client) on $(date -u +%Y-%m-%d), from a real kube-apiserver $server built from
# k8s.io/kubernetes (controlplane/), with its kube-controller-manager running: the
# Deployment's status and revision annotation are its deployment controller's own. There is no
# scheduler and no kubelet, so no Pod runs (the rollout never completes); no HPA controller (the
# HPA's status is as created; the script scaled the Deployment as that controller does) and no
# cert-manager (the Certificate has no status). The history of examples/README.md was played
# with Helm $helm (chart examples/cluster/chart) and kubectl. Helm's release Secrets
# (sh.helm.release.v1.*) are not named, so not included.
# Reproduce (overwrites this file): bash examples/cluster/generate.sh
EOF
  kubectl get $OBJECTS -n shop -o yaml --show-managed-fields
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "generate: wrote $OUT" >&2

say "examples/release applied as helm (server-side, no force, --dry-run=server): the server's answer"
set +e
answer=$(kubectl apply --server-side --field-manager=helm --dry-run=server -n shop -f examples/release/checkout.yaml 2>&1)
rc=$?
set -e
printf '%s\n' "$answer"
[ "$rc" != 0 ] || { echo "generate: the release applied without conflicts: the story is lost" >&2; exit 1; }
for want in 'conflict with "kubectl-edit" using v1: .data.password' \
  'conflicts with "kube-controller-manager" with subresource "scale" using apps/v1:' '- .spec.replicas' \
  'conflicts with "kubectl-edit" using apps/v1:' '- .spec.template.spec.containers[name="app"].image' \
  'conflicts with "log-injector" using apps/v1:' '- .spec.template.spec.containers[name="log-shipper"].image' \
  'conflict with "platform-policy": .spec.duration'; do
  grep -qF -- "$want" <<<"$answer" || { echo "generate: the server's answer lacks: $want" >&2; exit 1; }
done
