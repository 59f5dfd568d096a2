#!/usr/bin/env bash
# run-tests.sh -- run Criterion test executables and sum their syntheses.
#
# Each executable runs with --verbose so that every skipped test prints
# "[SKIP] suite::test: reason" (Criterion's synthesis has no skip count, and
# does not count skipped tests as tested); the passing lines are dropped
# here, the failures, skips and sanitizer reports kept. The last line is
# Criterion's synthesis summed over all executables, with the skips:
#   [====] Synthesis: Tested: N | Passing: N | Failing: N | Crashing: N | Skipped: N
# preceded by one "SKIPPED suite::test: reason" line per skipped test.
#
# Exit status: 0 when every test passed and no sanitizer reported anything;
# 1 when a test failed or crashed, an executable printed no synthesis, or a
# sanitizer (LeakSanitizer, AddressSanitizer, UndefinedBehaviorSanitizer)
# reported -- Criterion's workers print a leak report after the test's result
# was already counted as passing, so the report itself is what fails the run;
# RUN_TESTS_NONE_RAN (default 1) when tests were found but none ran (all
# skipped): nothing was tested, which is not a pass; and with REQUIRE_GPU=1
# (`make gpu-test`), 3 when any test skipped for want of a GPU ("no GPU: ..."):
# the GPU was not tested, whatever else passed.
#
# Executables run their tests TEST_JOBS at a time (2), those whose names
# TEST_SERIAL lists one at a time. Unless XDG_CACHE_HOME is set, the tests
# get a cache folder of their own for the run (compiled kernels, tune
# results), removed at the end: the person's ~/.cache is neither read nor
# filled.
set -u
if [ -z "${XDG_CACHE_HOME:-}" ]; then
  XDG_CACHE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/ditto-tests-cache.XXXXXX")
  export XDG_CACHE_HOME
  trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
fi
# The planner's tests pin what the approved rules rank; the shipped selector
# (knowledge/selector/model.json, data refitted as measurements come) is
# off unless a test names its own model. tests/agents/test_selector.c checks
# the shipped model against the CSVs it was fitted from.
export DITTO_SELECTOR=none
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
tested=0; passing=0; failing=0; crashing=0; skipped=0; sanitized=0; status=0
skips=()
sanitizer_re='ERROR: (LeakSanitizer|AddressSanitizer)|runtime error: |SUMMARY: UndefinedBehaviorSanitizer'
for exe in "$@"; do
  name=$(basename "$exe")
  echo "== $name"
  jobs=${TEST_JOBS:-2}
  case " ${TEST_SERIAL:-} " in *" $name "*) jobs=1 ;; esac
  out=$("$exe" --jobs="$jobs" --verbose 2>&1)
  rc=$?
  plain=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g')
  printf '%s\n' "$plain" | grep -v -E '^\[(RUN |PASS)\] |^\[====\] (Running|Synthesis)|^\[----\] Criterion v'
  syn=$(printf '%s\n' "$plain" | grep 'Synthesis:' | tail -n 1)
  if [ -z "$syn" ]; then
    echo "run-tests: $name printed no synthesis (exit $rc)"
    crashing=$((crashing + 1)); status=1; continue
  fi
  num() { printf '%s\n' "$syn" | grep -o "$1: [0-9]*" | grep -o '[0-9]*$' || echo 0; }
  n_skip=0
  while IFS= read -r l; do
    [ -n "$l" ] || continue
    skips+=("SKIPPED ${l#\[SKIP\] }  ($name)")
    n_skip=$((n_skip + 1))
  done < <(printf '%s\n' "$plain" | grep '^\[SKIP\] ')
  n_san=$(printf '%s\n' "$plain" | grep -c -E "$sanitizer_re")
  # Criterion 2.4's runner process (not a test) leaks 48 bytes now and then:
  # a leak report with frames in libcriterion and none outside it and the
  # sanitizer runtime is that, and is named but not counted.
  n_crit=$(printf '%s\n' "$plain" | awk '
    /ERROR: LeakSanitizer/ { inrep = 1; ours = 0; crit = 0; next }
    inrep && /^ *#[0-9]+ / && /libcriterion/ { crit = 1 }
    inrep && /^ *#[0-9]+ / && !/libcriterion|libasan|liblsan|asan_malloc|sanitizer_common/ { ours = 1 }
    inrep && /^SUMMARY: / { inrep = 0; if (crit && !ours) n++ }
    END { print n + 0 }')
  if [ "$n_crit" -gt 0 ]; then
    echo "run-tests: $name: $n_crit leak report(s) entirely inside libcriterion (its runner, not a test): not counted"
    n_san=$((n_san - n_crit))
  fi
  echo "   $name: ${syn#*Synthesis: }| Skipped: $n_skip"
  if [ "$n_san" -gt 0 ]; then
    echo "run-tests: $name: $n_san sanitizer report(s) above: the run fails"
    sanitized=$((sanitized + n_san)); status=1
  fi
  tested=$((tested + $(num Tested)))
  passing=$((passing + $(num Passing)))
  failing=$((failing + $(num Failing)))
  crashing=$((crashing + $(num Crashing)))
  skipped=$((skipped + n_skip))
  # A non-zero exit (LeakSanitizer's 23, or Criterion's 1 when its runner
  # reports that leak) from that runner leak alone, every test passed: not
  # a failure either.
  if [ "$rc" -ne 0 ] && [ "$n_crit" -gt 0 ] && [ "$n_san" -eq 0 ] &&
     [ "$(num Failing)" -eq 0 ] && [ "$(num Crashing)" -eq 0 ] &&
     [ "$(num Tested)" -eq "$(num Passing)" ]; then
    echo "run-tests: $name exited with status $rc for the runner's own leak alone: not counted"
    rc=0
  fi
  if [ "$rc" -ne 0 ]; then
    echo "run-tests: $name exited with status $rc"
    status=1
  fi
done
for s in "${skips[@]+"${skips[@]}"}"; do echo "$s"; done
[ "$sanitized" -gt 0 ] && echo "run-tests: $sanitized sanitizer report(s): FAILED (see above)"
if [ "$tested" -eq 0 ] && [ "$skipped" -gt 0 ] && [ "$status" -eq 0 ]; then
  echo "run-tests: none of the $skipped tests ran (every one was skipped): nothing was tested"
  status=${RUN_TESTS_NONE_RAN:-1}
fi
if [ "${REQUIRE_GPU:-0}" = 1 ] && [ "$status" -eq 0 ]; then
  n_nogpu=$(for s in "${skips[@]+"${skips[@]}"}"; do echo "$s"; done | grep -c ': no GPU')
  if [ "$n_nogpu" -gt 0 ]; then
    echo "run-tests: NO GPU: $n_nogpu of $((tested + skipped)) GPU tests did not run (no GPU here);" \
         "only $tested ran, none of them on a GPU: the GPU is NOT tested"
    status=3
  else
    echo "run-tests: $tested GPU tests ran ($passing passed), $skipped skipped"
  fi
fi
line="[====] Synthesis: Tested: $tested | Passing: $passing | Failing: $failing | Crashing: $crashing | Skipped: $skipped"
[ "$sanitized" -gt 0 ] && line="$line | Sanitizer reports: $sanitized"
echo "$line"
exit "$status"
