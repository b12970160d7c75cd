#!/usr/bin/env bash
# Installs what fieldguard's tests need on a fresh Debian machine and builds the reference
# oracle (structured-merge-diff from Debian's packages) into .oracle/. Idempotent.
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

if [ ! -x "$SHARED/oracle/setup.sh" ] && [ ! -f "$SHARED/oracle/setup.sh" ]; then
  echo "setup: the shared oracle is missing at $SHARED/oracle (set FIELDGUARD_SHARED)" >&2
  exit 1
fi

bin="$ORACLE_OUT/bin/ssa-oracle-modern"
newest_src=$(ls -t "$SHARED"/oracle/*.go "$SHARED"/oracle/setup.sh | head -n 1)
if [ -x "$bin" ] && [ "$bin" -nt "$newest_src" ]; then
  echo "setup: oracle up to date ($bin)" >&2
else
  echo "setup: building the reference oracle into $ORACLE_OUT" >&2
  mkdir -p "$ORACLE_OUT"
  SSA_ORACLE_OUT="$ORACLE_OUT" bash "$SHARED/oracle/setup.sh"
fi
"$bin" versions >/dev/null
echo "setup: ok" >&2
