#!/usr/bin/env bash
# The main job: set up, build, verify the committed fixtures, generate the production
# fixtures (GPU only), replay every kernel on every fixture, print the verdict table,
# write build/report.md and build/report.json, then benchmark the cases that passed.
# Without a CUDA device it says so and verifies the fixtures and oracles only.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/configure.sh
build=${NUMGATE_BUILD_DIR:-build}

echo "== committed fixtures: are they current? =="
"$build"/tools/numgate-generate --check >"$build"/generate_check.log 2>&1 || {
  cat "$build"/generate_check.log; echo "committed fixtures are stale: see above" >&2; exit 1; }
echo "all committed fixtures current"

have_gpu=1
echo "== production fixtures (build tree) =="
"$build"/tools/numgate-generate --set production --out-dir "$build"/golden_data --require-device || {
  rc=$?; [ $rc -eq 77 ] && have_gpu=0 || exit $rc; }

echo "== replay =="
set +e
"$build"/tests/numgate_replay --fixtures golden_data --fixtures "$build"/golden_data --report-dir "$build" \
  --gtest_output=xml:"$build"/junit/replay.xml --gtest_brief=1
rc=$?
set -e
if [ $rc -eq 77 ]; then
  echo
  echo "NO CUDA DEVICE: target kernels were NOT run. Verified: committed fixtures current, oracles"
  echo "(golden vs reference) conditioning; see $build/report.md. Run on a GPU machine for verdicts."
  exit 0
fi
[ $rc -eq 0 ] || { echo "replay FAILED (exit $rc): see the output above and $build/report.md" >&2; exit $rc; }
[ $have_gpu -eq 1 ] || { echo "a CUDA device answered the replay but not the generator: rerun" >&2; exit 1; }

echo "== benchmark (cases whose numerics passed) =="
"$build"/tools/numgate-bench --report "$build"/report.json
