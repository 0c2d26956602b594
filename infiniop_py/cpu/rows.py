"""Glue between operator views and the compiled row kernels of :mod:`.kernels`.

A kernel sees 2-D C-contiguous ``(rows, D)`` arrays in their storage dtype (:func:`bits`) and
a row range; :func:`run_rows` hands fixed row ranges to the thread pool. Operands whose layout
does not collapse to that (or dtypes other than f32/f16/bf16) return ``None`` from the helpers,
and the operator takes its NumPy path.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import pool

_BITS = {np.dtype(np.float32): None, np.dtype(np.float16): np.uint16, np.dtype(ml_dtypes.bfloat16): np.int16}

MIN_PART = 1 << 15  # elements per row range, at least
MAX_PARTS = 64


def bits(a: np.ndarray | None):
    """``a`` as the kernels read it: float32 as is, float16 as uint16, bfloat16 as int16 bits
    (None for None or another dtype)."""
    if a is None or a.dtype not in _BITS:
        return None
    v = _BITS[a.dtype]
    return a if v is None else a.view(v)


def rows2d(a: np.ndarray | None, d: int | None = None):
    """A C-contiguous ``(rows, d)`` view of ``a`` (``d``: its last dim by default), or None."""
    if a is None or not a.flags.c_contiguous or a.dtype not in _BITS:
        return None
    if d is None:
        d = a.shape[-1] if a.ndim else 1
    return a.reshape(-1, d) if d else None


def flat(a: np.ndarray | None):
    """A C-contiguous 1-D view of ``a`` in a kernel dtype, or None."""
    if a is None or not a.flags.c_contiguous or a.dtype not in _BITS:
        return None
    return a.reshape(-1)


def missing(*arrays) -> bool:
    """Whether any of the helpers above returned None."""
    return any(a is None for a in arrays)


def f32vec(a: np.ndarray | None, n: int, fill: float = 0.0) -> np.ndarray:
    """A contiguous float32 copy of a small 1-D operand (a weight, a bias); ``fill`` if None."""
    from ..halfconv import to_f32

    if a is None:
        return np.full(n, fill, np.float32)
    return np.ascontiguousarray(to_f32(a)).reshape(-1)


def parts(rows: int, cols: int) -> list[tuple[int, int]]:
    """Row ranges fixed by the shape alone (never by the thread count): about ``MIN_PART``
    elements each or more, at most ``MAX_PARTS``."""
    n = max(1, min(rows, MAX_PARTS, rows * cols // MIN_PART))
    return pool.bounds(rows, n)


def run_rows(fn, ranges: list[tuple[int, int]]) -> None:
    """``fn(index, r0, r1)`` for every range, the ranges shared out over the pool in contiguous runs."""
    if not ranges:
        return
    workers = min(pool.THREADS, len(ranges)) if pool.parallel() else 1
    runs = pool.bounds(len(ranges), workers)

    def run(first, last):
        for k in range(first, last):
            fn(k, *ranges[k])

    pool.run_all(run, runs)
