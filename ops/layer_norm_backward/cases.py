from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def data(rng, name, dtype, shape):
    """std > 0 (as layer_norm produces); the rest uniform [-2, 2]."""
    from infiniop_py.testing.data import random_data

    if name == "input_std_deviation":
        return random_data(rng, dtype, shape, 0.5, 2.0)
    return None


def lb(shape, dy=None, h=None, gi=None, w=None, gw=None, gb=None, s=None, bias=True, std_keep=False):
    d = shape[-1:]
    return {
        "grad_input": T(shape, gi),
        "grad_weight": T(d, gw),
        "grad_bias": T(d, gb) if bias else None,
        "grad_output": T(shape, dy),
        "weight": T(d, w),
        "input_standardization": T(shape, h),
        "input_std_deviation": T(shape[:-1] + ((1,) if std_keep else ()), s),
    }


def C(tensors, desc, **kw):  # noqa: N802
    return Case(tensors, DT, desc, data=data, **kw)


def many_rows(tensors, desc):
    """Cases whose grad_weight / grad_bias sum thousands of rows: f32 accumulation (per-block
    partial rows, then their sum) rounds at the size of the partial sums, which for columns that
    cancel is ~1e-4 of the result; f32 gets that bar, the other dtypes the default one."""
    rest = tuple(d for d in DT if d is not DType.F32)
    return [
        Case(tensors, rest, desc, data=data),
        Case(tensors, (DType.F32,), desc + " (f32 bar 1e-4)", data=data, atol=1e-4, rtol=1e-4),
    ]


CASES = [
    C(lb((13, 4)), "rows shorter than a warp (13x4)"),
    C(lb((5, 13), bias=False), "13 features, no grad_bias"),
    C(lb((7,)), "1-d (one row)"),
    C(lb((16, 1024)), "16x1024"),
    C(lb((6, 4096)), "6x4096"),
    C(lb((2, 8192), bias=False), "2x8192, no grad_bias"),
    C(lb((3, 1001)), "non-power-of-two 1001 (scalar path)"),
    C(lb((3, 4097)), "4097 (block-per-row kernel)"),
    C(lb((200, 24)), "many rows (several persistent blocks)"),
    C(lb((6, 24), std_keep=True), "std shape [..., 1]"),
    C(lb((13, 40), dy=(48, 1), h=(1, 13), gi=(44, 1)), "padded grad_output, column-major standardization, padded grad_input"),
    C(lb((4, 5, 64), dy=(64, 256, 1), s=(1, 4)), "permuted leading dims, transposed std"),
    C(lb((9, 32), w=(2,), gw=(3,), gb=(2,)), "strided weight and gradients"),
    C(lb((0, 8)), "no rows: grad_weight = grad_bias = 0"),
    *many_rows(lb((20001, 64)), "many short rows: several pipelined steps per block, partial last step"),
    C(lb((9001, 64), bias=False), "many rows, no grad_bias"),
    *many_rows(lb((700, 30, 64), dy=(64, 44800, 1)), "many rows, permuted leading dims of grad_output (pipelined)"),
    C(lb((3, 16384)), "16384 (1024-thread groups)"),
    *many_rows(lb((600, 3000)), "600x3000: 256-thread groups (half), partial last pack"),
    *many_rows(
        lb((700, 2048), dy=(2056, 1), h=(2064, 1), bias=False), "700x2048, padded rows, no grad_bias (f32: 256-thread groups)"
    ),
    *many_rows(lb((601, 2048)), "601x2048: odd row count (two 256-thread groups per block: a dead last slot)"),
    Case(lb((16, 5632)), DT, "16x5632", suites=("full",), data=data),
    Case(lb((32, 20, 512)), DT, "32x20x512", suites=("full",), data=data),
    Case(lb((512, 4096)), DT, "512x4096", suites=("full",), data=data),
]
