#!/usr/bin/env bash
# skew-safe-check.sh -- `ditto tune --dry-run --strategies 3` on every matrix
# of a part of the corpus split (default validate) for the six bench ops, and
# whether the strategies it would tune include one safe for skewed rows.
#
#   scripts/skew-safe-check.sh [DITTO] [MATRICES_DIR...] [--part NAME]
#
# DITTO defaults to ./ditto; folders default to ../shared/matrices and
# ../shared/matrices/train2. Prints one line per case (matrix, op, the
# strategies, * marking the skew-safe ones) and a count; exit 1 when a case
# has none, or the dry run failed.
set -u
ditto=./ditto part=validate dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --part) part=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) if [ -x "$1" ] && [ -f "$1" ]; then ditto=$1; else dirs+=("$1"); fi; shift ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] || dirs=(../shared/matrices ../shared/matrices/train2)
split=$(dirname "$0")/../knowledge/corpus-split.tsv
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cases=0 bad=0
while IFS=$'\t' read -r name p folder; do
  [ "$p" = "$part" ] || continue
  path=
  for d in "${dirs[@]}"; do
    [ "$(basename "$d")" = "$folder" ] && [ -f "$d/$name" ] && path=$d/$name
  done
  if [ -z "$path" ]; then echo "$name: not found in ${dirs[*]}" >&2; bad=$((bad + 1)); continue; fi
  for op in "spmv fp32 1" "spmv fp64 1" "spmm fp32 32" "spmm fp32 128" "sddmm fp32 32" "sddmm fp32 128"; do
    set -- $op
    printf '{"op":"%s","dtype":"%s","n":%s,"matrix":"%s"}' "$1" "$2" "$3" "$path" > "$tmp/s.json"
    cases=$((cases + 1))
    if ! timeout 300 "$ditto" tune "$tmp/s.json" --dry-run --json --strategies 3 > "$tmp/o.json" 2> "$tmp/e"; then
      echo "$name $1-$2-n$3: dry run failed: $(head -c 300 "$tmp/e")"; bad=$((bad + 1)); continue
    fi
    line=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(c["strategy"] + ("*" if c.get("skew_safe") else "") for c in d))' "$tmp/o.json")
    case "$line" in *\**) ;; *) bad=$((bad + 1)); line="$line   <- no skew-safe strategy" ;; esac
    echo "$name $1-$2-n$3: $line"
  done
done < "$split"
echo "skew-safe-check: $cases cases of the '$part' part, $((cases - bad)) with a skew-safe strategy among those tuned"
[ "$bad" -eq 0 ]
