#!/usr/bin/env bash
# bundle-libs.sh BINARY DIR [all] -- copy the shared libraries BINARY needs
# that a stock Ubuntu 24.04 with CUDA does not carry (Lua 5.4 and cJSON) into
# DIR. With "all", copy every library outside glibc (for test executables
# whose framework, Criterion, is not on the GPU machine).
set -eu
bin=$1; dir=$2; mode=${3:-}
mkdir -p "$dir"
ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
  base=$(basename "$lib")
  case "$base" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libresolv.so*) continue ;;
  esac
  if [ "$mode" = all ]; then
    cp -L "$lib" "$dir/$base"
  else
    case "$base" in
      liblua5.4*|libcjson*) cp -L "$lib" "$dir/$base" ;;
    esac
  fi
done
