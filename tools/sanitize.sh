#!/usr/bin/env bash
# compute-sanitizer over every kernel family: one small case per operator (f32 where it has it),
# run by pytest under memcheck and under racecheck.
#
#   bash tools/sanitize.sh OUTDIR [extra pytest args, e.g. -k softmax]
#
# Runs `pytest -m sanitize test/test_gpu_hardening.py` with IOP_SANITIZE=1 (which also gives every
# CuPy buffer its own cudaMalloc, so memcheck sees each tensor's bounds) under each tool, the two
# tools at the same time (two processes; the cases are small). Writes
# OUTDIR/sanitize_<tool>.log (the full output) and OUTDIR/sanitize_summary.txt (one line per tool:
# the sanitizer's error count, pytest's result, seconds). CUDA API errors are not counted (CuPy
# and torch probe the driver); a failing call fails its test. COMPUTE_SANITIZER names the binary
# (default: compute-sanitizer on PATH, else under CUDA_HOME or /usr/local/cuda).
# Exit status: 0 when both tools report 0 errors and every test passed, 1 otherwise, 2 when
# compute-sanitizer cannot be found.
set -uo pipefail
out=${1:?usage: sanitize.sh OUTDIR [extra pytest args]}
shift
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 IOP_SANITIZE=1

san=${COMPUTE_SANITIZER:-}
if [ -z "$san" ]; then
  san=$(command -v compute-sanitizer || true)
fi
if [ -z "$san" ]; then
  for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
    if [ -n "$dir" ] && [ -x "$dir/bin/compute-sanitizer" ]; then
      san="$dir/bin/compute-sanitizer"
      break
    fi
  done
fi
if [ -z "$san" ]; then
  echo "compute-sanitizer not found (set COMPUTE_SANITIZER)" | tee "$out/sanitize_summary.txt"
  exit 2
fi

summary="$out/sanitize_summary.txt"
: > "$summary"

run_tool() {  # tool -> OUTDIR/sanitize_<tool>.log, and its exit status and seconds in .rc
  local tool=$1 start
  start=$(date +%s)
  "$san" --tool "$tool" --report-api-errors no \
    python3 -m pytest -q -p no:cacheprovider -m sanitize test/test_gpu_hardening.py ${pytest_args[@]+"${pytest_args[@]}"} \
    > "$out/sanitize_$tool.log" 2>&1
  echo "$? $(( $(date +%s) - start ))" > "$out/sanitize_$tool.rc"
}

pytest_args=("$@")
tools=(memcheck racecheck)
for tool in "${tools[@]}"; do  # both at once: each is one process and one small case at a time
  run_tool "$tool" &
done
wait

rc=0
for tool in "${tools[@]}"; do
  log="$out/sanitize_$tool.log"
  read -r prc secs < "$out/sanitize_$tool.rc"
  errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+$')
  if [ -z "$errors" ]; then  # racecheck may only print its own summary
    errors=$(grep -Eo 'RACECHECK SUMMARY: .*\(([0-9]+) errors' "$log" | tail -n 1 | grep -Eo '\(([0-9]+) errors' | grep -Eo '[0-9]+')
  fi
  hazards=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazards' "$log" | tail -n 1 | grep -Eo '[0-9]+')
  tests=$(grep -E '^[0-9]+ (passed|failed|skipped|deselected|errors?)\b.* in [0-9.]+s' "$log" | tail -n 1)
  line="$tool: ${errors:-unknown} errors${hazards:+, $hazards hazards}; pytest exit $prc (${tests:-no summary}); ${secs} s"
  echo "$line" | tee -a "$summary"
  if [ "${errors:-x}" != 0 ] || [ "$prc" != 0 ]; then
    rc=1
  fi
done
exit $rc
