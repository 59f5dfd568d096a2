#!/usr/bin/env bash
# skew-safe-check.sh -- `ditto tune --dry-run --strategies 3` on every matrix of the given
# folders (their *.mtx and dlmc/*.smtx), for every op the bench runs, at original size and
# replicated to HBM size: one TSV line per case naming the strategy safe for skewed rows
# among the candidates (NONE, or ERROR with ditto's message), then a count on stderr. Exit 1
# when any case has none. Each case profiles its matrix anew (about 3 s a case at 32M
# nonzeros): -j N runs N matrices at a time.
#   scripts/skew-safe-check.sh [-j N] [--hbm-nnz 32M] DIR... > out.tsv
set -u
DITTO=${DITTO:-./ditto}
HBM=32M
JOBS=1
while [ $# -gt 0 ]; do
  case "$1" in
    -j) JOBS=$2; shift 2 ;;
    --hbm-nnz) HBM=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-j N] [--hbm-nnz N] DIR..." >&2; exit 2; }

# One matrix (its folder, its path): every op at both sizes, a line each.
one_matrix() {
  local dir=$1 m=$2 tmp size src o op dtype n out cnt safe
  tmp=$(mktemp -d)
  for size in orig hbm; do
    src=$m
    [ "$size" = hbm ] && src="rep:$m:nnz=$HBM"
    for o in "spmv fp32 1" "spmv fp64 1" "spmm fp32 32" "spmm fp32 128" "sddmm fp32 32" \
             "sddmm fp32 128"; do
      read -r op dtype n <<< "$o"
      printf '{"op": "%s", "dtype": "%s", "n": %s, "gpu": "h200", "matrix": "%s"}\n' \
        "$op" "$dtype" "$n" "$src" > "$tmp/spec.json"
      out=$("$DITTO" tune "$tmp/spec.json" --dry-run --strategies 3 --variants 1 2>&1)
      cnt=$(printf '%s\n' "$out" | sed -n '1s/.*: \([0-9]*\) strateg.*/\1/p')
      safe=$(printf '%s\n' "$out" | sed -n 's/^safe for skewed rows: \([^ ]*\) (place \([0-9]*\))$/\1\t\2/p')
      if [ -z "$cnt" ]; then
        # ditto failed: say why rather than count it as a ranking without one
        safe=$(printf 'ERROR\t%s' "$(printf '%s\n' "$out" | head -1)")
      elif [ -z "$safe" ]; then
        safe=$(printf 'NONE\t-')
      fi
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "${m#"$dir"/}" "$size" "$op" "$dtype" "$n" "${cnt:-?}" \
        "$safe"
    done
  done
  rm -rf "$tmp"
}
export -f one_matrix
export DITTO HBM

printf "matrix\tsize\top\tdtype\tn\tstrategies\tskew_safe\tplace\n"
result=$(for dir in "$@"; do
  for m in "$dir"/*.mtx "$dir"/dlmc/*.smtx; do
    [ -e "$m" ] && printf '%s\0%s\0' "$dir" "$m"
  done
done | xargs -0 -n 2 -P "$JOBS" bash -c 'one_matrix "$1" "$2"' _)
[ -n "$result" ] && printf '%s\n' "$result"
cases=$(printf '%s' "$result" | grep -c . || true)
missing=$(printf '%s\n' "$result" | awk -F'\t' '$7 == "NONE" || $7 == "ERROR"' | grep -c . || true)
echo "# $cases cases, $missing without a skew-safe candidate (or failed)" >&2
[ "$missing" -eq 0 ]
