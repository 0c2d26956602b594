from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
HALF = (DType.F16, DType.BF16)
NOT_F32 = tuple(d for d in DT if d is not DType.F32)


def many_rows(tensors, desc):
    """Cases whose grad_w sums hundreds to tens of thousands of rows: f32 accumulation (per-block
    partial rows, then their sum) rounds at the size of the partial sums, which for columns that
    cancel is ~1e-4 of the result; f32 gets that bar, the other dtypes the default one."""
    return [Case(tensors, NOT_F32, desc), Case(tensors, (DType.F32,), desc + " (f32 bar 1e-4)", atol=1e-4, rtol=1e-4)]


def rb(shape, x=None, gy=None, gx=None, w=None, gw=None, wdt=None):
    d = shape[-1:]
    return {"grad_x": T(shape, gx), "grad_w": T(d, gw, wdt), "grad_y": T(shape, gy), "x": T(shape, x), "w": T(d, w, wdt)}


CASES = [
    Case(rb((13, 4)), DT, "rows shorter than a warp (13x4)"),
    Case(rb((7,)), DT, "1-d (one row)"),
    Case(rb((33, 17)), DT, "33x17"),
    Case(rb((16, 1024)), DT, "16x1024"),
    Case(rb((6, 4096)), DT, "6x4096"),
    Case(rb((2, 8192)), DT, "2x8192"),
    Case(rb((3, 1001)), DT, "non-power-of-two 1001 (scalar path)"),
    Case(rb((3, 4097)), DT, "4097 (block-per-row kernel)"),
    Case(rb((200, 24)), DT, "many rows (several persistent blocks)"),
    Case(rb((13, 40), x=(48, 1), gy=(1, 13), gx=(44, 1)), DT, "padded x, column-major grad_y, padded grad_x"),
    Case(rb((4, 5, 64), x=(64, 256, 1)), DT, "permuted leading dims of x"),
    Case(rb((9, 32), w=(2,), gw=(3,)), DT, "strided w and grad_w"),
    Case(rb((0, 8)), DT, "no rows: grad_w = 0"),
    *many_rows(rb((20001, 64)), "many short rows: several pipelined steps per block, partial last step"),
    *many_rows(rb((700, 30, 64), x=(64, 44800, 1)), "many rows, permuted leading dims of x (pipelined)"),
    Case(rb((3, 16384)), DT, "16384 (1024-thread groups)"),
    *many_rows(rb((600, 3000)), "600x3000: 256-thread groups (half), partial last pack"),
    *many_rows(rb((700, 2048), x=(2056, 1), gx=(2064, 1)), "700x2048, padded x and grad_x (f32: 256-thread groups)"),
    *many_rows(rb((601, 2048)), "601x2048: odd row count (two 256-thread groups per block: a dead last slot)"),
    Case(rb((601, 4096), wdt=DType.F32), HALF, "601x4096 f32 w/grad_w (256-thread ring groups)"),
    Case(rb((9, 256), wdt=DType.F32), HALF, "f32 w/grad_w"),
    Case(rb((5, 4096), wdt=DType.F32), HALF, "f32 w/grad_w 4096"),
    Case(rb((16, 5632)), DT, "16x5632", suites=("full",)),
    Case(rb((4, 4, 5632)), DT, "4x4x5632", suites=("full",)),
    Case(rb((32, 20, 512)), DT, "32x20x512", suites=("full",)),
    Case(rb((512, 4096)), DT, "512x4096", suites=("full",)),
]
