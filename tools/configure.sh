#!/usr/bin/env bash
# Configures and builds numgate into ${NUMGATE_BUILD_DIR:-build}. Extra CMake arguments
# come from NUMGATE_CMAKE_ARGS (e.g. "-DCMAKE_CUDA_ARCHITECTURES=native").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${NUMGATE_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && generator=()
# shellcheck disable=SC2086
cmake -S . -B "$build" "${generator[@]}" ${NUMGATE_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"
