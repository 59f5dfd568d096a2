#!/usr/bin/env bash
# fake-gpu-worker.sh -- a launcher wrapper that lets `ditto run` go the whole
# way (verify, measure, tune, learn) on a machine without a GPU: the real
# `ditto worker` behind it loads matrices and compiles with NVRTC, and this
# script says a GPU is present (an H200) and answers verify (passed),
# measure (made-up timings, a different kernel_key per parameter point,
# cuSPARSE at 20 us) and metrics (not collected) itself.
#   usage (--launcher): fake-gpu-worker.sh {exe} {device}
#   FAKE_GPU_LOG  a file: one line per request, its name and its kernel's
#                 compile options (the JSON array's inside, "none" without)
#   FAKE_GPU_VERIFY_FAIL  set: every verification fails its one check (a
#                 wrong value in row 7)
exe=$1
dev=${2:-0}
coproc WK { exec "$exe" worker --device "$dev"; }
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*[^\\]"id":\([0-9]*\).*/\1/p')
  req=$(printf '%s' "${line:0:60}" | sed -n 's/^{"req":"\([a-z_]*\)".*/\1/p')
  if [ -n "${FAKE_GPU_LOG:-}" ]; then
    opts=$(printf '%s' "$line" | sed -n 's/.*[^\\]"options":\[\([^]]*\)\].*/\1/p')
    printf '%s %s\n' "$req" "${opts:-none}" >> "$FAKE_GPU_LOG"
  fi
  params=$(printf '%s' "$line" | sed -n 's/.*[^\\]"params":{\([^}]*\)}.*/\1/p')
  sum=$(printf '%s' "$params" | cksum | cut -d' ' -f1)
  us="$((2 + sum % 7)).$((sum % 10))"
  case "$req" in
    verify)
      if [ -n "${FAKE_GPU_VERIFY_FAIL:-}" ]; then
        printf '{"id":%s,"ok":true,"passed":false,"checks_run":1,"checks":[{"name":"agrees with cuSPARSE","passed":false,"detail":"row 7: 3.5 vs 4.0"}]}\n' "$id"
      else
        printf '{"id":%s,"ok":true,"passed":true,"checks_run":1,"checks":[{"name":"fake","passed":true}]}\n' "$id"
      fi
      continue ;;
    measure)
      base=""
      if [[ "$line" != *'"baseline":false'* ]]; then
        sp=$(awk -v u="$us" 'BEGIN { printf "%.4f", 20 / u }')
        base=",\"baseline\":{\"best\":\"CSR_ALG1\",\"us\":20,\"algs\":[{\"name\":\"CSR_ALG1\",\"us\":20}]},\"speedup\":${sp}"
      fi
      printf '{"id":%s,"ok":true,"us":%s,"method":"graph","gbps":100,"gflops":10,"kernel_key":"k%s"%s}\n' "$id" "$us" "$sum" "$base"
      continue ;;
    metrics)
      printf '{"id":%s,"ok":true,"available":false,"reason":"fake GPU"}\n' "$id"
      continue ;;
  esac
  printf '%s\n' "$line" >&"${WK[1]}"
  IFS= read -r reply <&"${WK[0]}" || exit 1
  if [ "$req" = hello ]; then
    reply=$(printf '%s' "$reply" | sed 's/"device":{[^}]*}/"device":{"present":true,"index":0,"name":"NVIDIA H200","cc":"9.0","sms":132,"l2_bytes":62914560,"mem_bytes":150000000000,"smem_per_sm":233472,"smem_per_block":49152,"smem_per_block_optin":232448,"regs_per_sm":65536,"max_threads_per_sm":2048,"max_blocks_per_sm":32,"clock_mhz":1980,"mem_clock_mhz":2619,"bus_width":6144}/')
  fi
  printf '%s\n' "$reply"
  [ "$req" = shutdown ] && exit 0
done
