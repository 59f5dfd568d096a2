#!/usr/bin/env bash
# fake-tune-worker.sh -- a stand-in worker for the tuner's tests: it answers
# measure, verify and compile as the real worker does, with made-up timings,
# and names the kernel it "ran" in kernel_key the way a template that clamps
# TN to N would: every TN value of one point of the other parameters is the
# same kernel (as at N=32, where ell-baked-spmm's TN 32..256 all run one
# 32-column tile). With FAKE_TUNE_LOG set, each request's first 300
# characters are appended to that file. With FAKE_TUNE_SLOPE set, a point
# is faster the larger its WARPS and UNROLL (a landscape a local search can
# climb). With FAKE_TUNE_BASELINE_US set, a measure request that does not
# say "baseline":false also answers cuSPARSE CSR_ALG1 at that many us and
# the speedup over it, as the worker's baseline does. With
# FAKE_TUNE_FAST_STRATEGY set to a strategy's name, every variant of the
# template whose manifest names it takes 0.25 us. With
# FAKE_TUNE_COL_BASELINE_US set, a kernel whose contract is column-major
# gets cuSPARSE at that many us instead (cuSPARSE in that layout).
# Scheduling (the pool's tests): FAKE_TUNE_GPU=N reports GPU N
# (FAKE_TUNE_NAME, default FakeGPU) on host "fakehost"; with FAKE_TUNE_LOCKS
# set (a folder), each measure or verify holds that GPU's lock for 50 ms and
# appends "GPU" to FAKE_TUNE_LOCKS/timed, or "OVERLAP GPU" to
# FAKE_TUNE_LOCKS/overlaps when another timing held it (two at once on one
# GPU). FAKE_TUNE_DIE_AT=N: the worker kills itself at its Nth compile;
# FAKE_TUNE_CAPS='"compile"': the hello's capabilities (JSON strings).
# FAKE_TUNE_HANG_ONCE=FILE: the first compile to come while FILE does not
# exist creates it and is never answered (a node gone silent, once).
# With FAKE_TUNE_LOG, each compile also logs "compile arch=ARCH" (the
# request's "arch", empty when none).
# FAKE_TUNE_CC: the GPU's compute capability in the hello (default 9.0).
# FAKE_TUNE_CUBINS=DIR: compile, measure and verify report the cubin they
# "used" as the worker does ("cubins": [{"key", "cached"}]), one per
# variant, cached when any worker sharing DIR compiled it before.
compiles=0
while IFS= read -r line; do
  [ -n "${FAKE_TUNE_LOG:-}" ] && printf "%s\n" "${line:0:300}" >> "$FAKE_TUNE_LOG"
  # The pool writes the request's own fields, then its "id".
  id=$(printf '%s' "$line" | sed -n 's/.*[^\\]"id":\([0-9]*\).*/\1/p')
  req=$(printf '%s' "$line" | sed -n 's/^{"req":"\([a-z_]*\)".*/\1/p')
  # The variant's params: the kernel object's "params" (the source's own
  # copies of the word are escaped, \"params\").
  params=$(printf '%s' "$line" | sed -n 's/.*[^\\]"params":{\([^}]*\)}.*/\1/p')
  key=$(printf '%s' "$params" | sed 's/"TN":[0-9]*//' | cksum | cut -d' ' -f1)
  sum=$(printf '%s' "$params" | cksum | cut -d' ' -f1)
  us="$((1 + sum % 7)).$((sum % 10))"
  if [ -n "${FAKE_TUNE_SLOPE:-}" ]; then
    # A smooth landscape instead: faster with more WARPS and UNROLL.
    w=$(printf '%s' "$params" | sed -n 's/.*"WARPS":\([0-9]*\).*/\1/p')
    u=$(printf '%s' "$params" | sed -n 's/.*"UNROLL":\([0-9]*\).*/\1/p')
    us="$((100 - ${w:-0} - ${u:-0})).0"
  fi
  if [ -n "${FAKE_TUNE_FAST_STRATEGY:-}" ] && [[ "$line" == *'\"strategy\": \"'"${FAKE_TUNE_FAST_STRATEGY}"'\"'* ]]; then
    us="0.25"
  fi
  extra=""
  if [ -n "${FAKE_TUNE_BASELINE_US:-}" ] && [[ "$line" != *'"baseline":false'* ]]; then
    bus="$FAKE_TUNE_BASELINE_US"
    if [ -n "${FAKE_TUNE_COL_BASELINE_US:-}" ] && [[ "$line" == *'\"layout\": \"col\"'* ]]; then
      bus="$FAKE_TUNE_COL_BASELINE_US"
    fi
    sp=$(awk -v b="$bus" -v u="$us" 'BEGIN { printf "%.4f", b / u }')
    extra=",\"baseline\":{\"best\":\"CSR_ALG1\",\"us\":${bus},\"algs\":[{\"name\":\"CSR_ALG1\",\"us\":${bus}}]},\"speedup\":${sp}"
  fi
  if [ -n "${FAKE_TUNE_LOCKS:-}" ] && { [ "$req" = measure ] || [ "$req" = verify ]; }; then
    if mkdir "$FAKE_TUNE_LOCKS/lock$FAKE_TUNE_GPU" 2>/dev/null; then
      echo "${FAKE_TUNE_NAME:-FakeGPU} $FAKE_TUNE_GPU" >> "$FAKE_TUNE_LOCKS/timed"
      sleep 0.05
      rmdir "$FAKE_TUNE_LOCKS/lock$FAKE_TUNE_GPU"
    else
      echo "OVERLAP $FAKE_TUNE_GPU" >> "$FAKE_TUNE_LOCKS/overlaps"
    fi
  fi
  if [ "$req" = compile ]; then
    # Past the first 300 characters: the architecture asked for, on a line of its own.
    [ -n "${FAKE_TUNE_LOG:-}" ] && printf 'compile arch=%s\n' "$(printf '%s' "$line" | sed -n 's/.*[^\\]"arch":"\([a-z_0-9]*\)".*/\1/p')" >> "$FAKE_TUNE_LOG"
    compiles=$((compiles + 1))
    [ "$compiles" = "${FAKE_TUNE_DIE_AT:-0}" ] && kill -9 $$
    if [ -n "${FAKE_TUNE_HANG_ONCE:-}" ] && mkdir "$FAKE_TUNE_HANG_ONCE" 2>/dev/null; then
      sleep 1000
    fi
  fi
  cub=""
  if [ -n "${FAKE_TUNE_CUBINS:-}" ] && { [ "$req" = compile ] || [ "$req" = measure ] || [ "$req" = verify ]; }; then
    if mkdir "$FAKE_TUNE_CUBINS/$sum" 2>/dev/null; then cached=false; else cached=true; fi
    cub=$(printf ',"cubins":[{"key":"%016x","cached":%s}]' "$sum" "$cached")
  fi
  case "$req" in
    hello)
      if [ -n "${FAKE_TUNE_GPU:-}" ]; then
        printf '{"id":%s,"ok":true,"protocol":1,"pid":%s,"host":"fakehost","device":{"present":true,"index":%s,"name":"%s","cc":"%s"},"capabilities":[%s]}\n' "$id" "$$" "$FAKE_TUNE_GPU" "${FAKE_TUNE_NAME:-FakeGPU}" "${FAKE_TUNE_CC:-9.0}" "${FAKE_TUNE_CAPS:-\"compile\",\"measure\",\"verify\"}"
      else
        printf '{"id":%s,"ok":true,"protocol":1,"pid":%s,"device":{"present":false,"reason":"fake"}}\n' "$id" "$$"
      fi ;;
    compile) printf '{"id":%s,"ok":true,"compiled":true,"kernels":[{"name":"k","registers":%s}]%s}\n' "$id" "$((16 + sum % 48))" "$cub" ;;
    measure) printf '{"id":%s,"ok":true,"us":%s,"method":"graph","gbps":1,"gflops":1,"kernel_key":"%s"%s%s}\n' "$id" "$us" "$key" "$extra" "$cub" ;;
    verify) printf '{"id":%s,"ok":true,"passed":true,"checks":[]%s}\n' "$id" "$cub" ;;
    shutdown) printf '{"id":%s,"ok":true}\n' "$id"; exit 0 ;;
    *) printf '{"id":%s,"ok":true}\n' "$id" ;;
  esac
done
