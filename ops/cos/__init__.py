"""cos: output = cos x (ops.md §1.2)."""

from infiniop_py.elementwise import float_expr
from infiniop_py.elementwise.declare import by_output, unary_op
from infiniop_py.elementwise.halftrig import half_cos

SPEC = unary_op(
    "cos",
    # f16/bf16 outputs: reduction + polynomial (elementwise/halftrig.py); f32/f64: the accurate cosf/cos
    cuda_variant=by_output(float_expr("{cos}(input)"), half_cos),
    summary="output = cos x",
)
