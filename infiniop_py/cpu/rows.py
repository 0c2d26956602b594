"""Glue between operator views and the compiled row kernels of :mod:`.kernels`.

A kernel sees 2-D C-contiguous ``(rows, D)`` arrays in their storage dtype (:func:`bits`) and
a row range; :func:`run_rows` runs one call per range of :func:`split` on the thread pool
(kernels that add up over rows use the shape-fixed ranges of :func:`parts` inside). Operands
of any other layout are copied (bit for bit) into contiguous arrays first, and outputs written
to contiguous temporaries copied back afterwards (:class:`Outputs`), so an operator gives the
same bits whatever the layouts. Dtypes other than f32/f16/bf16 make the helpers return None and
the operator takes its NumPy path.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import pool

_BITS = {np.dtype(np.float32): None, np.dtype(np.float16): np.uint16, np.dtype(ml_dtypes.bfloat16): np.int16}

MIN_PART = 1 << 15  # elements per row range of parts() (partial weight-gradient rows), at least
# elements per row range of split(), at least: a part handed to another thread costs it a
# wake-up (tens to hundreds of microseconds on a virtual machine's idle core) and both threads
# hand-offs of the GIL, while the row kernels, memory-bound, gain little from a second thread
# on a million elements (a few hundred microseconds of work): below that the calling thread
# alone is as fast or faster (layer_norm, batch_norm, softmax and the row sums on 2^20 elements)
SPLIT_PART = 1 << 20
ONE_PASS_PART = SPLIT_PART  # the row sums' and maxima's bound (the same since split() took it)
MAX_PARTS = 64


def bits(a: np.ndarray | None):
    """``a`` as the kernels read it: float32 as is, float16 as uint16, bfloat16 as int16 bits
    (None for None or another dtype)."""
    if a is None or a.dtype not in _BITS:
        return None
    v = _BITS[a.dtype]
    return a if v is None else a.view(v)


def _supported(a) -> bool:
    return a is not None and a.dtype in _BITS


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` itself if C-contiguous, else a C-contiguous bit copy."""
    if a.flags.c_contiguous:
        return a
    u = np.dtype(f"u{a.dtype.itemsize}")
    return np.ascontiguousarray(a.view(u)).view(a.dtype)


def rows2d(a: np.ndarray | None, d: int | None = None):
    """An input as a C-contiguous ``(rows, d)`` array (``d``: its last dim by default): a view
    when it is C-contiguous, else a copy; None for None or a dtype the kernels do not take."""
    if not _supported(a):
        return None
    if d is None:
        d = a.shape[-1] if a.ndim else 1
    return _contiguous(a).reshape(-1, d) if d else None


def flat(a: np.ndarray | None):
    """An input as a C-contiguous 1-D array (a view or a copy), or None as :func:`rows2d`."""
    return _contiguous(a).reshape(-1) if _supported(a) else None


class Outputs:
    """Outputs of one kernel call: C-contiguous views of the outputs that are, temporaries for
    the others, copied back (bit for bit) by :meth:`done`."""

    def __init__(self):
        self.pending = []

    def _buffer(self, a: np.ndarray) -> np.ndarray:
        if a.flags.c_contiguous:
            return a
        tmp = np.empty(a.shape, a.dtype)
        self.pending.append((a, tmp))
        return tmp

    def rows(self, a: np.ndarray | None, d: int | None = None):
        """Output ``a`` as a C-contiguous ``(rows, d)`` array, or None as :func:`rows2d`."""
        if not _supported(a):
            return None
        if d is None:
            d = a.shape[-1] if a.ndim else 1
        return self._buffer(a).reshape(-1, d) if d else None

    def flat(self, a: np.ndarray | None):
        return self._buffer(a).reshape(-1) if _supported(a) else None

    def full(self, a: np.ndarray | None):
        """Output ``a`` in its own shape, C-contiguous (any dtype)."""
        return None if a is None else self._buffer(a)

    def done(self) -> None:
        for a, tmp in self.pending:
            u = np.dtype(f"u{a.dtype.itemsize}")
            np.copyto(a.view(u), tmp.view(u))
        self.pending = []


def contiguous(a: np.ndarray | None):
    """An input in its own shape, C-contiguous (a view or a copy), or None as :func:`rows2d`."""
    return _contiguous(a) if _supported(a) else None


def missing(*arrays) -> bool:
    """Whether any of the helpers above returned None."""
    return any(a is None for a in arrays)


def f32vec(a: np.ndarray | None, n: int, fill: float = 0.0) -> np.ndarray:
    """A contiguous float32 copy of a small 1-D operand (a weight, a bias); ``fill`` if None."""
    from ..halfconv import to_f32

    if a is None:
        return np.full(n, fill, np.float32)
    return np.ascontiguousarray(to_f32(a)).reshape(-1)


def split(rows: int, cols: int, min_part: int | None = None) -> list[tuple[int, int]]:
    """Row ranges for the pool: a few per thread (:data:`pool.PARTS_PER_THREAD`) of at least
    ``min_part`` elements (:data:`SPLIT_PART` by default), else one. For kernels whose results
    do not depend on the split (each row on its own); a kernel call per range, not per row,
    keeps the call overhead off."""
    if min_part is None:
        min_part = SPLIT_PART
    n = min(pool.PARTS_PER_THREAD * pool.THREADS, rows, rows * cols // min_part) if pool.parallel() else 1
    return pool.bounds(rows, max(1, n))


def parts(rows: int, cols: int) -> np.ndarray:
    """Bounds (P + 1 row indices) of P row ranges fixed by the shape alone (never by the thread
    count): at least ``MIN_PART`` elements each, at most ``MAX_PARTS``. Kernels that add up
    over rows (weight gradients) keep one partial result per range and the ranges are combined
    in order, so the result is the same whatever the threads."""
    n = max(1, min(rows, MAX_PARTS, rows * cols // MIN_PART))
    return np.array([rows * k // n for k in range(n + 1)], np.int64)


def run_rows(fn, ranges: list[tuple[int, int]]) -> None:
    """``fn(index, r0, r1)`` for every range, on the pool (:func:`pool.run_all`)."""
    if len(ranges) == 1:
        fn(0, *ranges[0])
        return
    pool.run_all(fn, [(k, r0, r1) for k, (r0, r1) in enumerate(ranges)])
