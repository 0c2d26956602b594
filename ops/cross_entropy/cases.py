from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.reduce_cases import large_magnitude, with_neg_inf

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def labels(rng, name, dtype, shape, v, bad=False):
    lab = rng.integers(0, v, size=shape)
    if bad and lab.size > 3:
        flat = lab.reshape(-1)
        flat[0], flat[1], flat[2] = -100, v, -7
    return lab


def data_for(v, bad=False, xdata=None):
    def data(rng, name, dtype, shape):
        if name == "target":
            return labels(rng, name, dtype, shape, v, bad)
        if xdata is not None:
            vals = xdata(rng, name, dtype, shape)
            if xdata is with_neg_inf:
                vals.reshape(-1, v)[0, :] = 0  # keep row 0 finite (an all -inf row with a label is NaN in torch too)
            return vals
        return None

    return data


def case(xshape, ti=DType.I64, xs=None, ts=None, ys=None, desc="", bad=False, xdata=None, suites=("quick",)):
    v = xshape[-1]
    lead = xshape[:-1]
    return Case(
        {"y": T(lead, ys), "x": T(xshape, xs), "target": T(lead, ts, ti)},
        DT,
        desc,
        data=data_for(v, bad, xdata),
        suites=suites,
    )


CASES = [
    case((13, 4), desc="13x4, int64 labels"),
    case((13, 4), DType.I32, desc="13x4, int32 labels"),
    case((5, 17), desc="rows shorter than a warp"),
    case((3, 1000), DType.I32, desc="rows of 1000"),
    case((3, 2049), desc="rows of 2049"),
    case((2, 33000), desc="rows longer than the register cache"),
    case((2, 3, 40), xs=(300, 50, 1), ts=(1, 2), ys=(1, 2), desc="3-d padded x, transposed target/y"),
    case((6, 40), xs=(1, 6), desc="class dim strided (column kernel)"),
    case((8, 30), bad=True, desc="labels -100, v, -7 give 0"),
    case((8, 30), DType.I32, bad=True, desc="int32 out-of-range labels"),
    case((6, 37), desc="-inf entries", xdata=with_neg_inf),
    case((4, 300), desc="large magnitudes", xdata=large_magnitude),
    case((0, 5), desc="empty"),
    case((64, 32000), desc="64x32000", suites=("full",)),
]
