#!/usr/bin/env bash
# One batched session on a GPU machine: GPU tests, the GGUF quick suite on --nvidia, benchmarks.
#
#   bash tools/gpu_check.sh OUTDIR tests    # pytest (all tests, 16 workers; GPU ones run), GGUF on nvidia
#   bash tools/gpu_check.sh OUTDIR bench    # every benchmark family: JSON/CSV/tables/report/plots under OUTDIR
#
# The repo runs from PYTHONPATH (no install). Logs and results land in OUTDIR.
set -uo pipefail
out=${1:?usage: gpu_check.sh OUTDIR tests|bench [extra args]}
what=${2:-tests}
shift 2 || true
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
rc=0
if [ "$what" = tests ]; then
  workers=$(( $(nproc) > 16 ? 16 : $(nproc) ))
  python3 -m pytest -q -n "$workers" -p no:cacheprovider --deselect test/test_compile_check.py::test_every_kernel_compiles \
      --junitxml="$out/junit.xml" "$@" > "$out/pytest.log" 2>&1 || rc=1
  tail -n 30 "$out/pytest.log"
  python3 -m gguf_cases --suite quick --out build/gguf > "$out/gguf_build.log" 2>&1 || rc=1
  python3 -m infiniop_py.cli build/gguf/quick --nvidia --quiet --json "$out/gguf_nvidia.json" > "$out/gguf_nvidia.log" 2>&1 || rc=1
  tail -n 15 "$out/gguf_nvidia.log"
elif [ "$what" = bench ]; then
  python3 -m infiniop_py.bench run --out "$out" --no-progress "$@" > /dev/null 2>&1 || rc=1
  tail -n 60 "$out"/bench-*.txt 2>/dev/null
fi
exit $rc
