"""Helpers the GPU hardening tests share (test_gpu_hardening*.py).

``IOP_HARDEN_REPORT=path`` appends one JSON line of measurements per measured test.
"""

from __future__ import annotations

import json
import os

import pytest

THREADS = 8


def report(**fields) -> None:
    """Append one JSON line to IOP_HARDEN_REPORT (numbers for the record), if set."""
    path = os.environ.get("IOP_HARDEN_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")


def cupy_or_skip():
    from conftest import gpu_available

    if not gpu_available():
        pytest.skip("needs an NVIDIA GPU with CuPy")
    import cupy

    return cupy
