#!/usr/bin/env bash
# Side-by-side speed of fieldguard and the Go reference oracle on the same cases.
#
#   scripts/bench-vs-oracle.sh [N] [SEED] [ROUNDS]
#
# Generates N random cases (the differential tests' generator: Deployments, Services,
# ConfigMaps, a CRD; applies and updates by several managers, with and without force), then
# times both programs on N cases and on the same cases repeated (the oracle 3N, fieldguard
# K*N, so that both long runs last seconds), each ROUNDS times, interleaved. The per-case time
# is (t(long) - t(N)) / (extra cases): process start, schema loading and other one-off work
# cancel out. Reported, by wall time and by CPU time (user + system of every thread): the
# median per-case time of each program, the ratio of the medians, and the spread of the ratio
# round by round (each round times both programs back to back).
#
#   FIELDGUARD_BENCH_REPEAT   K, how many times fieldguard's long run repeats the cases
#                             (default 15)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
seed=${2:-42}
rounds=${3:-5}
k=${FIELDGUARD_BENCH_REPEAT:-15}
whole() { # value minimum
    [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 >= $2))
}
if ! whole "$n" 1 || ! whole "$rounds" 1 || ! whole "$k" 2; then
    echo "usage: N >= 1, ROUNDS >= 1, FIELDGUARD_BENCH_REPEAT >= 2 (got N=$n ROUNDS=$rounds K=$k)" >&2
    exit 2
fi
n=$((10#$n)) rounds=$((10#$rounds)) k=$((10#$k))

scripts/setup.sh >/dev/null
oracle=${SSA_ORACLE:-$PWD/.oracle/bin/ssa-oracle}
echo "building fieldguard (profile dist: what ships)..." >&2
cargo build --quiet --profile dist --features generator
ours=$PWD/target/dist/fieldguard

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ours" replay --generate "$n" --seed "$seed" >"$work/one.jsonl"
cat "$work/one.jsonl" "$work/one.jsonl" "$work/one.jsonl" >"$work/three.jsonl"
for ((i = 0; i < k; i++)); do cat "$work/one.jsonl"; done >"$work/many.jsonl"

# Same answers first: a speed comparison of programs that disagree would mean nothing.
"$ours" replay <"$work/one.jsonl" >"$work/ours.out"
"$oracle" <"$work/one.jsonl" >"$work/oracle.out"
agree=$(paste -d '\n' "$work/ours.out" "$work/oracle.out" | awk 'NR%2{a=$0;next} a==$0{s++} END{print s+0}')
echo "cases: $n (seed $seed); byte-identical results: $agree of $n (the rest differ only in error wording; see the differential tests)"

# Wall seconds and CPU seconds (user + system, every thread) of a command reading a file on
# stdin, as "WALL,CPU" (python3: no bc or GNU time needed). The Go runtime collects garbage on
# other threads, so its CPU time exceeds its wall time; fieldguard's replay is one thread.
seconds() { # input command...
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
with open(sys.argv[1], "rb") as f:
    c0, t0 = cpu(), time.perf_counter()
    subprocess.run(sys.argv[2:], stdin=f, stdout=subprocess.DEVNULL, check=True)
    print(f"{time.perf_counter() - t0},{cpu() - c0}")
PY
}

declare -a o1 o3 f1 fk
for ((r = 0; r < rounds; r++)); do
    o1+=("$(seconds "$work/one.jsonl" "$oracle")")
    f1+=("$(seconds "$work/one.jsonl" "$ours" replay)")
    o3+=("$(seconds "$work/three.jsonl" "$oracle")")
    fk+=("$(seconds "$work/many.jsonl" "$ours" replay)")
done

python3 - "$n" "$k" "${o1[*]}" "${o3[*]}" "${f1[*]}" "${fk[*]}" <<'EOF'
import statistics, sys
n, k = int(sys.argv[1]), int(sys.argv[2])
runs = [[tuple(float(x) for x in r.split(",")) for r in a.split()] for a in sys.argv[3:7]]
med = statistics.median

def per_case(short, long, extra, i):
    # Per round: microseconds per case, from the extra cases of the long run (i: 0 wall, 1 CPU).
    return [(b[i] - a[i]) / extra * 1e6 for a, b in zip(short, long)]

o1, o3, f1, fk = runs
for i, what in ((0, "wall"), (1, "CPU")):
    o = per_case(o1, o3, 2 * n, i)
    f = per_case(f1, fk, (k - 1) * n, i)
    print(f"{what} time per case:")
    print(f"  oracle (Go, smd v6.3.3):   {med(o):8.1f} us/case   (rounds {min(o):.1f} to {max(o):.1f}; "
          f"N: {med(r[i] for r in o1):.2f} s, 3N: {med(r[i] for r in o3):.2f} s)")
    print(f"  fieldguard:                {med(f):8.1f} us/case   (rounds {min(f):.1f} to {max(f):.1f}; "
          f"N: {med(r[i] for r in f1):.2f} s, {k}N: {med(r[i] for r in fk):.2f} s)")
    ratios = sorted(a / b for a, b in zip(o, f))
    print(f"  fieldguard is {med(o) / med(f):.1f}x faster per case by {what} time (medians); "
          f"round by round {ratios[0]:.1f}x to {ratios[-1]:.1f}x, median {med(ratios):.1f}x "
          f"({len(ratios)} rounds)")
EOF
