#!/usr/bin/env bash
# The test command: set up, build, run every test with ctest (labels cpu and gpu; gpu
# tests are reported as skipped, with the reason, on a machine without a CUDA device).
# JUnit XML: build/junit/ctest.xml (and per-binary GoogleTest XML beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/configure.sh
build=${NUMGATE_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure --output-junit junit/ctest.xml "$@"
