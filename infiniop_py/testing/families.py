"""Case tables shared by the operators of one family; each operator's ``cases.py`` builds its
``CASES`` from these (index_copy / index_copy_inplace, tril / triu, where / logical_and /
logical_or)."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, to_numpy
from .cases import Case, T, elementwise_cases

I32, I64 = DType.I32, DType.I64


# -- index_copy, index_copy_inplace --------------------------------------------------------------
def idx(values):
    def data(rng, name, dtype, shape):
        if name == "index":
            return np.asarray(values(rng, shape))
        return None

    return data


def perm(size):
    return idx(lambda rng, shape: rng.permutation(size)[: shape[0]])


def dups(size):
    return idx(lambda rng, shape: rng.integers(0, size, size=shape))


def oob(size):
    return idx(lambda rng, shape: rng.integers(-2, size + 2, size=shape))


def index_copy_cases(dtypes, dest="output", base="input"):
    """index_copy's cases (index_copy_inplace: ``base=None``, the destination is its own base)."""
    DT = tuple(sorted(dtypes))  # noqa: N806 - as in the other case tables

    def t(o, x, i, s):
        d = {dest: o, "index": i, "source": s}
        if base:
            d[base] = x
        return d

    inp = {"inplace": {dest: base}} if base else {}
    return [
        Case(t(T((6, 5)), T((6, 5)), T((3,), None, I64), T((3, 5))), DT, "dim 0 permutation", attrs={"dim": 0}, data=perm(6)),
        Case(t(T((4, 7)), T((4, 7)), T((5,), None, I32), T((4, 5))), DT, "dim -1 i32", attrs={"dim": -1}, data=perm(7)),
        Case(t(T((6, 5)), T((6, 5)), T((8,), None, I64), T((8, 5))), DT, "duplicates: last wins", attrs={"dim": 0}, data=dups(6)),
        Case(t(T((6, 5)), T((6, 5)), T((8,), None, I64), T((8, 5))), DT, "out-of-range skipped", attrs={"dim": 0}, data=oob(6)),
        Case(
            t(T((3, 6, 4), (1, 12, 3)), T((3, 6, 4), (24, 1, 6)), T((4,), (2,), I64), T((3, 4, 4), (1, 3, 12))),
            DT,
            "3-d dim 1, strided everything",
            attrs={"dim": 1},
            data=dups(6),
        ),
        Case(
            t(T((6, 5), (8, 1)), T((6, 5), (8, 1)), T((4,), None, I64), T((4, 5))),
            DT,
            "in-place padded",
            attrs={"dim": 0},
            data=dups(6),
            **inp,
        ),
        Case(t(T((6,)), T((6,)), T((0,), None, I64), T((0,))), DT, "empty index", attrs={"dim": 0}, data=dups(6)),
        Case(t(T((0, 5)), T((0, 5)), T((0,), None, I64), T((0, 5))), DT, "empty", attrs={"dim": 0}, data=dups(1)),
        Case(
            t(T((256, 300)), T((256, 300)), T((200,), None, I64), T((256, 200))),
            DT,
            "256x300 dim 1",
            attrs={"dim": 1},
            data=dups(300),
            suites=("full",),
        ),
    ]


# -- tril, triu ----------------------------------------------------------------------------------
def tri_cases(dtypes):
    """tril's and triu's cases."""
    DT = tuple(sorted(dtypes))  # noqa: N806 - as in the other case tables

    def p(shape, o=None, i=None):
        return {"output": T(shape, o), "input": T(shape, i)}

    return [
        Case(p((13, 17)), DT, "13x17 diag 0"),
        Case(p((13, 17)), DT, "diag 3", attrs={"diagonal": 3}),
        Case(p((17, 13)), DT, "diag -4", attrs={"diagonal": -4}),
        Case(p((8, 64)), DT, "vectorised 8x64 diag 5", attrs={"diagonal": 5}),
        Case(p((5, 8, 64)), DT, "batched vectorised", attrs={"diagonal": -1}),
        Case(p((2, 3, 9, 11), None, (1, 2, 66, 6)), DT, "batched permuted input", attrs={"diagonal": 1}),
        Case(p((9, 11), (1, 9), None), DT, "column-major output"),
        Case(p((9, 11), (16, 1), (12, 1)), DT, "padded rows"),
        Case(p((9, 11), (16, 1), (16, 1)), DT, "in-place padded", attrs={"diagonal": 2}, inplace={"output": "input"}),
        Case(p((8, 64), None, None), DT, "in-place vectorised", attrs={"diagonal": -3}, inplace={"output": "input"}),
        Case(p((4, 4)), DT, "diag beyond size", attrs={"diagonal": 100}),
        Case(p((4, 4)), DT, "diag below size", attrs={"diagonal": -100}),
        Case(p((1, 5)), DT, "one row"),
        Case(p((0, 5)), DT, "empty"),
        Case(p((256, 1024)), DT, "256x1024", attrs={"diagonal": 7}, suites=("full",)),
    ]


# -- where, logical_and, logical_or ------------------------------------------------------------
def cond_data(rng, name, dtype, shape):
    """condition holds 0 and nonzero values (-1, 1, 2 where the dtype allows); data: default."""
    if name != "condition":
        return None
    v = rng.integers(-1, 3, size=shape)
    if dtype is DType.BOOL:
        return v > 0
    if dtype in (DType.U8, DType.U16, DType.U32, DType.U64):
        v = np.abs(v)
    return v.astype(to_numpy(dtype))


def truth_output_cases(spec, data):
    """c = f(a, b) with a truth-value c (equal, logical_and, logical_or): the elementwise coverage
    with c bool (in-place only where a bool input can alias it), then c as u8/i8; inputs from
    ``data``."""
    dt = tuple(sorted(spec.dtypes))
    out = []
    for c in elementwise_cases("c", ("a", "b"), spec.dtypes, inplace=()):
        tensors = dict(c.tensors)
        tensors["c"] = T(tensors["c"].shape, tensors["c"].strides, DType.BOOL)
        out.append(Case(**{**c.__dict__, "tensors": tensors, "data": data}))
    for n in ("a", "b"):
        out.append(
            Case(
                {m: T((13, 4), (10, 1)) for m in ("c", "a", "b")},
                (DType.BOOL,),
                f"in-place on '{n}' (bool)",
                inplace={"c": n},
                data=data,
            )
        )
    for cd in (DType.U8, DType.I8):
        out.append(Case({"c": T((13, 7), dtype=cd), "a": T((13, 7)), "b": T((13, 7))}, dt, f"c {cd.name}", data=data))
    return out


def logical_cases(spec):
    """The truth-output coverage, mixed input dtypes and zero/nonzero data in every input."""
    dt = tuple(sorted(spec.dtypes))
    out = truth_output_cases(spec, _truth_data)
    for bd in (DType.BOOL, DType.F32, DType.I64, DType.F16, DType.U8):
        out.append(
            Case(
                {"c": T((9, 11), dtype=DType.BOOL), "a": T((9, 11)), "b": T((9, 11), (1, 9), dtype=bd)},
                dt,
                f"b {bd.name} transposed",
                data=_truth_data,
            )
        )
    return out


def _truth_data(rng, name, dtype, shape):
    return cond_data(rng, "condition", dtype, shape)
