"""where: c = condition ? a : b, nonzero condition means true (ops.md §1.6).

a, b and c share a dtype in F, SI, u8, bool; condition is bool or any dtype of that set. The
NVIDIA kernel is a bitwise select: data moves as the unsigned integer of its size, and integer
or bool conditions are read as unsigned integers of theirs (nonzero is the same test), so 32
instantiations cover all 100 dtype pairs. Float conditions are compared as floats (-0.0 is
false, NaN is true).
"""

import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.elementwise import elementwise_op, select_into, split_compile_units, writes_into
from infiniop_py.elementwise.logical import DATA, bits_type, truth_type


@writes_into(bitwise=True)
def _numpy(out, condition, a, b):
    """A branch-free select on the bits of a and b in their own dtype (no f32 round trip)."""
    select_into(out, np.not_equal(condition, 0), a, b)


def _dtypes(check, out, ins):
    check.dtype_in(out, DATA)
    check.same_dtype(out, "a", "b")
    check.dtype_in("condition", DATA)


def _kernel_types(name, dtype):
    return truth_type(dtype) if name == "condition" else bits_type(dtype)


def _combos():
    conds = [DType.U8, DType.U16, DType.U32, DType.U64, DType.F16, DType.BF16, DType.F32, DType.F64]
    return [(d, (c, d, d)) for c in conds for d in (DType.U8, DType.U16, DType.U32, DType.U64)]


def _reference(condition, a, b):
    import torch

    return torch.where(condition != 0, a, b)


SPEC = elementwise_op(
    name="where",
    stem="Where",
    out="c",
    ins=("condition", "a", "b"),
    cuda="return condition != T(0) ? a : b;",
    numpy=_numpy,
    dtypes=DATA,
    dtype_rule=_dtypes,
    type_combos=_combos,
    kernel_types=_kernel_types,
    inplace=("a", "b"),
    reference=_reference,
    torch="torch.where(condition, a, b)",
    summary="c = condition ? a : b (condition: bool or numeric, nonzero is true)",
)

split_compile_units(SPEC)
