from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def ln(shape, x=None, o=None, h=None, s=None, w=None, b=None, bias=True, std_keep=False, std_strides=None):
    sshape = shape[:-1] + ((1,) if std_keep else ())
    return {
        "output": T(shape, o),
        "input_standardization": T(shape, h),
        "input_std_deviation": T(sshape, std_strides),
        "input": T(shape, x),
        "weight": T(shape[-1:], w),
        "bias": T(shape[-1:], b) if bias else None,
    }


CASES = [
    Case(ln((13, 4)), DT, "rows shorter than a warp (13x4)"),
    Case(ln((5, 13), bias=False), DT, "13 features, no bias"),
    Case(ln((7,)), DT, "1-d (one row)"),
    Case(ln((7,), std_keep=True), DT, "1-d, std shape (1,)"),
    Case(ln((16, 1024)), DT, "16x1024"),
    Case(ln((8, 4096)), DT, "8x4096"),
    Case(ln((2, 8192), bias=False), DT, "2x8192, no bias"),
    Case(ln((3, 1001)), DT, "non-power-of-two 1001 (scalar path)"),
    Case(ln((3, 4097)), DT, "4097 (block-per-row kernel)"),
    Case(ln((6, 24), std_keep=True), DT, "std shape [..., 1]"),
    Case(ln((13, 40), x=(48, 1), o=(56, 1), h=(40, 1)), DT, "padded input and output rows"),
    Case(ln((4, 5, 64), x=(64, 256, 1), std_strides=(1, 4)), DT, "permuted leading dims, transposed std"),
    Case(ln((9, 12), x=(1, 9), o=(1, 9)), DT, "strided last dim (column-major input/output)"),
    Case(ln((9, 32), w=(2,), b=(3,)), DT, "strided weight and bias"),
    Case(ln((2, 3, 4, 24)), DT, "4-d"),
    Case(ln((6, 32)), DT, "in-place output = input", inplace={"output": "input"}),
    Case(ln((6, 32)), DT, "in-place standardization = input", inplace={"input_standardization": "input"}),
    Case(ln((0, 8)), DT, "empty (0 rows)"),
    Case(ln((20001, 64)), DT, "many short rows: several pipelined steps per block, partial last step"),
    Case(ln((9001, 64), bias=False), DT, "many rows, in-place output = input, no bias", inplace={"output": "input"}),
    Case(ln((700, 30, 64), x=(64, 44800, 1)), DT, "many rows, permuted leading dims (pipelined)"),
    Case(ln((3, 16384)), DT, "16384 (1024-thread groups)"),
    Case(ln((16, 5632)), DT, "16x5632", suites=("full",)),
    Case(ln((4, 4, 5632)), DT, "4x4x5632", suites=("full",)),
    Case(ln((32, 20, 512)), DT, "32x20x512", suites=("full",)),
    Case(ln((64, 8192)), DT, "64x8192", suites=("full",)),
]
