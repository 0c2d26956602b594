"""sigmoid: output = 1/(1+e^-x) (ops.md §1.2)."""

from infiniop_py.elementwise import sigmoid_into, writes_into
from infiniop_py.elementwise.cuda import dense_by_width
from infiniop_py.elementwise.declare import by_output, unary_op


@writes_into
def _numpy(out, x):
    sigmoid_into(out, x)


ACCURATE = "if constexpr (sizeof(T) == 8) { return T(1) / (T(1) + exp(-input)); } else { return __frcp_rn(1.0f + expf(-input)); }"

SPEC = unary_op(
    "sigmoid",
    # f32: __frcp_rn is the correctly rounded 1/y, the same bits as the IEEE division, cheaper;
    # f16/bf16 outputs: __expf (relative error <= (2 + 1.16|x|) 2^-24, far below 2^-11)
    cuda=ACCURATE,
    cuda_variant=by_output(ACCURATE, "return __frcp_rn(1.0f + __expf(-input));"),
    numpy=_numpy,
    cpu_kernel="sigmoid",
    summary="output = 1/(1+e^-x)",
    # NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
    dense_rules=dense_by_width("sigmoid", f32="ex1", half="ex2", f64="vec2"),
)
