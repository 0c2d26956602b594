"""Case tables shared by the row-wise operators (softmax, log_softmax)."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, to_numpy
from ..testing.cases import Case, T
from ..testing.data import random_data


def with_neg_inf(rng, name, dtype, shape):
    """Random values with scattered -inf entries and one all -inf row (-> NaN)."""
    v = random_data(rng, dtype, shape).astype(np.float64)
    flat = v.reshape(-1, shape[-1])
    flat[:, ::3] = -np.inf
    flat[0, :] = -np.inf
    return v.astype(to_numpy(dtype))


def large_magnitude(rng, name, dtype, shape):
    """Values whose exp overflows every float type: a naive softmax gives inf/inf."""
    hi = 3.0e4 if dtype is DType.F16 else 1.0e5
    v = rng.uniform(-hi, hi, size=shape)
    v.reshape(-1, shape[-1])[:, 1] = hi  # ties at the max
    v.reshape(-1, shape[-1])[:, 2] = hi
    return v.astype(to_numpy(dtype))


def near_max(rng, name, dtype, shape):
    """Large offset with small spread: only a max-subtracted softmax is accurate."""
    base = 3.0e4 if dtype is DType.F16 else 1.0e4
    return (base + rng.uniform(-4, 4, size=shape)).astype(to_numpy(dtype))


def softmax_cases(dtypes):
    dt = tuple(sorted(dtypes))

    def case(shape, dim=-1, xs=None, ys=None, desc="", data=None, suites=("quick",), inplace=None):
        return Case(
            {"output": T(shape, ys), "input": T(shape, xs)},
            dt,
            desc,
            attrs={"dim": dim},
            data=data,
            suites=suites,
            inplace={"output": "input"} if inplace else {},
        )

    return [
        case((13, 4), desc="13x4 (rows shorter than a warp)"),
        case((3, 17), desc="rows of 17"),
        case((5, 128), desc="rows of 128"),
        case((4, 1000), desc="rows of 1000 (non power of two)"),
        case((3, 2049), desc="rows of 2049 (longer than a block of vectors)"),
        case((2, 4097), desc="rows of 4097"),
        case((2, 33000), desc="rows of 33000 (longer than the register cache)"),
        case((13, 40), xs=(50, 1), ys=(50, 1), desc="padded rows (50,1) both"),
        case((13, 40), xs=(50, 1), desc="padded input rows, contiguous output"),
        case((6, 40), xs=(80, 2), ys=(1, 6), desc="gapped row stride 2, column-major output"),
        case((33, 20), dim=0, desc="dim 0 (column kernel)"),
        case((4, 6, 10), dim=1, xs=(60, 1, 6), desc="permuted input, dim 1 contiguous"),
        case((4, 6, 10), dim=1, desc="middle dim"),
        case((2, 3, 4, 5), dim=-3, xs=(60, 1, 15, 3), ys=(1, 2, 6, 24), desc="4-d permuted both"),
        case((4097,), desc="1-d 4097"),
        case((7, 1), desc="rows of one element"),
        case((0, 5), desc="empty"),
        case((5, 37), desc="-inf entries and an all -inf row", data=with_neg_inf),
        case((4, 300), desc="large magnitudes (naive exp overflows)", data=large_magnitude),
        case((4, 300), desc="large offset, small spread", data=near_max),
        case((3, 2100), dim=0, xs=(1, 3), desc="transposed long rows, dim 0 contiguous"),
        case((13, 40), xs=(50, 1), ys=(50, 1), desc="in-place, padded", inplace=True),
        case((3, 20000), desc="rows of 20000 with -inf entries (16-bit raw cache)", data=with_neg_inf),
        case((3, 4100), xs=(4101, 1), ys=(4101, 1), desc="rows of 4100, odd row stride (head and tail)"),
        case((3, 30000), desc="rows of 30000 (register cache, partly empty last vectors)"),
        case((16, 5632), desc="16x5632", suites=("full",)),
        case((32, 20, 512), desc="32x20x512", suites=("full",)),
        case((64, 32000), desc="64x32000", suites=("full",)),
    ]
