#!/usr/bin/env bash
# scaling.sh -- CPU-path tuning throughput against the number of workers:
# `ditto tune --compile-only` (every variant compiled by NVRTC and checked
# by the static rules, nothing timed) with 1, 2, 4 and 8 local workers, each
# run with an empty cache (no cubin reused), REPEAT times. Prints a Markdown
# table: variants per minute (best and median), and the mean worker-side
# compile seconds per variant (what one variant costs a core).
# Usage: tests/cluster/scaling.sh [WORKERS...]   (default 1 2 4 8)
# DITTO_BIN (default ./ditto), REPEAT (default 3), STRATEGIES (4), VARIANTS (12).
# TIMED=1: the GPU path instead (no --compile-only: every variant compiled,
# verified and timed; the workers share the machine's GPUs, timings never
# two at once on one GPU), on MATRIX (default the same generated matrix).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DITTO=${DITTO_BIN:-$SRC/ditto}
REPEAT=${REPEAT:-3}
STRATEGIES=${STRATEGIES:-4}
VARIANTS=${VARIANTS:-12}
T=$(mktemp -d /tmp/ditto-scaling.XXXXXX)
trap 'rm -rf "$T"' EXIT
MATRIX=${MATRIX:-gen:uniform:rows=100000,nnz=1000000,seed=1}
echo "{\"op\": \"spmv\", \"dtype\": \"fp32\", \"matrix\": \"$MATRIX\"}" > "$T/spec.json"
MODE=(--compile-only)
[ "${TIMED:-0}" = 1 ] && MODE=()
[ $# -gt 0 ] || set -- 1 2 4 8
gpu=; [ "${TIMED:-0}" = 1 ] && gpu=" and $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) x $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)$gpu, $(date -u +%H:%M) UTC"
echo
echo "| workers | variants | seconds (best, median) | variants per minute (best, median) | compile s per variant (worker-side mean) | load average before |"
echo "|---|---|---|---|---|---|"
for w in "$@"; do
  secs=()
  for r in $(seq "$REPEAT"); do
    rm -rf "$T/cache"
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    XDG_CACHE_HOME="$T/cache" timeout 900 "$DITTO" tune "$T/spec.json" "${MODE[@]}" --json \
      --workers "$w" --strategies "$STRATEGIES" --variants "$VARIANTS" > "$T/out.json" 2> "$T/err.log" ||
      { echo "ditto tune failed with $w workers:" >&2; tail -5 "$T/err.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    read -r n c lost < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
cs = [v.get("compile_seconds", 0) for s in r["strategies"] for v in s["variants"]]
print(r["variants"], sum(cs) / max(1, len(cs)), r.get("lost", 0))' "$T/out.json")
    [ "$lost" = 0 ] || { echo "$lost variants lost with $w workers" >&2; exit 1; }
    secs+=("$(python3 -c "print($t1 - $t0)") $n $c $load")
  done
  printf '%s\n' "${secs[@]}" | python3 -c '
import sys, statistics
w = sys.argv[1]
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
s = sorted(r[0] for r in rows); n = int(rows[0][1])
best, med = s[0], statistics.median(s)
c = statistics.mean(r[2] for r in rows)
loads = ", ".join("%.2f" % r[3] for r in rows)
cs = f"{c:.2f}" if c > 0 else "-"  # the timed path compiles inside its timing requests: not reported
print(f"| {w} | {n} | {best:.1f}, {med:.1f} | {60*n/best:.0f}, {60*n/med:.0f} | {cs} | {loads} |")' "$w"
done
