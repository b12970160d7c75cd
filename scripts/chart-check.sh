#!/usr/bin/env bash
# Lints the Dockerfile (hadolint) and the Helm chart (helm lint), renders the chart with its
# default values and with every option set (helm-chart/fieldguard/ci/full-values.yaml),
# validates the output against the Kubernetes schemas (kubernetes-validate, strict) and with
# fieldguard itself (the manifests must be appliable), and checks that values.schema.json
# rejects bad values. Tools come from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
helm=.tools/helm
venv=.venv/bin
chart=helm-chart/fieldguard
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$venv/hadolint" Dockerfile
"$helm" lint --strict "$chart"
"$helm" lint --strict "$chart" -f "$chart/ci/full-values.yaml"
"$helm" template fieldguard "$chart" --namespace platform > "$out/default.yaml"
"$helm" template fieldguard "$chart" --namespace platform -f "$chart/ci/full-values.yaml" > "$out/full.yaml"
"$venv/kubernetes-validate" --strict --quiet -k 1.33.0 "$out/default.yaml" "$out/full.yaml"
# fieldguard: FIELDGUARD_BIN when set (scripts/test.sh: the binary the tests built), else a
# release build.
if [ -n "${FIELDGUARD_BIN:-}" ]; then
  fieldguard=("$FIELDGUARD_BIN")
else
  fieldguard=(cargo run --quiet --release --)
fi
for f in default full; do
  "${fieldguard[@]}" check --snapshot examples/cluster \
    --snapshot tests/data/crds/prometheus-operator-ServiceMonitor.yaml --field-manager helm \
    -n platform -o json "$out/$f.yaml" > "$out/$f.json"
done
grep -q "kind: ServiceMonitor" "$out/full.yaml" || { echo "chart-check: no ServiceMonitor rendered" >&2; exit 1; }
printf 'grpcPort: "not a port"\n' > "$out/bad.yaml"
if "$helm" template fieldguard "$chart" -f "$out/bad.yaml" > /dev/null 2>&1; then
  echo "chart-check: values.schema.json accepted a bad value" >&2
  exit 1
fi
echo "chart-check: Dockerfile and chart ok" >&2
