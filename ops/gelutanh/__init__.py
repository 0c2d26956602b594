"""gelutanh: GELU with the tanh approximation, as its own operator (ops.md §1.2)."""

from infiniop_py.elementwise import float_expr
from infiniop_py.elementwise.declare import unary_op
from infiniop_py.elementwise.gelu import TANH_FORM, gelu_numpy, gelu_variant


def _reference(input):
    import torch

    return torch.nn.functional.gelu(input, approximate="tanh")


SPEC = unary_op(
    "gelutanh",
    stem="GeluTanh",
    cuda=float_expr(TANH_FORM),
    cuda_variant=lambda dt, _: gelu_variant(dt, {"approximate": "tanh"}),
    numpy=lambda x: gelu_numpy(x, "tanh"),
    reference=_reference,
    torch='F.gelu(input, approximate="tanh")',
    summary="output = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
)
