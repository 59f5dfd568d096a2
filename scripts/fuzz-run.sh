#!/usr/bin/env bash
# fuzz-run.sh -- run ditto's libFuzzer targets (built by `make fuzz`) for a
# set time each, several at once, and print one line per target:
# executions, exit status and the first error line of its log.
#
#   scripts/fuzz-run.sh [--bin DIR] [--seconds N] [--parallel P] [--out DIR] [TARGET...]
#
# --bin: where the fuzz_* executables are (build/fuzz); --seconds: each
# target's -max_total_time (60); --parallel: targets run at the same time
# (1; give the number of free cores for a long run); --out: corpora, crash
# artifacts and logs (build/fuzz). TARGETs: names (fuzz_spec ...), default
# every fuzz_* in --bin. Seeds come from tests/fuzz/corpus/NAME, a
# dictionary from tests/fuzz/NAME.dict. Exit 1 when any target found a
# crash or failed to run; its artifact is in OUT/crash-NAME/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=build/fuzz seconds=60 parallel=1 out=build/fuzz
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz-run: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seconds$parallel" in
  *[!0-9]*) echo "fuzz-run: --seconds and --parallel take whole numbers" >&2; exit 2 ;;
esac
[ "$parallel" -ge 1 ] || parallel=1
if [ ${#targets[@]} -eq 0 ]; then
  for t in "$bin"/fuzz_*; do
    [ -x "$t" ] && [ -f "$t" ] && case "$t" in *.o|*.d) ;; *) targets+=("$(basename "$t")") ;; esac
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz-run: no fuzz_* executable in $bin: run \`make fuzz\` first" >&2
  exit 2
fi
mkdir -p "$out"

one() {
  local n=$1 seeds dict=() rc execs
  mkdir -p "$out/corpus-$n" "$out/crash-$n"
  seeds=$here/tests/fuzz/corpus/${n#fuzz_}
  [ -d "$seeds" ] || seeds=
  [ -f "$here/tests/fuzz/$n.dict" ] && dict=(-dict="$here/tests/fuzz/$n.dict")
  DITTO_SHARE=$here "$bin/$n" -max_total_time="$seconds" -max_len=4096 -timeout=20 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$out/crash-$n/" "${dict[@]}" \
    "$out/corpus-$n" $seeds > "$out/$n.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$n.log")
  echo "fuzz: $n: ${execs:-0} executions in $seconds s, exit $rc" \
    "$(grep -m1 -E '^==[0-9]+== ?ERROR|^SUMMARY|deadly signal' "$out/$n.log")"
  return $rc
}

fail=0 running=0
pids=()
for n in "${targets[@]}"; do
  one "$n" &
  pids+=($!)
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n || fail=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || fail=1
  running=$((running - 1))
done
exit $fail
