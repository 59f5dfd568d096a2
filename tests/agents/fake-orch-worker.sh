#!/usr/bin/env bash
# fake-orch-worker.sh -- a stand-in worker for the orchestrator's state
# machine tests (test_orch.c): it answers each request the pipeline makes
# with an outcome the test scripted, so that every transition can be driven
# on the CPU path. The Nth request of a kind takes the Nth word of its list;
# past the list, the request succeeds.
#   FAKE_ORCH_REPORT   file holding the PatternReport JSON (one line) that
#                      load_matrix answers
#   FAKE_ORCH_LOAD     load_matrix: ok | err (a matrix that cannot be read)
#   FAKE_ORCH_COMPILE  compile: ok | err (does not compile: FAKE-SYNTAX at line 3)
#   FAKE_ORCH_VERIFY   verify: ok | fail (a check fails: FAKE-WRONG) | nodev
#                      (no device) | fault (kernel_fault)
#   FAKE_ORCH_MEASURE  measure: a speedup over cuSPARSE (e.g. 0.5) | err
#   FAKE_ORCH_NOGPU    set: the hello says there is no GPU
#   FAKE_ORCH_LOG      file (required): each request's name is appended to it;
#                      it also counts the requests of each kind, so that a
#                      worker restarted after a kernel_fault goes on with the
#                      list where the one before stopped
read -ra load_plan <<< "${FAKE_ORCH_LOAD:-}"
read -ra compile_plan <<< "${FAKE_ORCH_COMPILE:-}"
read -ra verify_plan <<< "${FAKE_ORCH_VERIFY:-}"
read -ra measure_plan <<< "${FAKE_ORCH_MEASURE:-}"
touch "$FAKE_ORCH_LOG"
while IFS= read -r line; do
  # The pool writes the request's own fields, then its "id".
  id=$(printf '%s' "$line" | sed -n 's/.*[^\\]"id":\([0-9]*\).*/\1/p')
  req=$(printf '%s' "$line" | sed -n 's/^{"req":"\([a-z_]*\)".*/\1/p')
  n=$(grep -cx "$req" "$FAKE_ORCH_LOG")
  printf '%s\n' "$req" >> "$FAKE_ORCH_LOG"
  # A distinct kernel per parameter point (the tuner folds equal keys).
  params=$(printf '%s' "$line" | sed -n 's/.*[^\\]"params":{\([^}]*\)}.*/\1/p')
  key=$(printf '%s' "$params" | cksum | cut -d' ' -f1)
  case "$req" in
    hello)
      if [ -n "${FAKE_ORCH_NOGPU:-}" ]; then
        printf '{"id":%s,"ok":true,"protocol":1,"pid":%s,"device":{"present":false,"reason":"fake"}}\n' "$id" "$$"
      else
        printf '{"id":%s,"ok":true,"protocol":1,"pid":%s,"host":"fakehost","device":{"present":true,"index":0,"name":"NVIDIA H200","cc":"9.0"},"capabilities":["compile","measure","verify"]}\n' "$id" "$$"
      fi ;;
    load_matrix)
      o=${load_plan[$n]:-ok}
      if [ "$o" = err ]; then
        printf '{"id":%s,"ok":false,"error":"bad_matrix","message":"FAKE-UNREADABLE matrix"}\n' "$id"
      else
        printf '{"id":%s,"ok":true,"fingerprint":"00112233aabbccdd","load_seconds":0.01,"report":%s}\n' "$id" "$(cat "$FAKE_ORCH_REPORT")"
      fi ;;
    compile)
      o=${compile_plan[$n]:-ok}
      if [ "$o" = err ]; then
        printf '{"id":%s,"ok":true,"compiled":false,"log":"","diagnostics":[{"severity":"error","line":3,"message":"FAKE-SYNTAX expected a ;"}]}\n' "$id"
      else
        printf '{"id":%s,"ok":true,"compiled":true,"log":"","diagnostics":[],"kernels":[{"name":"k","registers":32,"smem":0}]}\n' "$id"
      fi ;;
    verify)
      o=${verify_plan[$n]:-ok}
      case "$o" in
        fail) printf '{"id":%s,"ok":true,"passed":false,"checks_run":2,"checks":[{"name":"set 0: every output written","passed":true},{"name":"set 0: matches the fp64 reference","passed":false,"detail":"FAKE-WRONG 17 outputs"}]}\n' "$id" ;;
        nodev) printf '{"id":%s,"ok":false,"error":"no_device","message":"no GPU here"}\n' "$id" ;;
        fault) # as the real worker: answer, then exit (the pool starts another)
          printf '{"id":%s,"ok":false,"error":"kernel_fault","message":"FAKE-FAULT illegal address"}\n' "$id"
          exit 3 ;;
        *) printf '{"id":%s,"ok":true,"passed":true,"checks_run":2,"checks":[{"name":"set 0: every output written","passed":true},{"name":"set 0: matches the fp64 reference","passed":true}]}\n' "$id" ;;
      esac ;;
    measure)
      o=${measure_plan[$n]:-2.0}
      if [ "$o" = err ]; then
        printf '{"id":%s,"ok":false,"error":"launch_failed","message":"FAKE-SLOW the launch was refused"}\n' "$id"
      else
        b=$(awk -v s="$o" 'BEGIN { printf "%.4f", 10 * s }')
        printf '{"id":%s,"ok":true,"us":10,"method":"graph","gbps":100,"gflops":10,"kernel_key":"%s","baseline":{"best":"CSR_ALG1","us":%s,"algs":[{"name":"CSR_ALG1","us":%s}]},"speedup":%s}\n' "$id" "$key" "$b" "$b" "$o"
      fi ;;
    metrics) printf '{"id":%s,"ok":true,"available":false,"reason":"fake"}\n' "$id" ;;
    shutdown) printf '{"id":%s,"ok":true}\n' "$id"; exit 0 ;;
    *) printf '{"id":%s,"ok":true}\n' "$id" ;;
  esac
done
