#!/usr/bin/env bash
# Side-by-side speed of fieldguard and the Go reference oracle on the same cases.
#
#   scripts/bench-vs-oracle.sh [N] [SEED] [ROUNDS]
#
# Generates N random cases (the differential tests' generator: Deployments, Services,
# ConfigMaps, a CRD; applies and updates by several managers, with and without force), then
# times both programs on N and on 3N cases (the same cases three times), each ROUNDS times,
# interleaved. The per-case time is (t(3N) - t(N)) / 2N: process start, schema loading and
# other one-off work cancel out. Medians of the rounds are reported, with the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
seed=${2:-42}
rounds=${3:-5}

scripts/setup.sh >/dev/null
oracle=${SSA_ORACLE:-$PWD/.oracle/bin/ssa-oracle-modern}
echo "building fieldguard (profile dist: what ships)..." >&2
cargo build --quiet --profile dist --features generator
ours=$PWD/target/dist/fieldguard

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ours" replay --generate "$n" --seed "$seed" >"$work/one.jsonl"
cat "$work/one.jsonl" "$work/one.jsonl" "$work/one.jsonl" >"$work/three.jsonl"

# Same answers first: a speed comparison of programs that disagree would mean nothing.
"$ours" replay <"$work/one.jsonl" >"$work/ours.out"
"$oracle" <"$work/one.jsonl" >"$work/oracle.out"
agree=$(paste -d '\n' "$work/ours.out" "$work/oracle.out" | awk 'NR%2{a=$0;next} a==$0{s++} END{print s+0}')
echo "cases: $n (seed $seed); byte-identical results: $agree of $n (the rest differ only in error wording; see the differential tests)"

# Wall seconds of a command reading a file on stdin (python3: no bc or GNU time needed).
seconds() { # input command...
    python3 - "$@" <<'PY'
import subprocess, sys, time
with open(sys.argv[1], "rb") as f:
    t0 = time.perf_counter()
    subprocess.run(sys.argv[2:], stdin=f, stdout=subprocess.DEVNULL, check=True)
    print(time.perf_counter() - t0)
PY
}

declare -a o1 o3 f1 f3
for ((r = 0; r < rounds; r++)); do
    o1+=("$(seconds "$work/one.jsonl" "$oracle")")
    f1+=("$(seconds "$work/one.jsonl" "$ours" replay)")
    o3+=("$(seconds "$work/three.jsonl" "$oracle")")
    f3+=("$(seconds "$work/three.jsonl" "$ours" replay)")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}'; }
python3 - "$n" "$(median "${o1[@]}")" "$(median "${o3[@]}")" "$(median "${f1[@]}")" "$(median "${f3[@]}")" <<'EOF'
import sys
n = int(sys.argv[1])
o1, o3, f1, f3 = map(float, sys.argv[2:6])
o = (o3 - o1) / (2 * n) * 1e6
f = (f3 - f1) / (2 * n) * 1e6
print(f"oracle (Go, smd v4.6.0):   {o:8.1f} us/case   (N: {o1:.2f} s, 3N: {o3:.2f} s)")
print(f"fieldguard:                {f:8.1f} us/case   (N: {f1:.2f} s, 3N: {f3:.2f} s)")
print(f"fieldguard is {o / f:.1f}x faster per case")
EOF
