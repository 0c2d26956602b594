"""Every CUDA kernel of every registered operator compiles for sm_90, without a GPU.

Runs ``tools/compile_check.py`` (NVRTC from the nvidia-cuda-nvrtc wheel, else nvcc) in a
subprocess; skips cleanly where neither compiler is installed.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.compile_check import compile_unit, find_backend  # noqa: E402

BACKEND = find_backend()
needs_compiler = pytest.mark.skipif(BACKEND is None, reason="neither NVRTC nor nvcc is available")


@needs_compiler
def test_every_kernel_compiles():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "compile_check.py")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_compiler
def test_a_broken_kernel_is_reported():
    job = {
        "op": "broken",
        "unit": 0,
        "source": "template <class T> __global__ void k(T* p) { p[0] = not_declared; }",
        "names": ["k<float>"],
        "options": ["-std=c++17", "--gpu-architecture=sm_90"],
        "backend": BACKEND[0],
        "tool": BACKEND[1],
    }
    result = compile_unit(job)
    assert not result.ok
    assert "not_declared" in result.log
