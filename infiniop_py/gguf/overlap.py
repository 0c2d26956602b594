"""Layouts that overlap themselves, and tests that therefore have no right answer (gguf.md §4.4).

A layout (shape, strides) overlaps itself when two logical elements share one memory address.
An output laid out that way cannot hold distinct results, and an input laid out that way cannot
hold stored data that differs at the shared cells: such a test is ILL-DEFINED.

Detection is cheap: the sorted-strides test (``TensorDescriptor.may_self_overlap``) proves most
layouts free of overlap without touching an index; only a layout it cannot clear is checked
exactly, by sorting its element offsets, and only up to :data:`EXACT_LIMIT` elements (beyond that
the answer is "unknown" and the test runs as usual).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..dtypes import DType
from ..tensor import TensorDescriptor

if TYPE_CHECKING:  # pragma: no cover
    from .testcase import ParsedTest

EXACT_LIMIT = 1 << 22  # elements; larger layouts the sorted-strides test cannot clear stay unknown


def _dims(shape, strides, drop_broadcast: bool = False) -> list[tuple[int, int]]:
    """(size, stride) of the dimensions that can make two elements meet (size > 1)."""
    return [(int(d), int(s)) for d, s in zip(shape, strides) if d > 1 and not (drop_broadcast and s == 0)]


def _offsets(dims: list[tuple[int, int]]) -> np.ndarray:
    """Element offsets in C order of the logical elements."""
    off = np.zeros(1, dtype=np.int64)
    for d, s in dims:
        off = (off[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).ravel()
    return off


def _cleared(dims: list[tuple[int, int]]) -> bool:
    """True when the sorted-strides test proves the layout free of overlap."""
    shape = tuple(d for d, _ in dims)
    strides = tuple(s for _, s in dims)
    return not TensorDescriptor(shape, strides, DType.F32).may_self_overlap()


def self_overlaps(shape, strides) -> bool | None:
    """True if two logical elements of the layout share an address, False if none do, None when
    the layout is too large to decide exactly."""
    if any(d == 0 for d in shape):
        return False
    dims = _dims(shape, strides)
    if any(s == 0 for _, s in dims):
        return True
    if _cleared(dims):
        return False
    if math.prod(d for d, _ in dims) > EXACT_LIMIT:
        return None
    off = _offsets(dims)
    return bool(np.unique(off).size != off.size)


def conflicting_cells(data: np.ndarray, shape, strides) -> int | None:
    """How many memory cells of an input's layout hold logical elements whose stored values differ
    (bytewise); 0 for a layout free of overlap or data that agrees; None when too large to check.

    Zero-stride dimensions are left out: the reader broadcasts an input's data along them, so the
    elements that meet there always agree.
    """
    if any(d == 0 for d in shape):
        return 0
    data = np.asarray(data)
    data = data[tuple(0 if (d > 1 and s == 0) else slice(None) for d, s in zip(shape, strides))]
    dims = _dims(shape, strides, drop_broadcast=True)
    if _cleared(dims):
        return 0
    if math.prod(d for d, _ in dims) > EXACT_LIMIT:
        return None
    off = _offsets(dims)
    values = np.ascontiguousarray(data).reshape(-1)
    values = values.view(np.dtype(f"u{values.dtype.itemsize}"))
    order = np.argsort(off, kind="stable")
    off, values = off[order], values[order]
    clash = (off[1:] == off[:-1]) & (values[1:] != values[:-1])
    return int(np.unique(off[1:][clash]).size)


def _layout(t) -> str:
    return f"shape {list(t.shape)}, strides {list(t.strides)}"


def ill_defined(test: ParsedTest) -> str | None:
    """Why ``test`` cannot have one right answer, or None: an output whose layout overlaps itself,
    or an input whose layout overlaps itself while its stored data differs at shared cells."""
    reasons = []
    for name, t in test.tensors.items():
        if t is None:
            continue
        if t.role == "in":
            if t.data is None:
                continue
            n = conflicting_cells(t.data, t.shape, t.strides)
            if n:
                reasons.append(
                    f"input '{name}' ({_layout(t)}) overlaps itself and its stored values differ at {n} shared memory cells"
                )
        elif self_overlaps(t.shape, t.strides):
            reasons.append(f"output '{name}' ({_layout(t)}) overlaps itself: two logical elements share memory")
    return "; ".join(reasons) or None
