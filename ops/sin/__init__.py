"""sin: output = sin x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F, H
from infiniop_py.elementwise import elementwise_op, float_expr
from infiniop_py.elementwise.halftrig import half_sin

SPEC = elementwise_op(
    name="sin",
    stem="Sin",
    out="output",
    ins=("input",),
    cuda=float_expr("{sin}(input)"),
    # f16/bf16 outputs: reduction + polynomial (elementwise/halftrig.py); f32/f64: the accurate sinf/sin
    cuda_variant=lambda dt, _: half_sin(dt) if dt in H else float_expr("{sin}(input)"),
    numpy=np.sin,
    dtypes=F,
    reference=lambda input: __import__("torch").sin(input),
    torch="torch.sin(input)",
    summary="output = sin x",
    tensor_aliases={"x": "input", "y": "output"},
)
