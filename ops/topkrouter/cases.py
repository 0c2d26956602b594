from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def data_for(bias_scale=0.1, negative=False):
    def data(rng, name, dtype, shape):
        if name == "correction_bias":
            b = rng.uniform(-bias_scale, bias_scale, size=shape)
            return b - 1.0 if negative else b
        return None

    return data


def case(ntoken, k, scale=2.5, desc="", xs=None, bs=None, vs=None, is_=None, data=None, suites=("quick",)):
    t = {
        "values": T((ntoken, k), vs, DType.F32),
        "indices": T((ntoken, k), is_, DType.I32),
        "x": T((ntoken, 256), xs),
        "correction_bias": T((256,), bs, DType.F32),
    }
    rt = {"routed_scaling_factor": scale, "topk": k}
    return Case(t, DT, desc, runtime=rt, data=data or data_for(), suites=suites)


CASES = [
    case(13, 8, desc="13 tokens, top-8"),
    case(5, 1, 1.0, desc="top-1"),
    case(3, 32, desc="top-32"),
    case(4, 160, desc="top-160: reaches the zeroed groups (0.0 ranks above negative c)", data=data_for(0.1, negative=True)),
    case(6, 8, xs=(300, 1), desc="padded x rows"),
    case(6, 8, bs=(2,), desc="strided correction_bias"),
    case(6, 8, vs=(1, 6), is_=(11, 1), desc="column-major values, padded indices"),
    case(7, 6, 1.0, desc="large bias", data=data_for(2.0)),
    case(0, 8, desc="no tokens"),
    case(4096, 8, suites=("full",), desc="4096 tokens, top-8"),
]
