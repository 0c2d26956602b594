"""The core works without PyTorch: ``import infiniop_py``, the CPU backend and ``infiniop-test``
on existing files; ``python -m gguf_cases`` builds the operators whose reference is NumPy and
otherwise stops with one line naming what to install (no traceback).

Each check runs in a subprocess whose ``import torch`` fails (``sys.modules['torch'] = None``).
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = "import sys; sys.modules['torch'] = None\n"


def run_without_torch(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_import_and_cpu_op_without_torch(tmp_path):
    proc = run_without_torch(
        "import numpy as np\n"
        "import infiniop_py as iop\n"
        "a = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
        "assert np.array_equal(iop.ops.add(a, a), 2 * a)\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "print('ok')\n",
        tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_runner_without_torch(tmp_path):
    pytest.importorskip("torch")  # the file is made here, with the float64 torch reference
    from gguf_cases import generator_for

    path = tmp_path / "add.gguf"
    assert generator_for("add").write(path, "quick") > 0
    proc = run_without_torch(f"from infiniop_py.cli import main\nsys.exit(main([{str(path)!r}, '--cpu']))\n", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_gguf_cases_without_torch_one_line(tmp_path):
    out = tmp_path / "gguf"
    proc = run_without_torch(f"from gguf_cases.__main__ import main\nsys.exit(main(['--out', {str(out)!r}]))\n", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "pip install torch" in lines[0] and "download.pytorch.org/whl/cpu" in lines[0], lines[0]
    assert not out.exists() or not any(out.rglob("*.gguf")), "nothing is built when torch is missing"


def test_gguf_cases_numpy_reference_builds_without_torch(tmp_path):
    from infiniop_py.registry import get_spec, list_ops

    numpy_ops = [op for op in list_ops() if get_spec(op).reference_inputs == "numpy"]
    if not numpy_ops:
        pytest.skip("no operator with a NumPy reference")
    out = tmp_path / "gguf"
    proc = run_without_torch(
        f"from gguf_cases.__main__ import main\nsys.exit(main([*{numpy_ops!r}, '--out', {str(out)!r}]))\n", tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = sorted(out.rglob("*.gguf"))
    assert len(files) == len(numpy_ops), files
    proc = run_without_torch(
        f"from infiniop_py.cli import main\nsys.exit(main([*{[str(f) for f in files]!r}, '--cpu']))\n", tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
