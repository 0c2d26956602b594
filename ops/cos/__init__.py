"""cos: output = cos x (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F, H
from infiniop_py.elementwise import elementwise_op, float_expr
from infiniop_py.elementwise.halftrig import half_cos

SPEC = elementwise_op(
    name="cos",
    stem="Cos",
    out="output",
    ins=("input",),
    cuda=float_expr("{cos}(input)"),
    # f16/bf16 outputs: reduction + polynomial (elementwise/halftrig.py); f32/f64: the accurate cosf/cos
    cuda_variant=lambda dt, _: half_cos(dt) if dt in H else float_expr("{cos}(input)"),
    numpy=np.cos,
    dtypes=F,
    reference=lambda input: __import__("torch").cos(input),
    torch="torch.cos(input)",
    summary="output = cos x",
    tensor_aliases={"x": "input", "y": "output"},
)
