#!/bin/sh
# run.sh -- build tests/tui/bench/latency.c against the optimised library
# and run it: input-to-screen latency under an event flood, and the
# 2,000-line diff's cost. Prints numbers; asserts nothing.
#   tests/tui/bench/run.sh            (from the checkout)
set -e
cd "$(dirname "$0")/../../.."
make -s build/rel/libditto.a
PKGS="ncursesw panelw lua5.4 libcjson libcurl"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
${CC:-cc} -std=c11 -O2 -g -Wall -Wextra -I. -D_GNU_SOURCE -I"$CUDA_HOME/include" \
  $(pkg-config --cflags $PKGS) -c tests/tui/bench/latency.c -o build/rel/tui_latency.o
${CXX:-c++} -o build/rel/tui_latency build/rel/tui_latency.o build/rel/libditto.a \
  $(pkg-config --libs $PKGS) -lutil -ldl -lpthread -lm
DITTO_SHARE=${DITTO_SHARE:-$PWD} ./build/rel/tui_latency
