#!/usr/bin/env bash
# gpu-smoke.sh DITTO MATRICES -- the GPU acceptance runs of the worker, for a
# machine with a GPU: hello, `ditto check` on a correct kernel (twice, to
# compare speedups) and on four broken ones, CUPTI metrics, calibrate, and
# `ditto baseline` over every matrix in MATRICES. Prints everything; exits
# non-zero if a run that must succeed fails or a broken kernel is not caught.
set -u
ditto=$1
mats=$2
status=0
say() { printf '\n=== %s\n' "$*"; }
expect() { # expect STATUS DESCRIPTION -- CMD...
  local want=$1 what=$2; shift 3
  "$@"; local got=$?
  if [ "$got" -ne "$want" ]; then echo "SMOKE FAIL: $what: exit $got, wanted $want"; status=1;
  else echo "smoke ok: $what (exit $got)"; fi
}
say hello
echo '{"id":1,"req":"hello"}' | "$ditto" worker
m=$mats/bcsstk13.mtx
say "check: correct thread-per-row SpMV, run 1"
expect 0 "correct kernel passes" -- "$ditto" check kernels/spmv_csr_thread.cu "$m" --metrics
say "check: run 2 (speedup reproducibility)"
expect 0 "correct kernel passes again" -- "$ditto" check kernels/spmv_csr_thread.cu "$m" --no-edge
say "check: writes half the rows"
expect 1 "half rows caught" -- "$ditto" check tests/gpu/kernels/half_rows.cu "$m" --no-measure
say "check: faults"
expect 1 "fault caught" -- "$ditto" check tests/gpu/kernels/fault.cu "$m" --no-measure
say "check: never ends"
expect 1 "hang caught" -- "$ditto" check tests/gpu/kernels/spin.cu "$m" --no-measure --deadline 10
say "check: replays a cached answer"
expect 1 "cached answer caught" -- "$ditto" check tests/gpu/kernels/cached.cu "$m" --no-measure
say "calibrate"
expect 0 "calibrate" -- "$ditto" calibrate
say "baseline over $mats"
expect 0 "baseline over every matrix" -- "$ditto" baseline "$mats"/*.mtx "$mats"/dlmc/*.smtx
exit $status
