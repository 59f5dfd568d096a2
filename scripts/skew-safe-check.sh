#!/usr/bin/env bash
# skew-safe-check.sh -- `ditto tune --dry-run --strategies 3` on every matrix of the given
# folders (their *.mtx and dlmc/*.smtx), for every op the bench runs, at original size and
# replicated to HBM size: one TSV line per case naming the strategy safe for skewed rows
# among the candidates (NONE, or ERROR with ditto's message), then a count. Exit 1 when any
# case has none. Each case profiles its matrix anew: about 3 s a case at 32M nonzeros.
#   scripts/skew-safe-check.sh [--hbm-nnz 32M] DIR... > out.tsv
set -u
DITTO=${DITTO:-./ditto}
HBM=32M
if [ "${1:-}" = "--hbm-nnz" ]; then HBM=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [--hbm-nnz N] DIR..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ops=("spmv fp32 1" "spmv fp64 1" "spmm fp32 32" "spmm fp32 128" "sddmm fp32 32" "sddmm fp32 128")
cases=0 missing=0
printf "matrix\tsize\top\tdtype\tn\tstrategies\tskew_safe\tplace\n"
for dir in "$@"; do
  for m in "$dir"/*.mtx "$dir"/dlmc/*.smtx; do
    [ -e "$m" ] || continue
    for size in orig hbm; do
      src=$m
      [ $size = hbm ] && src="rep:$m:nnz=$HBM"
      for o in "${ops[@]}"; do
        set -- $o
        printf '{"op": "%s", "dtype": "%s", "n": %s, "gpu": "h200", "matrix": "%s"}\n' \
          "$1" "$2" "$3" "$src" > "$tmp/spec.json"
        out=$("$DITTO" tune "$tmp/spec.json" --dry-run --strategies 3 --variants 1 2>&1)
        n=$(printf '%s\n' "$out" | sed -n '1s/.*: \([0-9]*\) strateg.*/\1/p')
        safe=$(printf '%s\n' "$out" | sed -n 's/^safe for skewed rows: \([^ ]*\) (place \([0-9]*\))$/\1\t\2/p')
        if [ -z "$n" ]; then
          # ditto failed: say why rather than count it as a ranking without one
          safe=$(printf 'ERROR\t%s' "$(printf '%s\n' "$out" | head -1)")
          missing=$((missing + 1))
        elif [ -z "$safe" ]; then
          safe=$(printf 'NONE\t-')
          missing=$((missing + 1))
        fi
        cases=$((cases + 1))
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "${m#"$dir"/}" "$size" "$1" "$2" "$3" "${n:-?}" "$safe"
      done
    done
  done
done
echo "# $cases cases, $missing without a skew-safe candidate" >&2
[ $missing -eq 0 ]
