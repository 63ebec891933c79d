#!/usr/bin/env bash
# Sets up (idempotent), builds, and runs every test. Tests labelled "cuda" skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR="${VIREO_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 "$@"
