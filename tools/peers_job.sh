#!/usr/bin/env bash
# Issue 12's whole GPU job in one call: the main job (tools/run.sh: build, generation,
# replay of every kernel and the path tests, report, benchmark), the peer script's own CPU
# test, the peers (tools/bench_peers.py: torch.compile, and Liger-Kernel with --liger) and
# the comparison (numgate-bench --peers). Every step runs even when one before it failed;
# the exit status is 1 if any step failed, else 0. A step skipped with exit 77 (no CUDA
# device; for the peer script also no PyTorch) counts as run: read steps.txt. Bad
# arguments are refused at once (exit 2), before anything is built.
#
#   tools/peers_job.sh [--liger PATH/Liger-Kernel] [--logs DIR]
#
# --liger: the repository or its src/; its liger_kernel/ops/__init__.py must be empty.
# Relative paths are taken from where the caller stands. Logs (default: $OUT/logs when OUT
# is set, else $NUMGATE_BUILD_DIR/peers_job): steps.txt (epoch seconds and exit status of
# each step), gpu.txt (nvidia-smi, commit, git status), run.log, report.md, report.json,
# cpu_bench_peers.log, bench_peers.log, peers.json, peers_bench.log; an earlier run's
# logs, report and benchmark files are removed first. Build settings come from the
# environment as for tools/run.sh (NUMGATE_BUILD_DIR, relative to the repository root;
# NUMGATE_CMAKE_ARGS, NUMGATE_OFFLINE_DEBS).
set -uo pipefail
usage="usage: tools/peers_job.sh [--liger PATH] [--logs DIR]"
liger="" logs=""
while (($#)); do
  case "$1" in
    --liger|--logs) [ $# -ge 2 ] || { echo "tools/peers_job.sh: $1 needs a value ($usage)" >&2; exit 2; }
                    opt=$1 val=$2; shift 2 ;;
    --liger=*|--logs=*) opt=${1%%=*} val=${1#*=}; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "tools/peers_job.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
  [ -n "$val" ] || { echo "tools/peers_job.sh: $opt needs a non-empty value ($usage)" >&2; exit 2; }
  case "$val" in /*) ;; *) val=$PWD/$val ;; esac  # relative to where the caller stands
  if [ "$opt" = --liger ]; then liger=$val; else logs=$val; fi
done
cd "$(dirname "$0")/.." || exit 2
# The peer script's own --liger check, before the main job's minutes rather than after them.
if [ -n "$liger" ]; then  # empty values are refused above
  python3 -c 'import sys; sys.path.insert(0, "tools"); import bench_peers; bench_peers.checked_liger_src(sys.argv[1])' \
    "$liger" || exit 2
fi
build=${NUMGATE_BUILD_DIR:-build}
if [ -z "$logs" ]; then
  if [ -n "${OUT:-}" ]; then logs=$OUT/logs; else logs=$build/peers_job; fi
fi
mkdir -p "$logs" || exit 2
# Nothing from an earlier run may pass for this one's: its logs, its report, the per-op
# benchmark files the peer script reads (an op whose replay fails writes none) and the peers file.
(cd "$logs" && rm -f steps.txt gpu.txt run.log report.md report.json cpu_bench_peers.log \
  bench_peers.log peers.json peers_bench.log)
rm -f "$build/report.md" "$build/report.json" "$build/peers.json" "$build"/reports/*/bench.json
failed=0
step() { # step NAME RC
  echo "$(date +%s) $1 rc=$2" >> "$logs/steps.txt"
  case "$2" in 0|77) ;; *) failed=1 ;; esac
}
{ nvidia-smi || true; git log -1 --oneline; git status --short; } > "$logs/gpu.txt" 2>&1
echo "$(date +%s) start" > "$logs/steps.txt"

( time tools/run.sh ) > "$logs/run.log" 2>&1; step run.sh $?
tail -60 "$logs/run.log"
cp "$build/report.md" "$build/report.json" "$logs/" 2>/dev/null

ctest --test-dir "$build" --no-tests=error -R '^cpu\.bench_peers$' > "$logs/cpu_bench_peers.log" 2>&1; step cpu.bench_peers $?
tail -3 "$logs/cpu_bench_peers.log"

peer_args=(--bench "$build"/reports/*/bench.json --out "$build/peers.json")
[ -n "$liger" ] && peer_args+=(--liger "$liger")
( time python3 tools/bench_peers.py "${peer_args[@]}" ) > "$logs/bench_peers.log" 2>&1; step bench_peers $?
tail -5 "$logs/bench_peers.log"
cp "$build/peers.json" "$logs/" 2>/dev/null

if [ -f "$build/peers.json" ]; then
  "$build/tools/numgate-bench" --report "$build/report.json" --peers "$build/peers.json" \
    > "$logs/peers_bench.log" 2>&1; step numgate-bench-peers $?
  grep -E '^(peer|peers:|bench peers|bench outputs|bench copy)' "$logs/peers_bench.log" | tail -90
else
  echo "no $build/peers.json (the peer script did not run: see $logs/bench_peers.log)"; step numgate-bench-peers 77
fi
cat "$logs/steps.txt"
exit $failed
