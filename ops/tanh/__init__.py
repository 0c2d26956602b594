"""tanh: output = tanh x (ops.md §1.2)."""

from infiniop_py.dtypes import DType
from infiniop_py.elementwise import float_expr
from infiniop_py.elementwise.declare import unary_op

from .halfmath import cuda_expr

ACCURATE = float_expr("{tanh}(input)")
# bf16 outputs: the MUFU tanh (PTX tanh.approx.f32, maximum relative error 2^-10.987 over the whole
# range, subnormals supported) is 16x finer than bf16's half ulp (2^-9), so the rounded result is
# within 1 ulp of the correctly rounded one.
BF16_FAST = 'float r_; asm("tanh.approx.f32 %0, %1;" : "=f"(r_) : "f"(input)); return r_;'
# f16 outputs (half ulp 2^-11, too close to tanh.approx's error): exp/rcp form above 0.55, odd
# polynomial below (halfmath.py), correctly rounded for every finite f16 input.
F16_FAST = cuda_expr()


def _variant(dtype, _choices) -> str:
    return {DType.BF16: BF16_FAST, DType.F16: F16_FAST}.get(dtype, ACCURATE)


SPEC = unary_op("tanh", cuda=ACCURATE, cuda_variant=_variant, summary="output = tanh x")
