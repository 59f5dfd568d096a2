#!/usr/bin/env bash
# run-tests.sh -- run Criterion test executables and sum their syntheses.
#
# Each executable prints its own "[====] Synthesis: ..." line; the last line
# of this script is the same line summed over all of them, so `make test`
# ends with Criterion's summary format. Exit status is non-zero if any
# executable failed. Executables run their tests TEST_JOBS at a time (2),
# those whose names TEST_SERIAL lists one at a time.
set -u
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
tested=0; passing=0; failing=0; crashing=0; skipped=0; status=0
for exe in "$@"; do
  name=$(basename "$exe")
  echo "== $name"
  jobs=${TEST_JOBS:-2}
  case " ${TEST_SERIAL:-} " in *" $name "*) jobs=1 ;; esac
  out=$("$exe" --jobs="$jobs" 2>&1)
  rc=$?
  printf '%s\n' "$out" | grep -v '^\[====\] Synthesis'
  syn=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep 'Synthesis:' | tail -n 1)
  if [ -z "$syn" ]; then
    echo "run-tests: $name printed no synthesis (exit $rc)"
    crashing=$((crashing + 1)); status=1; continue
  fi
  echo "   $name: ${syn#*Synthesis: }"
  num() { printf '%s\n' "$syn" | grep -o "$1: [0-9]*" | grep -o '[0-9]*$' || echo 0; }
  tested=$((tested + $(num Tested)))
  passing=$((passing + $(num Passing)))
  failing=$((failing + $(num Failing)))
  crashing=$((crashing + $(num Crashing)))
  skipped=$((skipped + $(num Skipped)))
  [ "$rc" -ne 0 ] && status=1
done
line="[====] Synthesis: Tested: $tested | Passing: $passing | Failing: $failing | Crashing: $crashing"
[ "$skipped" -gt 0 ] && line="$line | Skipped: $skipped"
echo "$line"
exit $status
