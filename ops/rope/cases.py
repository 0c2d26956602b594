"""RoPE cases: both algorithms, 3-D and 4-D x, every pos_ids dtype, row-wise coverage
(short rows, rows longer than a block, odd pair counts, padded and permuted leading dims),
out-of-range positions, in-place."""

import numpy as np

from infiniop_py.dtypes import DType, to_numpy
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def data(table_len, oob=False):
    def fn(rng, name, dtype, shape):
        if name == "pos_ids":
            hi = table_len + (3 if oob else 0)
            lo = 0
            v = rng.integers(lo, hi, size=shape)
            if oob and v.size:
                v.reshape(-1)[0] = table_len  # just past the end
                if np.dtype(to_numpy(dtype)).kind == "i" and v.size > 1:
                    v.reshape(-1)[1] = -1
            return v.astype(to_numpy(dtype))
        if name in ("sin_table", "cos_table"):
            return rng.uniform(-1, 1, size=shape).astype(to_numpy(dtype))
        return None

    return fn


def case(
    x_shape,
    table_len,
    desc,
    *,
    algo=0,
    x_strides=None,
    y_strides=None,
    pos_shape=None,
    pos_dtype=DType.I32,
    pos_strides=None,
    oob=False,
    inplace=False,
    dtypes=DT,
    suites=("quick",),
):
    half = x_shape[-1] // 2
    seq = x_shape[-3]
    t = {
        "y": T(x_shape, y_strides if not inplace else x_strides),
        "x": T(x_shape, x_strides),
        "pos_ids": T(pos_shape or (seq,), pos_strides, pos_dtype),
        "sin_table": T((table_len, half)),
        "cos_table": T((table_len, half)),
    }
    return Case(
        t,
        dtypes,
        f"{desc}, {'GPT_NEOX' if algo else 'GPT_J'}",
        attrs={"algo": algo},
        inplace={"y": "x"} if inplace else {},
        data=data(table_len, oob),
        suites=suites,
    )


CASES = []
for algo in (0, 1):
    CASES += [
        case((5, 4, 8), 16, "3-d short rows (dhead 8)", algo=algo),
        case((7, 3, 64), 32, "3-d dhead 64", algo=algo),
        case((2, 5, 3, 34), 12, "4-d, pos [batch, seq], 17 pairs", algo=algo, pos_shape=(2, 5)),
        case((2, 5, 3, 16), 12, "4-d, pos [seq] shared by batches", algo=algo),
        case((3, 2, 2050), 8, "rows longer than a block (dhead 2050)", algo=algo),
        case(
            (6, 4, 16),
            10,
            "padded x and y (row pitch 80, head pitch 20)",
            algo=algo,
            x_strides=(80, 20, 1),
            y_strides=(96, 24, 1),
        ),
        case((6, 4, 16), 10, "permuted leading dims of x (heads outermost)", algo=algo, x_strides=(16, 96, 1)),
        case((2, 6, 4, 32), 10, "4-d permuted (batch, seq, head) of x", algo=algo, x_strides=(32, 256, 1536, 1)),
        case((5, 3, 6), 16, "odd x strides (pitch 21, 7)", algo=algo, x_strides=(21, 7, 1), y_strides=(23, 7, 1)),
        case((9, 2, 8), 6, "out-of-range positions write zeros", algo=algo, oob=True),
        case((6, 4, 16), 10, "in-place, padded", algo=algo, x_strides=(80, 20, 1), inplace=True),
        case((4, 3, 32), 7, "pos_ids strided", algo=algo, pos_strides=(3,)),
        case((0, 3, 8), 4, "empty seq", algo=algo),
        case((1, 1, 2), 1, "one pair", algo=algo),
        case((9, 5, 24), 12, "5 heads, dhead 24 (3 pair groups per head)", algo=algo),
        case((3, 2, 40, 128), 8, "40 heads (partial head chunk)", algo=algo, pos_shape=(3, 2), oob=True),
        case((3, 2, 1024), 5, "dhead 1024 (up to 256 pair groups per head)", algo=algo),
        case(
            (6, 12, 128),
            10,
            "in-place, padded (head pitch 136)",
            algo=algo,
            x_strides=(12 * 136 + 8, 136, 1),
            inplace=True,
        ),
        case(
            (5, 7, 64),
            9,
            "y padded, x permuted (heads outermost)",
            algo=algo,
            x_strides=(64, 5 * 64, 1),
            y_strides=(7 * 72, 72, 1),
        ),  # fmt: skip
        case((64, 8, 128), 128, "64x8x128", algo=algo, suites=("full",)),
        case((2, 512, 32, 128), 1024, "2x512x32x128", algo=algo, pos_shape=(2, 512), suites=("full",)),
    ]
for pd in (DType.I8, DType.I16, DType.I64, DType.U8, DType.U16, DType.U32, DType.U64):
    CASES.append(case((5, 2, 8), 5, f"pos_ids {pd.name}", algo=1, pos_dtype=pd, oob=True, dtypes=(DType.F32, DType.F16)))
