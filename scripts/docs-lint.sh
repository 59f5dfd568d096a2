#!/usr/bin/env bash
# docs-lint.sh [ROOT] -- what a reviewer of the shipped knowledge base and the
# documents relies on and a schema cannot see: no path into a developer's
# machine or a git-ignored folder (.dev/, /work/, /root/, /home/, /tmp/) in
# knowledge/*.json, knowledge/README.md or docs/*.md; every begin marker that
# `ditto bench` and `make bench` write into docs/PERFORMANCE.md has its end
# marker, once; every document README.md links exists. Prints FILE:LINE: what
# is wrong for each finding and exits 1 if there is one, 0 otherwise.
set -euo pipefail
root=${1:-.}
cd "$root"
fail=0

# Local paths. The bench tables' own command lines name their --out and --csv
# under /root/out or /tmp on the GPU machine; those lines are the record of
# the command, so only .dev/ is refused there.
while IFS= read -r hit; do
    echo "$hit: a local path; name the matrix by its collection name or give a gen:/rep: spec"
    fail=1
done < <({ grep -nE '\.dev/' knowledge/*.json knowledge/README.md docs/*.md 2>/dev/null
           grep -nE '(^|[^A-Za-z0-9_.])(/work/|/root/|/home/|/tmp/)' \
               knowledge/*.json knowledge/README.md docs/*.md 2>/dev/null |
               grep -vE '^docs/PERFORMANCE\.md:[0-9]+: +ditto bench '; } || true)

# Marker pairs in docs/PERFORMANCE.md.
doc=docs/PERFORMANCE.md
if [ -f "$doc" ]; then
    for name in $(grep -oE '<!-- (gpu-bench-[A-Za-z0-9_-]+|cpu-bench):begin' "$doc" |
                  sed -E 's/<!-- (.*):begin/\1/' | sort -u); do
        b=$(grep -c -- "<!-- $name:begin" "$doc" || true)
        e=$(grep -c -- "<!-- $name:end" "$doc" || true)
        if [ "$b" != 1 ] || [ "$e" != 1 ]; then
            echo "$doc: marker $name: $b begin and $e end lines; each section needs exactly one of each"
            fail=1
        fi
    done
    for name in $(grep -oE '<!-- (gpu-bench-[A-Za-z0-9_-]+|cpu-bench):end' "$doc" |
                  sed -E 's/<!-- (.*):end/\1/' | sort -u); do
        if ! grep -q -- "<!-- $name:begin" "$doc"; then
            echo "$doc: marker $name: an end line without its begin line"
            fail=1
        fi
    done
fi

# Links from README.md to documents in the checkout.
if [ -f README.md ]; then
    while IFS=: read -r line target; do
        if [ ! -e "$target" ]; then
            echo "README.md:$line: links $target, which is not in the checkout"
            fail=1
        fi
    done < <(grep -noE '\]\([^)#:]+\)' README.md | sed -E 's/^([0-9]+):\]\((.*)\)$/\1:\2/')
fi

exit $fail
