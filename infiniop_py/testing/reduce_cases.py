"""Case tables shared by the reductions (sum, reduce_max, reduce_mean) and the row-wise
operators (softmax family, cross entropy): layouts, and data that stresses max-subtraction."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, to_numpy
from ..reduce.ops import reduced_shape
from .cases import Case, T
from .data import random_data


def reduce_cases(dtypes, attr_of, *, allow_all=True, allow_empty_extent=True, single_axis=False, keep_choices=(False, True)):
    """Layouts every reduction covers; ``attr_of(axes, keepdim)`` builds the case's attributes."""
    dt = tuple(sorted(dtypes))

    def case(shape, axes, keepdim=False, x_strides=None, y_strides=None, desc="", suites=("quick",)):
        y = reduced_shape(shape, axes, keepdim)
        return Case(
            {"output": T(y, y_strides), "input": T(shape, x_strides)},
            dt,
            desc or f"{list(shape)} dims {list(axes)} keepdim={keepdim}",
            attrs=attr_of(axes, keepdim),
            suites=suites,
        )

    cases = [
        case((13, 4), (1,), True, desc="13x4 last dim, keepdim"),
        case((13, 4), (-1,), False, (10, 1), desc="padded rows (10,1), last dim"),
        case((13, 4), (0,), False, desc="13x4 first dim (columns)"),
        case((13, 7), (0,), False, (1, 13), desc="column-major input, dim 0"),
        case((13, 7), (1,), False, (1, 13), desc="column-major input, dim 1 (strided rows)"),
        case((5, 3, 7), (1,), False, desc="middle dim"),
        case((5, 3, 7), (1,), True, y_strides=(1, 7, 5), desc="middle dim, permuted keepdim output"),
        case((4, 6, 10), (1,), False, (60, 1, 6), desc="permuted input (60,1,6), dim 1"),
        case((3, 4097), (-1,), False, desc="rows longer than a block (4097)"),
        case((3, 17), (1,), False, desc="rows shorter than a warp (17)"),
        case((2, 9000), (1,), False, desc="long rows (split over chunks)"),
        case((9000, 3), (0,), False, desc="long columns (split over chunks)"),
        case((3, 20011), (-1,), False, desc="rows of 20011 (batched loads + remainder, split, block finish)"),
        case((7, 4099), (1,), False, (4103, 1), desc="rows of 4099, odd row stride (head, batches, tail)"),
        case((33, 70), (0,), False, desc="33x70 columns"),
        case((1000, 36), (0,), False, desc="1000x36 dim 0 (one-launch column tile, odd tail)"),
        case((3, 700, 20), (1,), False, desc="middle dim of 700 (column tile)"),
        case((6, 5), (1,), False, (0, 1), desc="zero-stride (broadcast) input rows"),
        case((4, 6, 10), (2,), False, (120, 20, 2), desc="gapped innermost stride 2"),
        case((0, 5), (1,), False, desc="empty output"),
    ]
    if not single_axis:
        cases += [
            case((5, 3, 7), (0, 2), False, desc="dims (0, 2)"),
            case((4, 6, 10), (0, 1), True, desc="dims (0, 1) keepdim (columns, multi-axis)"),
            case((4, 6, 10), (2, 0), False, (1, 4, 24), desc="dims (2, 0), reversed-stride input"),
            case((2, 3, 4, 5), (1, 3), False, (60, 1, 15, 3), desc="4-d permuted, dims (1, 3)"),
            case((64, 3, 64, 8), (0, 2), False, desc="dims (0, 2): column tile over two reduced dims"),
        ]
    if allow_all:
        cases += [
            case((13, 4), (), False, desc="all dims -> 0-d"),
            case((13, 4), (), True, (10, 1), desc="all dims keepdim, padded"),
            case((), (), False, desc="0-d input"),
            case((70001,), (), False, desc="full reduction 70001 (split + finish)"),
            case((5, 6007), (), False, (6016, 1), desc="full reduction of padded rows (outer split)"),
            case((40, 300), (), False, (1, 40), desc="full reduction, transposed"),
        ]
    if allow_empty_extent:
        cases.append(case((5, 0), (1,), False, desc="empty reduced extent"))
    cases += [
        case((4, 512, 896), (-1,), False, desc="(4,512,896) last dim", suites=("full",)),
        case((4, 512, 896), (0, 1) if not single_axis else (1,), False, desc="(4,512,896) outer dims", suites=("full",)),
        case((1024, 1024), (0,), False, desc="1024^2 dim 0", suites=("full",)),
    ]
    return cases


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
