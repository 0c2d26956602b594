"""logical_and: c = (a != 0) and (b != 0) (ops.md §1.8); C-style alias And, GGUF alias op_and."""

import numpy as np

from infiniop_py.elementwise import elementwise_op, split_compile_units
from infiniop_py.elementwise.logical import DATA, logical_combos, logical_dtypes, logical_kernel_types


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
