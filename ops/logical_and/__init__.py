"""logical_and: c = (a != 0) and (b != 0) (ops.md §1.8); C-style alias And, GGUF alias op_and."""

import numpy as np

from infiniop_py.dtypes import DType
from infiniop_py.elementwise import elementwise_op, split_compile_units

from ..where import DATA, truth_type

OUT = frozenset({DType.BOOL, DType.U8, DType.I8})
_TRUTH = sorted({truth_type(d) for d in DATA})


def logical_dtypes(check, out, ins):
    """a and b: any of F, SI, u8, bool (they may differ); c: bool, or u8/i8 holding 0/1."""
    check.dtype_in(out, OUT)
    for n in ins:
        check.dtype_in(n, DATA)


def logical_kernel_types(name, dtype):
    """c is written as a 0/1 byte whatever its 1-byte type; inputs are read by truth value."""
    return DType.U8 if name == "c" else truth_type(dtype)


def logical_combos():
    return [(DType.U8, (x, y)) for x in _TRUTH for y in _TRUTH]


def _reference(a, b):
    import torch

    return torch.logical_and(a, b)


SPEC = elementwise_op(
    name="logical_and",
    stem="LogicalAnd",
    out="c",
    ins=("a", "b"),
    cuda="return (a != A(0)) && (b != B(0));",
    numpy=np.logical_and,
    dtypes=DATA,
    dtype_rule=logical_dtypes,
    type_combos=logical_combos,
    kernel_types=logical_kernel_types,
    reference=_reference,
    torch="torch.logical_and(a, b)",
    summary="c = a && b (nonzero is true; c bool, or u8/i8 0/1)",
    gguf_names=("op_and",),
    stem_aliases=("And",),
)

split_compile_units(SPEC)
