#!/usr/bin/env bash
# bench.sh BENCH_CPU -- run the CPU benchmarks and write their table into
# docs/PERFORMANCE.md (between the cpu-bench markers; the rest of the file,
# e.g. the GPU tables of `ditto bench`, is kept).
set -euo pipefail
bin=$1
doc=docs/PERFORMANCE.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

echo "bench: writing a Matrix Market file of gen:uniform:rows=1M,nnz=8M (about 270 MB) ..."
"$bin" write gen:uniform:rows=1M,nnz=8M,seed=1 "$tmp/u.mtx" >/dev/null
one_core() { taskset -c 0 "$@" 2>/dev/null || "$@"; }
echo "bench: parsing it 5 times on one core with ditto's reader ..."
p1=$(one_core "$bin" parse "$tmp/u.mtx" 5)
echo "  $p1"
# The references, on the same file in the same run: fast_matrix_market (to
# COO, through its Python binding) when installed, and always the plainest
# fast C reader (strtol/strtod over the file in memory, to CSR).
echo "bench: the same with fast_matrix_market (PyPI) ..."
if pf=$(one_core python3 "$(dirname "$0")/bench-fmm.py" "$tmp/u.mtx" 5); then
  echo "  $pf"
  fmm_row="| fast_matrix_market $(get "$pf" version) (\`read_coo\`, parallelism 1: to COO) | $(get "$pf" best_mbs) (median $(get "$pf" median_mbs)) | $(get "$pf" cpu_best_mbs) (median $(get "$pf" cpu_median_mbs)) |"
else
  echo "  fast_matrix_market is not installed (python3 -m pip install fast_matrix_market numpy): the strtod reader below is the only reference"
  fmm_row="| fast_matrix_market | not installed here: not measured | - |"
fi
echo "bench: the same with a plain strtol/strtod reader ..."
pr=$(one_core "$bin" parse-ref "$tmp/u.mtx" 5)
echo "  $pr"
rm -f "$tmp/u.mtx"
rows=""
for spec in gen:rmat:rows=2M,nnz=32M,seed=1 gen:uniform:rows=2M,nnz=32M,seed=1; do
  echo "bench: generating and profiling $spec ..."
  r=$("$bin" profile "$spec")
  echo "  $r"
  rows="$rows| \`$spec\` | $(get "$r" nnz) | $(get "$r" gen_s) | $(get "$r" profile_s) | $(get "$r" csr_mb) | $(get "$r" peak_mb) | $(get "$r" ratio) |
"
done
fmts=""
fsrc=gen:stencil27:rows=1200000
for f in "sell16 {\"C\":32,\"sigma\":256,\"vec\":2}" "sell16 {\"C\":32,\"sigma\":1,\"vec\":1}" \
         "csr16 {}" "coo {}" "csr {}"; do
  name=${f%% *}; params=${f#* }
  echo "bench: building format $name $params of $fsrc on the host ..."
  r=$("$bin" format "$fsrc" "$name" "$params" fp32)
  echo "  $r"
  fmts="$fmts| $name \`$params\` | $(get "$r" nnz) | $(get "$r" best_s) | $(get "$r" median_s) | $(get "$r" ns_per_nnz) |
"
done
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
section=$(cat <<EOT
<!-- cpu-bench:begin (written by \`make bench\`; do not edit by hand) -->
## CPU: Matrix Market parsing, pattern profiling and device formats

Measured $(date -u +%Y-%m-%d) on $(nproc) × ${cpu:-unknown CPU}, with \`make bench\`
(\`scripts/bench.sh build/rel/bench_cpu\`).

Matrix Market reading, side by side on one file: a $(awk "BEGIN{printf \"%.0f\", $(get "$p1" bytes)/1e6}") MB
coordinate real general file ($(get "$p1" nnz) entries, 17 significant digits a value),
one core, best and median of 5. By the clock, and by the CPU time the reader used
(its MB/s on a core of its own: the clock counts other work on a shared machine).
Target: ditto's reader to CSR at ≥ 300 MB/s of CPU time.

| reader | MB/s by the clock | MB/s of CPU time |
|---|---|---|
| ditto \`sp_mm_read\` (to CSR, every check) | $(get "$p1" best_mbs) (median $(get "$p1" median_mbs)) | $(get "$p1" cpu_best_mbs) (median $(get "$p1" cpu_median_mbs)) |
${fmm_row}
| strtol/strtod over the file in memory (\`bench_cpu parse-ref\`: to CSR, no checks) | $(get "$pr" best_mbs) (median $(get "$pr" median_mbs)) | $(get "$pr" cpu_best_mbs) (median $(get "$pr" cpu_median_mbs)) |

| matrix | nnz | generate (s) | profile (s) | CSR (MB) | peak RSS growth (MB) | peak / CSR |
|---|---|---|---|---|---|---|
${rows}
Targets: profile of 32M nonzeros ≤ 2 s; peak memory ≤ 1.5× the CSR size (peak
RSS growth of the process over its start, generator included, divided by the
host CSR bytes: 64-bit row offsets, 32-bit columns, fp64 values).

Device formats of \`$fsrc\` built on the host in fp32, as the worker
builds them before a kernel runs, less the copy to the GPU (\`bench_cpu format\`,
best and median of 3). \`ditto bench\`'s preprocess column and the tuner's time at
HBM sizes are mostly these. No target: tracked so that a regression shows.

| format and parameters | nnz | best (s) | median (s) | ns per nonzero |
|---|---|---|---|---|
${fmts}<!-- cpu-bench:end -->
EOT
)
mkdir -p docs
if [ -f "$doc" ] && grep -q 'cpu-bench:begin' "$doc"; then
  awk -v s="$section" '
    /cpu-bench:begin/ {print s; skip=1; next}
    /cpu-bench:end/ {skip=0; next}
    !skip {print}' "$doc" > "$tmp/doc" && mv "$tmp/doc" "$doc"
else
  { [ -f "$doc" ] && cat "$doc" || printf '# Performance\n\nEvery number here was measured by the command named beside it.\n\n'; printf '%s\n' "$section"; } > "$tmp/doc"
  mv "$tmp/doc" "$doc"
fi
echo "bench: wrote $doc"
