"""The case tables of the four pooling operators, built from one list of pooling problems.

Each problem fixes the input shape, the attributes and a layout; ``cases(op)`` lays it out as the
operator's tensors (``tensors``): (output | input) or (grad_input | grad_output, input).
Layouts: contiguous, channels-last on every tensor, padded rows, or permuted dims (the written
tensor and the read tensors in different orders).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import F, to_numpy
from ..pool import normalize
from ..spatial import pool_out_size
from .cases import Case, T

DT = tuple(sorted(F))


def strides_for(shape, order, pad: int = 0) -> tuple[int, ...]:
    """Strides of ``shape`` stored with dims in ``order`` (outermost first), the innermost stored
    row padded by ``pad`` elements."""
    st = [0] * len(shape)
    acc = 1
    for j, d in enumerate(reversed(order)):
        st[d] = acc
        acc *= shape[d] + (pad if j == 0 else 0)
    return tuple(st)


def _order(kind: str, nd: int, written: bool) -> tuple[list[int], int]:
    if kind == "channels_last":
        return [0, *range(2, nd), 1], 0
    if kind == "padded":
        return list(range(nd)), 3 if written else 0
    if kind == "permuted":  # written: spatial dims reversed, C inside; reads: C outermost
        return ([0, *range(nd - 1, 1, -1), 1], 0) if written else ([1, 0, *range(2, nd)], 0)
    if kind == "mixed":  # written channels-last, reads contiguous
        return ([0, *range(2, nd), 1], 0) if written else (list(range(nd)), 0)
    return list(range(nd)), 0


def _t(shape, kind: str, written: bool):
    order, pad = _order(kind, len(shape), written)
    return T(shape, None if kind == "contiguous" else strides_for(shape, order, pad))


def out_shape(shape, attrs) -> tuple[int, ...]:
    n = len(shape) - 2
    k, s, p = normalize(n, attrs["kernel_size"], attrs.get("stride"), attrs.get("padding", 0))
    return (
        *shape[:2],
        *(pool_out_size(L, kk, ss, pp, attrs.get("ceil_mode", False)) for L, kk, ss, pp in zip(shape[2:], k, s, p)),
    )


# -- input data -----------------------------------------------------------------------------------
def ties(rng, name, dtype, shape):
    """Small integers: windows full of equal maxima (the first one must win)."""
    if name != "input":
        return None
    return rng.integers(-2, 3, size=shape).astype(to_numpy(dtype))


def nans(rng, name, dtype, shape):
    """Random values with about one NaN in six, so that many windows hold several (the last
    one must win in the backward pass), plus ties among the rest."""
    if name != "input":
        return None
    x = rng.integers(-3, 4, size=shape).astype(np.float64)
    x[rng.random(shape) < 1 / 6] = np.nan
    return x.astype(to_numpy(dtype))


def infs(rng, name, dtype, shape):
    """Mostly -inf: windows whose in-bounds elements are all -inf (the first in-bounds element
    is the maximum, never a padding position), a few +inf and finite values."""
    if name != "input":
        return None
    x = np.full(shape, -np.inf)
    u = rng.random(shape)
    x[u < 0.15] = np.inf
    finite = (u >= 0.15) & (u < 0.3)
    x[finite] = rng.uniform(-2.0, 2.0, size=int(finite.sum()))
    return x.astype(to_numpy(dtype))


# -- the problems ---------------------------------------------------------------------------------
def A(k, s=None, p=(0,), ceil=False) -> dict:  # noqa: N802 - short constructor for the table
    """Attributes as lists (a scalar becomes a length-1 list); stride left out when None."""

    def as_list(v):
        return [v] if isinstance(v, int) else list(v)

    a = {"kernel_size": as_list(k), "padding": as_list(p), "ceil_mode": ceil}
    if s is not None:
        a["stride"] = as_list(s)
    return a


# (description, input shape, attributes, layout, suites, data, ops it applies to: None = all)
PROBLEMS = [
    ("2-d k3 s2 p1", (2, 3, 9, 11), A([3], [2], [1]), "contiguous", ("quick",), None, None),
    ("2-d k2 s2 (stride absent)", (2, 3, 8, 10), A([2]), "contiguous", ("quick",), None, None),
    ("1-d k3 s1 p1 overlapping", (2, 4, 13), A([3], [1], [1]), "contiguous", ("quick",), None, None),
    ("3-d k(2,3,2) s(1,2,2) p(1,1,0)", (1, 2, 5, 6, 7), A([2, 3, 2], [1, 2, 2], [1, 1, 0]), "contiguous", ("quick",), None, None),
    ("2-d stride > kernel (gaps)", (2, 3, 10, 11), A([2], [3]), "contiguous", ("quick",), None, None),
    ("2-d ceil_mode, last window dropped", (2, 3, 5, 7), A([2], [2], [1], ceil=True), "contiguous", ("quick",), None, None),
    ("2-d ceil_mode, last window past L", (1, 2, 9, 10), A([3], [2], [0], ceil=True), "contiguous", ("quick",), None, None),
    ("1-d ceil_mode k4 s3 p1", (1, 3, 99), A(4, 3, 1, ceil=True), "contiguous", ("quick",), None, None),
    ("2-d odd sizes k(3,2) s(2,1) p(1,0)", (3, 5, 7, 9), A([3, 2], [2, 1], [1, 0]), "contiguous", ("quick",), None, None),
    ("2-d global window k7", (2, 3, 7, 7), A([7]), "contiguous", ("quick",), None, None),
    ("2-d k1 s1", (2, 3, 4, 5), A([1], []), "contiguous", ("quick",), None, None),
    ("2-d channels-last k3 s2 p1", (2, 8, 6, 7), A([3], [2], [1]), "channels_last", ("quick",), None, None),
    ("2-d channels-last C=40 (partial lane tile)", (2, 40, 5, 6), A([2], [1]), "channels_last", ("quick",), None, None),
    ("1-d channels-last k2 s1 p1", (3, 5, 9), A([2], [1], [1]), "channels_last", ("quick",), None, None),
    ("3-d channels-last k2 s2", (2, 4, 4, 5, 6), A([2], [2]), "channels_last", ("quick",), None, None),
    ("2-d padded rows k3 s2 p1", (2, 3, 9, 8), A([3], [2], [1]), "padded", ("quick",), None, None),
    ("2-d permuted k3 s1 p1", (2, 3, 6, 7), A([3], [1], [1]), "permuted", ("quick",), None, None),
    ("3-d permuted k2 s1", (2, 3, 3, 4, 5), A([2], [1]), "permuted", ("quick",), None, None),
    ("2-d written channels-last, read contiguous", (2, 6, 7, 8), A([3], [2], [1]), "mixed", ("quick",), None, None),
    ("empty batch", (0, 3, 8, 8), A([2], [2]), "contiguous", ("quick",), None, None),
    ("2-d ties k3 s1 p1", (2, 3, 7, 8), A([3], [1], [1]), "contiguous", ("quick",), ties, ("max_pool", "max_pool_backward")),
    (
        "2-d ties channels-last k3 s2 p1",
        (2, 5, 7, 8),
        A([3], [2], [1]),
        "channels_last",
        ("quick",),
        ties,
        ("max_pool", "max_pool_backward"),
    ),
    ("3-d ties k3 s2 p1", (1, 2, 5, 6, 7), A([3], [2], [1]), "contiguous", ("quick",), ties, ("max_pool", "max_pool_backward")),
    ("2-d NaN k3 s1 p1", (2, 3, 7, 8), A([3], [1], [1]), "contiguous", ("quick",), nans, ("max_pool", "max_pool_backward")),
    (
        "1-d NaN channels-last k4 s2 p2",
        (2, 5, 17),
        A([4], [2], [2]),
        "channels_last",
        ("quick",),
        nans,
        ("max_pool", "max_pool_backward"),
    ),
    (
        "2-d -inf windows k3 s2 p1",
        (2, 3, 7, 8),
        A([3], [2], [1]),
        "contiguous",
        ("quick",),
        infs,
        ("max_pool", "max_pool_backward"),
    ),
    # the fast paths (pool_fast.cu): partial column chunks, ceil_mode, unaligned rows, C % V != 0
    ("2-d k3 s2 p1 wide rows", (2, 3, 7, 37), A([3], [2], [1]), "contiguous", ("quick",), None, None),
    ("2-d k3 s2 p1 ceil_mode", (1, 2, 10, 12), A([3], [2], [1], ceil=True), "contiguous", ("quick",), None, None),
    ("2-d k2 s2 ceil_mode odd sizes", (1, 3, 9, 11), A([2], [2], ceil=True), "contiguous", ("quick",), None, None),
    ("2-d k2 s2 padded rows", (2, 2, 6, 19), A([2], [2]), "padded", ("quick",), None, None),
    ("2-d channels-last k2 s2 C=24", (2, 24, 5, 7), A([2], [2]), "channels_last", ("quick",), None, None),
    ("2-d channels-last k3 s2 p1 C=20 ceil", (1, 20, 6, 5), A([3], [2], [1], ceil=True), "channels_last", ("quick",), None, None),
    ("2-d NaN k3 s2 p1", (2, 3, 9, 17), A([3], [2], [1]), "contiguous", ("quick",), nans, ("max_pool", "max_pool_backward")),
    (
        "2-d NaN channels-last k3 s2 p1",
        (2, 12, 7, 6),
        A([3], [2], [1]),
        "channels_last",
        ("quick",),
        nans,
        ("max_pool", "max_pool_backward"),
    ),
    ("2-d k3 s2 p1 8x64x56x56", (8, 64, 56, 56), A([3], [2], [1]), "contiguous", ("full",), None, None),
    ("2-d k3 s2 p1 8x64x56x56 channels-last", (8, 64, 56, 56), A([3], [2], [1]), "channels_last", ("full",), None, None),
    ("2-d k2 s2 8x64x56x56", (8, 64, 56, 56), A([2], [2]), "contiguous", ("full",), None, None),
    ("3-d k3 s2 p1 2x16x24x24x24", (2, 16, 24, 24, 24), A([3], [2], [1]), "contiguous", ("full",), None, None),
]


def tensors(op: str, shape, attrs, kind: str) -> dict:
    """The tensors of pooling operator ``op`` on an input of ``shape`` laid out as ``kind``:
    (output | input) for a forward, (grad_input | grad_output, input) for a backward."""
    out = _t(out_shape(shape, attrs), kind, not op.endswith("_backward"))
    if op.endswith("_backward"):
        return {"grad_input": _t(shape, kind, True), "grad_output": out, "input": _t(shape, kind, False)}
    return {"output": out, "input": _t(shape, kind, False)}


def cases(op: str) -> list[Case]:
    """The case table of pooling operator ``op``: every problem that applies to it."""
    return [
        Case(tensors(op, shape, attrs, kind), DT, f"{desc} ({kind})", attrs=attrs, suites=suites, data=data)
        for desc, shape, attrs, kind, suites, data, only in PROBLEMS
        if only is None or op in only
    ]
