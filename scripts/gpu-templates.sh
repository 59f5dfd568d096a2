#!/usr/bin/env bash
# gpu-templates.sh DITTO MATRIX... -- run `ditto check` (the full verification
# battery, then the measurement next to cuSPARSE) on every template of
# kernels/ with its manifest's default parameters, for its op, on each
# matrix; one summary line per (template, matrix). For a machine with a GPU.
set -u
ditto=$1; shift
printf '%-26s %-28s %-8s %s\n' template matrix verify result
for t in kernels/*.cu; do
  op=$(sed -n 's/.*"op": *"\([a-z]*\)".*/\1/p' "$t" | head -n 1)
  for m in "$@"; do
    out=$("$ditto" check "$t" "$m" --op "$op" --n 32 --deadline 120 2>&1)
    rc=$?
    verdict=$(printf '%s\n' "$out" | sed -n 's/^verify (.*): \([A-Z]*\)$/\1/p')
    sp=$(printf '%s\n' "$out" | sed -n 's/^  speedup *\(.*\)$/\1/p' | head -n 1)
    printf '%-26s %-28.28s %-8s %s\n' "$(basename "$t")" "$(basename "$m")" "${verdict:-rc=$rc}" "${sp:-}"
    if [ "$verdict" != PASSED ] || [ "$rc" -ne 0 ]; then
      printf '%s\n' "$out" | tail -n 8 | sed 's/^/      /'
    fi
  done
done
