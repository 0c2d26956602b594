"""exp: output = e^x (ops.md §1.2)."""

from infiniop_py.elementwise.declare import unary_op

SPEC = unary_op("exp", summary="output = e^x")
