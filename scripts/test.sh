#!/usr/bin/env bash
# The test suite: formatting, lints, unit and property tests, and the differential tests
# against the reference oracle (all reference cases plus freshly generated random cases),
# then the Dockerfile and Helm chart checks (scripts/chart-check.sh).
#
#   FIELDGUARD_DIFF_CASES   random cases per run (default 10000)
#   FIELDGUARD_DIFF_SEED    seed (default: derived from the clock, printed)
set -euo pipefail
cd "$(dirname "$0")/.."
# Setup (downloads; the Go builds of the oracle, kube-apiserver and kube-controller-manager
# and the real apiserver; Helm 4; validators) runs
# beside the Rust build below, which needs none of it: on a fresh machine each leaves a core idle
# for long stretches (downloads; rustc's single-threaded front end). Its log is kept and printed
# when it ends; a failure stops the suite before any test runs, and leaving early stops setup.
setup_log=$(mktemp)
setsid -w scripts/setup.sh >"$setup_log" 2>&1 &
setup_pid=$!
trap '[ -z "$setup_pid" ] || kill -- -"$setup_pid" 2>/dev/null || kill "$setup_pid" 2>/dev/null || true; rm -f "$setup_log"' EXIT
# Waits for setup and prints its log; a failure ends the suite here.
setup_done() {
  local rc=0
  wait "$setup_pid" || rc=$?
  setup_pid=
  cat "$setup_log" >&2
  if [ "$rc" -ne 0 ]; then
    echo "test.sh: scripts/setup.sh failed (exit $rc); its log is above" >&2
    exit "$rc"
  fi
}
export SSA_ORACLE="$PWD/.oracle/bin/ssa-oracle"
export FIELDGUARD_REQUIRE_ORACLE=1
export FIELDGUARD_REQUIRE_VALIDATORS=1
export FIELDGUARD_REQUIRE_REALAPI=1
export FIELDGUARD_REQUIRE_KUBEAPI=1
export FIELDGUARD_REQUIRE_VALIDATION_ORACLE=1
export FIELDGUARD_SHARED=${FIELDGUARD_SHARED:-$PWD/../shared}
cargo fmt --all -- --check
# Lints in the tests' profile with every feature (the tests' two): the dependencies' proc
# macros and build scripts it compiles (syn, serde_derive, ring's and mimalloc's C) are the ones
# the test build below then reuses, and the debug-only cross-checks are linted too.
cargo clippy --all-targets --all-features --profile checked -- -D warnings
# Setup over already (a failure shows now, not after the build)?
kill -0 "$setup_pid" 2>/dev/null || setup_done
# No backtraces: a failing test's panic message (file, line, what differed) is then the last
# thing it prints, where a CI log's tail shows it, instead of dozens of runtime frames.
export RUST_BACKTRACE=0
# Profile `checked`: optimized (level 1), with the engine's debug-only cross-checks and
# overflow checks on; `generator`: the random cases of the differential tests. Built first,
# while setup may still run; the tests wait for it.
cargo test --profile checked --features generator,fault-injection --no-run
[ -z "$setup_pid" ] || setup_done
cargo test --profile checked --features generator,fault-injection -- --show-output 2>&1 | grep --line-buffered -v '^---- .* stdout ----$' | grep --line-buffered -v '^successes:$'
# The chart check runs the binary the tests built. (`cargo run` with the same profile and
# features would build the library again: without the tests' dev-dependencies, some
# dependencies' features differ.)
FIELDGUARD_BIN="${CARGO_TARGET_DIR:-target}/checked/fieldguard" scripts/chart-check.sh
