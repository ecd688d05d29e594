#!/usr/bin/env bash
# The main job: set up, build, verify the committed fixtures, then for every op (or only
# those given with --op): generate its production fixtures where they are stale (GPU
# only), replay every kernel on every fixture, write its report, benchmark its passing
# production cases; without --op also gate 3, the training run (gpu.train.gate); print the
# verdict table and the benchmark lines. Without a CUDA device
# it says so and verifies the fixtures and oracles only.
#
#   tools/run.sh                 every op; merged report build/report.md, build/report.json
#   tools/run.sh --op rmsnorm    one op (repeatable): build/reports/rmsnorm/report.md, ...
#
# The steps are the ctest tests gpu.<op>.generate, gpu.<op>.replay, gpu.<op>.bench (label
# <op>) and gpu.report (tests/CMakeLists.txt), so this job and `ctest` run the same commands.
set -euo pipefail
cd "$(dirname "$0")/.."
ops=()
while (($#)); do
  case "$1" in
    --op) [ $# -ge 2 ] || { echo "tools/run.sh: --op needs an op name" >&2; exit 2; }; ops+=("$2"); shift 2 ;;
    --op=*) ops+=("${1#--op=}"); shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "tools/run.sh: unknown argument '$1' (usage: tools/run.sh [--op NAME ...])" >&2; exit 2 ;;
  esac
done
tools/setup.sh
# The main job's programs only (the CPU test binaries are tools/test.sh's business).
tools/configure.sh numgate-generate numgate_replay numgate-bench numgate-report numgate-train
build=${NUMGATE_BUILD_DIR:-build}
log="$build"/Testing/Temporary/LastTest.log
generate_args=()
for op in "${ops[@]+"${ops[@]}"}"; do generate_args+=(--op "$op"); done

echo "== committed fixtures: are they current? =="
"$build"/tools/numgate-generate --check "${generate_args[@]+"${generate_args[@]}"}" >"$build"/generate_check.log 2>&1 || {
  cat "$build"/generate_check.log; echo "committed fixtures are stale (or an --op is unknown): see above" >&2; exit 1; }
echo "all committed fixtures current"

# ctest label regexes, anchored: -L rmsnorm alone would also select offset_rmsnorm and fused_add_rmsnorm.
if ((${#ops[@]})); then
  labels=$(IFS='|'; echo "${ops[*]}")
  selection=(-L "^(${labels})\$")
else
  selection=(-L '^gpu$')
fi
# All ops' stale production fixtures in one generator, so the ops' cases share one pool of
# threads (per op, the largest case's tail would run alone); the gpu.<op>.generate tests
# below then find them current. Without a device it writes nothing (exit 77).
echo "== production fixtures (stale ones) =="
set +e
"$build"/tools/numgate-generate --set production --out-dir "$build"/golden_data --require-device \
  "${generate_args[@]+"${generate_args[@]}"}"
gen=$?
set -e
[ $gen -eq 0 ] || [ $gen -eq 77 ] || { echo "production fixture generation FAILED (exit $gen)" >&2; exit $gen; }
echo "== replay, report, benchmark (ctest ${selection[*]}) =="
set +e
ctest --test-dir "$build" "${selection[@]}" --output-on-failure --output-junit junit/run.xml
rc=$?
set -e

reports=()
if ((${#ops[@]})); then
  for op in "${ops[@]}"; do reports+=("$build/reports/$op/report.md"); done
else
  reports=("$build/report.md")
fi
for r in "${reports[@]}"; do
  [ -f "$r" ] && sed -n '/^## Summary/,/^## Coverage/p' "$r" | sed '$d'
done
# A failure fails the job with or without a device (a broken fixture is visible on the CPU).
[ $rc -eq 0 ] || { echo "FAILED (ctest exit $rc): see the output above, ${reports[*]} and $log" >&2; exit $rc; }
if grep -q "no CUDA device" "${reports[0]}" 2>/dev/null; then
  echo
  echo "NO CUDA DEVICE: target kernels were NOT run. Verified: committed fixtures current, oracles"
  echo "(golden vs reference) conditioning; see ${reports[*]}. Run on a GPU machine for verdicts."
  exit 0
fi
echo "== benchmark (cases whose numerics passed) =="
grep -E '^bench ' "$log" || echo "(no benchmark lines: see $log)"
