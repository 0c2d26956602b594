import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def ties(rng, name, dtype, shape):
    return rng.integers(-3, 3, size=shape).astype(np.float64)


def neg_inf(rng, name, dtype, shape):
    a = rng.uniform(-2.0, 2.0, size=shape)
    a[:, ::3] = -np.inf
    return a


def case(ntoken, nexpert, k, norm=False, desc="", xs=None, vs=None, is_=None, data=None, suites=("quick",)):
    t = {"values": T((ntoken, k), vs, DType.F32), "indices": T((ntoken, k), is_, DType.I32), "x": T((ntoken, nexpert), xs)}
    return Case(t, DT, desc, runtime={"topk": k, "norm": norm}, data=data, suites=suites)


CASES = [
    case(13, 8, 2, desc="13x8 top-2"),
    case(13, 8, 2, True, desc="13x8 top-2, norm"),
    case(5, 64, 6, True, desc="64 experts, top-6, norm"),
    case(7, 256, 8, desc="256 experts, top-8"),
    case(3, 33, 33, True, desc="k = nexpert, norm"),
    case(4, 1000, 4, desc="rows of 1000"),
    case(9, 5, 1, desc="top-1 of 5"),
    case(6, 40, 3, xs=(64, 1), desc="padded x rows"),
    case(6, 40, 3, True, xs=(1, 6), desc="transposed x"),
    case(6, 40, 5, vs=(1, 6), is_=(9, 1), desc="column-major values, padded indices"),
    case(16, 32, 5, desc="ties -> lower index", data=ties),
    case(8, 12, 4, True, desc="-inf entries", data=neg_inf),
    case(0, 8, 2, desc="no tokens"),
    case(5, 8, 0, desc="topk 0"),
    case(4096, 256, 8, True, desc="4096x256 top-8", suites=("full",)),
    case(8192, 64, 6, desc="8192x64 top-6", suites=("full",)),
]
