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
  # Libraries every Ubuntu 24.04 base carries: the system's own copies must
  # win, or two OpenSSLs (say) would meet in one process.
  case "$base" in
    libstdc++.so*|libgcc_s.so*|libz.so*|libcrypto.so*|libssl.so*|libffi.so*|libpcre2-8.so*|\
    libcom_err.so*|libkeyutils.so*|libkrb5*.so*|libk5crypto.so*|libgssapi_krb5.so*|libtinfo.so*|\
    libncursesw.so*|libpanelw.so*|libcurl.so*) continue ;;
  esac
  if [ "$mode" = all ]; then
    cp -L "$lib" "$dir/$base"
  else
    case "$base" in
      liblua5.4*|libcjson*) cp -L "$lib" "$dir/$base" ;;
    esac
  fi
done
