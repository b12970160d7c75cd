#!/usr/bin/env bash
# Starts etcd, kube-apiserver and kube-controller-manager (built by setup.sh) on loopback and
# prints the kubeconfig's path once the apiserver is ready and the controller manager runs.
#   CONTROLPLANE_OUT   where setup.sh put bin/ (default: .controlplane in the project root)
#   CONTROLPLANE_RUN   run directory: etcd data, PKI, tokens, logs, pid files, kubeconfig
#                      (default: a new temporary directory)
#   CONTROLPLANE_PORT  base port (default: a random free one): etcd client, etcd peer,
#                      kube-apiserver and the controller manager's health port use PORT..PORT+3
#   CONTROLPLANE_APISERVER_ARGS, CONTROLPLANE_KCM_ARGS   appended to each command line (a later
#                      flag wins)
# The apiserver: its own CA and serving certificate, service-account signing keys,
# --authorization-mode=RBAC, the default admission plugins, a token file with these users, each
# a context of the kubeconfig:
#   admin    group system:masters: allowed everything
#   alice    group developers: no rights until a test binds some
#   viewer   group viewers: no rights until a test binds some
# (and the controller manager's own user, system:kube-controller-manager, which RBAC's bootstrap
# policy knows). The controller manager runs the garbage collector, deployment, replicaset,
# statefulset, daemonset, job, cronjob, namespace and serviceaccount controllers, each as its
# own service account (as kubeadm sets it up). There is no kubelet and no scheduler: nothing
# runs a Pod. Stop with stop.sh CONTROLPLANE_RUN. Only loopback addresses are used.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${CONTROLPLANE_OUT:-$HERE/../.controlplane}; OUT=$(cd "$OUT" && pwd)
B="$OUT/bin"
for f in etcd kube-apiserver kube-controller-manager; do
  [ -x "$B/$f" ] || { echo "start: $B/$f missing: run controlplane/setup.sh" >&2; exit 1; }
done
R=${CONTROLPLANE_RUN:-$(mktemp -d /tmp/controlplane-run.XXXXXX)}; mkdir -p "$R" && R=$(cd "$R" && pwd)
if [ -z "${CONTROLPLANE_PORT:-}" ]; then
  CONTROLPLANE_PORT=$(python3 -c 'import random,socket
while True:
    p=random.randrange(20000,32000,4); ok=True
    for q in range(p,p+4):
        s=socket.socket()
        try: s.bind(("127.0.0.1",q))
        except OSError: ok=False
        s.close()
    if ok: print(p); break')
fi
P=$CONTROLPLANE_PORT
mkdir -p "$R/pki"
cd "$R/pki"
# The cluster's CA, the apiserver's serving certificate (the names a client inside or outside
# the cluster uses), and the service-account token signing key pair.
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj "/CN=fieldguard-test-ca" 2>/dev/null
cat > serving.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EXT
openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 30 -extfile serving.ext 2>/dev/null
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
# Bearer tokens, fresh for each run: token,user,uid,"groups".
tok() { openssl rand -hex 24; }
ADMIN=$(tok) ALICE=$(tok) VIEWER=$(tok) KCM=$(tok)
umask 077
cat > tokens.csv <<TOK
$ADMIN,admin,uid-admin,"system:masters"
$ALICE,alice,uid-alice,"developers"
$VIEWER,viewer,uid-viewer,"viewers"
$KCM,system:kube-controller-manager,uid-kcm
TOK
cd "$R"
kubeconfig() { # $1 server port, then name=token pairs: one user and context each
  local port=$1; shift
  printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: fieldguard-test\n  cluster:\n'
  printf '    server: "https://127.0.0.1:%s"\n    certificate-authority: "%s"\n' "$port" "$R/pki/ca.crt"
  printf 'users:\n'
  for u in "$@"; do printf -- '- name: %s\n  user: {token: "%s"}\n' "${u%%=*}" "${u#*=}"; done
  printf 'contexts:\n'
  for u in "$@"; do printf -- '- name: %s\n  context: {cluster: fieldguard-test, user: %s, namespace: default}\n' "${u%%=*}" "${u%%=*}"; done
  printf 'current-context: %s\n' "${1%%=*}"
}
kubeconfig $((P+2)) "admin=$ADMIN" "alice=$ALICE" "viewer=$VIEWER" > kubeconfig
kubeconfig $((P+2)) "kube-controller-manager=$KCM" > controller-manager.kubeconfig
umask 022
"$B/etcd" --data-dir "$R/etcd" --listen-client-urls "http://127.0.0.1:$P" --advertise-client-urls "http://127.0.0.1:$P" \
  --listen-peer-urls "http://127.0.0.1:$((P+1))" --initial-advertise-peer-urls "http://127.0.0.1:$((P+1))" \
  --initial-cluster "default=http://127.0.0.1:$((P+1))" --listen-metrics-urls "" \
  --quota-backend-bytes $((4 * 1024 * 1024 * 1024)) > "$R/etcd.log" 2>&1 &
echo $! > "$R/etcd.pid"
"$B/kube-apiserver" --etcd-servers "http://127.0.0.1:$P" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
  --secure-port $((P+2)) --cert-dir "$R/certs" --tls-cert-file "$R/pki/apiserver.crt" --tls-private-key-file "$R/pki/apiserver.key" \
  --client-ca-file "$R/pki/ca.crt" --token-auth-file "$R/pki/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file "$R/pki/sa.pub" \
  --service-account-signing-key-file "$R/pki/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --endpoint-reconciler-type none --enable-priority-and-fairness=false \
  ${CONTROLPLANE_APISERVER_ARGS:-} > "$R/apiserver.log" 2>&1 &
echo $! > "$R/apiserver.pid"
ready() { curl -sf --cacert "$R/pki/ca.crt" -H "Authorization: Bearer $ADMIN" "https://127.0.0.1:$((P+2))$1" >/dev/null 2>&1; }
for _ in $(seq 1 600); do ready /readyz && break; sleep 0.1; done
if ! ready /readyz; then
  echo "start: kube-apiserver did not become ready in 60 s; logs in $R" >&2
  tail -n 20 "$R/apiserver.log" >&2
  exit 1
fi
"$B/kube-controller-manager" --kubeconfig "$R/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$R/controller-manager.kubeconfig" --authorization-kubeconfig "$R/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port $((P+3)) --cert-dir "$R/certs-kcm" --leader-elect=false \
  --use-service-account-credentials --service-account-private-key-file "$R/pki/sa.key" --root-ca-file "$R/pki/ca.crt" \
  --controllers garbage-collector-controller,deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,job-controller,cronjob-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller \
  --concurrent-gc-syncs 5 ${CONTROLPLANE_KCM_ARGS:-} > "$R/controller-manager.log" 2>&1 &
echo $! > "$R/controller-manager.pid"
# The controller manager is up when its serviceaccount controller has made the default
# namespace's service account (Pods cannot be created in a namespace before it exists).
for _ in $(seq 1 600); do ready /api/v1/namespaces/default/serviceaccounts/default && break; sleep 0.1; done
if ! ready /api/v1/namespaces/default/serviceaccounts/default; then
  echo "start: kube-controller-manager did not make the default service account in 60 s; logs in $R" >&2
  tail -n 20 "$R/controller-manager.log" >&2
  exit 1
fi
echo "$R/kubeconfig"
