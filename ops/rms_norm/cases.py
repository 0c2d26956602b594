from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
HALF = (DType.F16, DType.BF16)


def rn(shape, x=None, y=None, w=None, wdt=None):
    return {"y": T(shape, y), "x": T(shape, x), "w": T(shape[-1:], w, wdt)}


CASES = [
    Case(rn((13, 4)), DT, "rows shorter than a warp (13x4)"),
    Case(rn((5, 13)), DT, "13 features"),
    Case(rn((7,)), DT, "1-d (one row)"),
    Case(rn((16, 1024)), DT, "16x1024"),
    Case(rn((8, 4096)), DT, "8x4096"),
    Case(rn((2, 8192)), DT, "2x8192"),
    Case(rn((3, 1001)), DT, "non-power-of-two 1001 (scalar path)"),
    Case(rn((3, 4097)), DT, "rows longer than the register capacity 4097"),
    Case(rn((2, 8200)), (DType.F64,), "f64 8200 (block-per-row kernel)"),
    Case(rn((13, 40), (48, 1), (56, 1)), DT, "padded rows (13,40)/(48,1), y (56,1)"),
    Case(rn((4, 5, 64), (64, 256, 1)), DT, "permuted leading dims"),
    Case(rn((2, 3, 4, 24)), DT, "4-d"),
    Case(rn((6, 32)), DT, "in-place y = x", inplace={"y": "x"}),
    Case(rn((0, 8)), DT, "empty (0 rows)"),
    Case(rn((9, 256), wdt=DType.F32), HALF, "f32 weight"),
    Case(rn((9, 4096), wdt=DType.F32), HALF, "f32 weight 4096"),
    Case(rn((5, 96), wdt=DType.F16), (DType.BF16,), "bf16 x, f16 weight"),
    Case(rn((5, 96), wdt=DType.BF16), (DType.F16,), "f16 x, bf16 weight"),
    Case(rn((20001, 64)), DT, "many short rows: several pipelined steps per block, partial last step"),
    Case(rn((700, 30, 64), (64, 44800, 1)), DT, "many rows, permuted leading dims (pipelined)"),
    Case(rn((3, 16384)), DT, "16384 (1024-thread groups)"),
    Case(rn((16, 5632)), DT, "16x5632", suites=("full",)),
    Case(rn((4, 4, 5632)), DT, "4x4x5632", suites=("full",)),
    Case(rn((32, 20, 512)), DT, "32x20x512", suites=("full",)),
    Case(rn((64, 8192)), DT, "64x8192", suites=("full",)),
]
