from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T, elementwise_cases

from ..where.cases import cond_data
from . import SPEC


def logical_cases(spec):
    """Elementwise coverage with c bool (in-place only where a bool input can alias it), plus
    c as u8/i8, mixed input dtypes and zero/nonzero data in every input."""
    dt = tuple(sorted(spec.dtypes))
    out = []
    for c in elementwise_cases("c", ("a", "b"), spec.dtypes, inplace=()):
        tensors = dict(c.tensors)
        tensors["c"] = T(tensors["c"].shape, tensors["c"].strides, DType.BOOL)
        out.append(Case(**{**c.__dict__, "tensors": tensors, "data": _data}))
    for n in ("a", "b"):
        out.append(
            Case(
                {m: T((13, 4), (10, 1)) for m in ("c", "a", "b")},
                (DType.BOOL,),
                f"in-place on '{n}' (bool)",
                inplace={"c": n},
                data=_data,
            )
        )
    for cd in (DType.U8, DType.I8):
        out.append(Case({"c": T((13, 7), dtype=cd), "a": T((13, 7)), "b": T((13, 7))}, dt, f"c {cd.name}", data=_data))
    for bd in (DType.BOOL, DType.F32, DType.I64, DType.F16, DType.U8):
        out.append(
            Case(
                {"c": T((9, 11), dtype=DType.BOOL), "a": T((9, 11)), "b": T((9, 11), (1, 9), dtype=bd)},
                dt,
                f"b {bd.name} transposed",
                data=_data,
            )
        )
    return out


def _data(rng, name, dtype, shape):
    return cond_data(rng, "condition", dtype, shape)


CASES = logical_cases(SPEC)
