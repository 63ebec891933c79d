#!/usr/bin/env bash
# Copies the shared libraries a binary needs that the device machine (Ubuntu 24.04 + CUDA 13)
# lacks into .dev/lib, so `carry: [".dev/lib", "build-x"]` plus LD_LIBRARY_PATH=.dev/lib runs it there.
# Usage: scripts/device_bundle.sh build/vireo [more binaries...]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev/lib
for bin in "$@"; do
  ldd "$bin" | awk '/=>/ {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) continue ;;
      libcuda.so*|libcublas*|libcudart*|libnccl*) continue ;;  # from the device's CUDA
    esac
    cp -Lu "$lib" .dev/lib/
  done
done
# Debian 12's libstdc++ may be newer than Ubuntu 24.04's? (No: 24.04 ships GCC 14's.) Keep ours anyway.
cp -Lu "$(g++ -print-file-name=libstdc++.so.6)" .dev/lib/ 2>/dev/null || true
du -sh .dev/lib
