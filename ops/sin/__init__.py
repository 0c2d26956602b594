"""sin: output = sin x (ops.md §1.2)."""

from infiniop_py.elementwise import float_expr
from infiniop_py.elementwise.declare import by_output, unary_op
from infiniop_py.elementwise.halftrig import half_sin

SPEC = unary_op(
    "sin",
    # f16/bf16 outputs: reduction + polynomial (elementwise/halftrig.py); f32/f64: the accurate sinf/sin
    cuda_variant=by_output(float_expr("{sin}(input)"), half_sin),
    summary="output = sin x",
)
