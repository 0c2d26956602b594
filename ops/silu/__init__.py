"""silu: output = x*sigmoid(x) (ops.md §1.2)."""

import numpy as np

from infiniop_py.elementwise import writes_into
from infiniop_py.elementwise.cuda import dense_by_width
from infiniop_py.elementwise.declare import by_output, unary_op


@writes_into
def _numpy(out, x):
    np.negative(x, out=out)
    np.exp(out, out=out)
    np.add(out, out.dtype.type(1), out=out)
    np.divide(x, out, out=out)


# f32: x * (correctly rounded 1/(1 + e^-x)) (<= 1.5 ulp, no IEEE division); f64 divides;
# f16/bf16 outputs: __expf (relative error <= (2 + 1.16|x|) 2^-24, far below 2^-11)
ACCURATE = "if constexpr (sizeof(T) == 8) { return input / (T(1) + exp(-input)); } else { return input * __frcp_rn(1.0f + expf(-input)); }"

SPEC = unary_op(
    "silu",
    torch_fn="nn.functional.silu",
    cuda=ACCURATE,
    cuda_variant=by_output(ACCURATE, "return input * __frcp_rn(1.0f + __expf(-input));"),
    numpy=_numpy,
    summary="output = x*sigmoid(x)",
    # NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
    dense_rules=dense_by_width("silu", f32="ex1", half="ex2", f64="vec2"),
)
