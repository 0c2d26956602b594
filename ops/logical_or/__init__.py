"""logical_or: c = (a != 0) or (b != 0) (ops.md §1.8); C-style alias Or, GGUF alias op_or."""

import numpy as np

from infiniop_py.elementwise import elementwise_op, split_compile_units
from infiniop_py.elementwise.logical import DATA, logical_combos, logical_dtypes, logical_kernel_types


def _reference(a, b):
    import torch

    return torch.logical_or(a, b)


SPEC = elementwise_op(
    name="logical_or",
    stem="LogicalOr",
    out="c",
    ins=("a", "b"),
    cuda="return (a != A(0)) || (b != B(0));",
    numpy=np.logical_or,
    dtypes=DATA,
    dtype_rule=logical_dtypes,
    type_combos=logical_combos,
    kernel_types=logical_kernel_types,
    reference=_reference,
    torch="torch.logical_or(a, b)",
    summary="c = a || b (nonzero is true; c bool, or u8/i8 0/1)",
    gguf_names=("op_or",),
    stem_aliases=("Or",),
)

split_compile_units(SPEC)
