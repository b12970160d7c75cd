#!/bin/sh
# Regenerates tests/data/cel/*.jsonl from upstream's tests (see ../README.md):
#   1. copies apiextensions-apiserver's pkg/apiserver/schema/cel (with validation_test.go) and
#      apiserver's pkg/cel/library tests from the Go module cache into a scratch module, adds
#      the dumpers beside them and rewrites the calls they intercept (sed, below);
#   2. runs those upstream tests, which write their cases' inputs to JSONL dumps;
#   3. cases.py turns each dumped case into a CRD write, asks the validation oracle, and
#      writes the cases with the oracle's answers.
# Needs go (the module cache holding the v0.36.5 modules validation-oracle/ builds from),
# python3 and the oracle binary (.validation-oracle/bin/validation-oracle).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
v=v0.36.5
mod=$(go env GOMODCACHE)
ext=$mod/k8s.io/apiextensions-apiserver@$v
api=$mod/k8s.io/apiserver@$v
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT

cp "$root/validation-oracle/go.mod" "$root/validation-oracle/go.sum" "$work/"
chmod u+w "$work/go.mod" "$work/go.sum"
sed -i 's#^module .*#module fieldguard.dev/celdump#' "$work/go.mod"
printf 'require (\n\tgithub.com/stretchr/testify v1.11.1\n\tgithub.com/google/go-cmp v0.7.0\n)\n' >>"$work/go.mod"

mkdir "$work/celvalidation" "$work/cellibrary"
cp "$ext/pkg/apiserver/schema/cel/"*.go "$work/celvalidation/"
rm "$work/celvalidation/"*_test.go
cp "$ext/pkg/apiserver/schema/cel/validation_test.go" "$ext/pkg/apiserver/schema/cel/values_test.go" "$work/celvalidation/"
# values_test.go only for its shared fixtures (stringSchema, ...).
cp "$here/dump_validation_test.go" "$work/celvalidation/"
chmod -R u+w "$work/celvalidation"
# Every `<validator>.Validate(` of the tests (before the benchmarks, whose testing.B is `b`).
bench=$(grep -n '^func Benchmark' "$work/celvalidation/validation_test.go" | head -1 | cut -d: -f1)
sed -i "1,${bench}s/\([A-Za-z]*[vV]alidator\)\.Validate(/dumpValidate(t, \1, /" "$work/celvalidation/validation_test.go"

for f in cidr ip quantity semver format; do
	cp "$api/pkg/cel/library/${f}_test.go" "$work/cellibrary/"
done
chmod -R u+w "$work/cellibrary"
printf 'package library\n' >"$work/cellibrary/doc.go"
cp "$here/dump_library_test.go" "$work/cellibrary/"
sed -i 's/^func test\(CIDR\|IP\|Quantity\)(t \*testing.T, expr string, expectResult ref.Val, \([A-Za-z]*\) string, expectCompileErrs \[\]string) {$/&\n\tdumpLibrary(t, expr, expectResult, \2, expectCompileErrs)/' "$work/cellibrary/"*_test.go
sed -i 's/^func testSemver(t \*testing.T, expr string, expectResult ref.Val, expectRuntimeErrPattern string, expectCompileErrs \[\]string, version uint32) {$/&\n\tdumpLibrary(t, expr, expectResult, expectRuntimeErrPattern, expectCompileErrs, version)/' "$work/cellibrary/semver_test.go"
[ "$(grep -c '^	dumpLibrary(' "$work/cellibrary/"*_test.go | awk -F: '{s+=$2} END {print s}')" = 4 ]

cd "$work"
export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOWORK=off
# Upstream's own assertions may fail on a patch level's details; the dumps are what count.
CEL_DUMP=$work/validation.dump go test -count=1 ./celvalidation/ \
	-run '^(TestValidationExpressions|TestValidationExpressionsAtSchemaLevels|TestCELValidationLimit|TestMessageExpression|TestReasonAndFldPath|TestRatcheting|TestOptionalOldSelf|TestOptionalOldSelfCheckForNull|TestOptionalOldSelfIsOptionalType)$' >"$work/validation.log" 2>&1 || tail -20 "$work/validation.log"
CEL_DUMP=$work/library.dump go test -count=1 ./cellibrary/ >"$work/library.log" 2>&1 || tail -20 "$work/library.log"

python3 "$here/cases.py" --oracle "${VALIDATION_ORACLE:-$root/.validation-oracle/bin/validation-oracle}" \
	--module-version "$v" --validation "$work/validation.dump" --library "$work/library.dump" \
	--out "$here/.."
