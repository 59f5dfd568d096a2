#!/usr/bin/env python3
"""bench-fmm.py FILE [REPEATS] -- the reference reader of `make bench`: how fast
fast_matrix_market (PyPI: fast_matrix_market, with numpy) reads FILE to COO
arrays on one thread, by the clock and by the CPU time it used. Prints one
line of key=value pairs, as tests/bench/bench_cpu.c does; exits 3 when the
module is not installed."""
import os
import sys
import time

try:
    import fast_matrix_market as fmm
except ImportError:
    print("bench-fmm: fast_matrix_market is not installed "
          "(python3 -m pip install fast_matrix_market numpy)", file=sys.stderr)
    sys.exit(3)

path = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
wall, cpu = [], []
nnz = 0
for _ in range(reps):
    t0, c0 = time.perf_counter(), time.process_time()
    (data, (rows, cols)), shape = fmm.read_coo(path, parallelism=1)
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
    nnz = len(data)
    del data, rows, cols
wall.sort()
cpu.sort()
mb = os.path.getsize(path) / 1e6
print("version=%s nnz=%d best_mbs=%.1f median_mbs=%.1f cpu_best_mbs=%.1f cpu_median_mbs=%.1f"
      % (fmm.__version__, nnz, mb / wall[0], mb / wall[len(wall) // 2], mb / cpu[0],
         mb / cpu[len(cpu) // 2]))
