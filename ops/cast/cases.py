"""Cast coverage: the elementwise layouts for same-dtype copies, then every (src, dst) pair of
ALL contiguous and strided, and the layout set for the conversions the benchmarks use."""

import numpy as np

from infiniop_py.dtypes import ALL, DType, is_float, is_int, to_numpy
from infiniop_py.testing.cases import Case, T, elementwise_cases

from . import SPEC

SRC = tuple(sorted(ALL))
UNSIGNED = (DType.U8, DType.U16, DType.U32, DType.U64)


def data_for(dst: DType):
    """Inputs that exercise the conversion into ``dst`` within its defined range."""

    def data(rng, name, dtype, shape):
        if dtype is DType.BOOL:
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if is_float(dtype):
            if dst in UNSIGNED:
                v = rng.uniform(0, 200, size=shape)  # truncation; no negatives (implementation-defined)
            elif is_int(dst):
                v = rng.uniform(-120, 120, size=shape)
            else:
                v = rng.uniform(-2, 2, size=shape) * (rng.integers(0, 4, size=shape) != 0)  # some zeros for bool
            return v.astype(to_numpy(dtype))
        info = np.iinfo(to_numpy(dtype))
        lo, hi = max(info.min, -1_000_000), min(info.max, 1_000_000)  # wraps into narrow ints, f16 overflow
        v = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
        v = np.where(rng.integers(0, 5, size=shape) == 0, 0, v)
        return v.astype(to_numpy(dtype))

    return data


CASES = elementwise_cases("output", ("input",), SPEC.dtypes)
for dst in sorted(ALL):
    CASES.append(Case({"output": T((13, 7), dtype=dst), "input": T((13, 7))}, SRC, f"to {dst.name}", data=data_for(dst)))
    CASES.append(
        Case(
            {"output": T((5, 6), (10, 1), dtype=dst), "input": T((5, 6), (1, 5))},
            SRC,
            f"to {dst.name}, transposed input, padded output",
            data=data_for(dst),
        )
    )
for src, dst in ((DType.F32, DType.F16), (DType.F16, DType.F32), (DType.F32, DType.BF16), (DType.BF16, DType.F32)):
    for c in elementwise_cases("output", ("input",), {src}, inplace=(), nonempty=False):
        t = dict(c.tensors)
        t["output"] = T(t["output"].shape, t["output"].strides, dst)
        CASES.append(
            Case(**{**c.__dict__, "tensors": t, "description": f"{c.description}, {src.name}->{dst.name}", "data": data_for(dst)})
        )
