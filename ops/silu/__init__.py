"""silu: output = x*sigmoid(x) (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F, H
from infiniop_py.elementwise import elementwise_op, writes_into
from infiniop_py.elementwise.cuda import widest
from infiniop_py.planner import Rule, always


@writes_into
def _numpy(out, x):
    np.negative(x, out=out)
    np.exp(out, out=out)
    np.add(out, out.dtype.type(1), out=out)
    np.divide(x, out, out=out)


# f32: x * (correctly rounded 1/(1 + e^-x)) (<= 1.5 ulp, no IEEE division); f64 divides;
# f16/bf16 outputs: __expf (relative error <= (2 + 1.16|x|) 2^-24, far below 2^-11)
ACCURATE = "if constexpr (sizeof(T) == 8) { return input / (T(1) + exp(-input)); } else { return input * __frcp_rn(1.0f + expf(-input)); }"
# NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
DENSE_RULES = (
    Rule("silu.dense.f32", widest(4), "ex1"),
    Rule("silu.dense.half", widest(2), "ex2"),
    Rule("silu.dense.f64", always, "vec2"),
)

SPEC = elementwise_op(
    name="silu",
    stem="Silu",
    out="output",
    ins=("input",),
    cuda=ACCURATE,
    cuda_variant=lambda dt, _: "return input * __frcp_rn(1.0f + __expf(-input));" if dt in H else ACCURATE,
    numpy=_numpy,
    dtypes=F,
    reference=lambda input: __import__("torch").nn.functional.silu(input),
    torch="F.silu(input)",
    summary="output = x*sigmoid(x)",
    tensor_aliases={"x": "input", "y": "output"},
    dense_rules=DENSE_RULES,
)
