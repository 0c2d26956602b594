"""tanh: output = tanh x (ops.md §1.2)."""

import os

import numpy as np

from infiniop_py.dtypes import DType, F
from infiniop_py.elementwise import elementwise_op, float_expr

ACCURATE = float_expr("{tanh}(input)")
# bf16 outputs: the MUFU tanh (PTX tanh.approx.f32, maximum relative error 2^-10.987 over the whole
# range, subnormals supported) is 16x finer than bf16's half ulp (2^-9), so the rounded result is
# within 1 ulp of the correctly rounded one; f16 (half ulp 2^-11) keeps tanhf.
BF16_FAST = 'float r_; asm("tanh.approx.f32 %0, %1;" : "=f"(r_) : "f"(input)); return r_;'


def _variant(dtype, _choices) -> str:
    old = "tanh" in os.environ.get("IOP_PW_OLD", "").split(",")  # A/B switch, read at create
    return BF16_FAST if dtype == DType.BF16 and not old else ACCURATE


SPEC = elementwise_op(
    name="tanh",
    stem="Tanh",
    out="output",
    ins=("input",),
    cuda=ACCURATE,
    cuda_variant=_variant,
    numpy=np.tanh,
    dtypes=F,
    reference=lambda input: __import__("torch").tanh(input),
    torch="torch.tanh(input)",
    summary="output = tanh x",
    tensor_aliases={"x": "input", "y": "output"},
)
