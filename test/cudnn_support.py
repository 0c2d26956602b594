"""What the cuDNN tests share (test_cudnn.py, test_cudnn_plans.py)."""

from __future__ import annotations

import pytest

from infiniop_py.cuda import autotune


@pytest.fixture(autouse=True)
def _fresh_autotune():
    """Every test starts and ends with an empty autotune cache (autouse where imported)."""
    autotune.clear()
    yield
    autotune.clear()
