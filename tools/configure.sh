#!/usr/bin/env bash
# Configures and builds numgate into ${NUMGATE_BUILD_DIR:-build}. Extra CMake arguments
# come from NUMGATE_CMAKE_ARGS (e.g. "-DCMAKE_CUDA_ARCHITECTURES=native"). Arguments name
# the targets to build (default: all), e.g. tools/configure.sh numgate-generate.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${NUMGATE_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && generator=()
# shellcheck disable=SC2086
cmake -S . -B "$build" "${generator[@]}" ${NUMGATE_CMAKE_ARGS:-}
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]+"${targets[@]}"}"
