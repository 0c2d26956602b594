"""Shared pieces of the normalization family (ops.md §3): validation and NumPy helpers, and the
NVIDIA framework of the row-wise operators (``RowOp`` declarations built by ``row_factory``;
see rows.py) over the device helpers of norm.cuh.
"""

from __future__ import annotations

import math

from ..spec import Checker
from ..status import Status
from .rows import RowOp, row_factory

__all__ = [
    "RowOp",
    "check_positive",
    "check_rows",
    "check_shape",
    "check_std_shape",
    "row_factory",
]


# -- validation --------------------------------------------------------------------------------
def check_positive(check: Checker, name: str) -> float:
    v = check.attrs[name]
    if not (math.isfinite(v) and v > 0):
        check.fail(Status.BAD_PARAM, f"attribute '{name}' must be finite and > 0, got {v!r}")
    return v


def check_shape(check: Checker, name: str, shape) -> None:
    d = check[name]
    if d is not None and tuple(d.shape) != tuple(shape):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(d.shape)} must be {list(shape)}")


def check_rows(check: Checker, ref: str, *names: str) -> tuple[int, ...]:
    """ref has ndim >= 1 and a non-empty last dim; names share its shape."""
    d = check[ref]
    if d.ndim < 1:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{ref}' must have ndim >= 1, got a 0-d tensor")
    if d.shape[-1] == 0:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{ref}' has an empty normalized (last) dim: shape {list(d.shape)}")
    check.same_shape(ref, *names)
    return tuple(d.shape)


def check_std_shape(check: Checker, name: str, shape) -> None:
    """input_std_deviation: shape[:-1] or shape[:-1] + (1,)."""
    d = check[name]
    ok = (tuple(shape[:-1]), tuple(shape[:-1]) + (1,))
    if tuple(d.shape) not in ok:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(d.shape)} must be {list(ok[0])} or {list(ok[1])}")
