#!/usr/bin/env bash
# deps.sh -- the dependency step shared by `make run` and `make test`.
#
# Checks the Debian packages ditto builds and tests with. As root it installs
# the missing ones with apt-get; otherwise it prints the exact command and
# fails. It also checks for a CUDA toolkit (headers; NVRTC is loaded at run
# time) and says how to point CUDA_HOME at one.
set -u

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
packages=(build-essential pkg-config libncurses-dev liblua5.4-dev libcjson-dev
          libcurl4-openssl-dev libcriterion-dev zlib1g-dev tmux clang python3)
# clang builds the fuzzers (`make fuzz`), tmux drives the TUI tests, python3
# runs the fake LLM server in the tests, zlib reads .mtx.gz matrices.

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: missing packages: ${missing[*]} (and no apt-get here: install them with your package manager)" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: run:  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/ditto-deps.log 2>&1; then
    # A fresh machine often has no package lists yet.
    apt-get update -q >>/tmp/ditto-deps.log 2>&1
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/ditto-deps.log 2>&1; then
      echo "deps: apt-get install failed; the log is /tmp/ditto-deps.log:" >&2
      tail -n 20 /tmp/ditto-deps.log >&2
      exit 1
    fi
  fi
fi

if [ ! -f "$CUDA_HOME/include/cuda.h" ] || [ ! -f "$CUDA_HOME/include/nvrtc.h" ]; then
  echo "deps: no CUDA toolkit at CUDA_HOME=$CUDA_HOME (looked for include/cuda.h and include/nvrtc.h)." >&2
  echo "deps: install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) or point at one:" >&2
  echo "deps:   make CUDA_HOME=/path/to/cuda ...   (the folder that holds include/ and lib64/)" >&2
  exit 1
fi
exit 0
