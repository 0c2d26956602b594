"""sigmoid: output = 1/(1+e^-x) (ops.md §1.2)."""

from infiniop_py.dtypes import F, H
from infiniop_py.elementwise import elementwise_op, sigmoid_into, writes_into
from infiniop_py.elementwise.cuda import widest
from infiniop_py.planner import Rule, always


@writes_into
def _numpy(out, x):
    sigmoid_into(out, x)


ACCURATE = "if constexpr (sizeof(T) == 8) { return T(1) / (T(1) + exp(-input)); } else { return __frcp_rn(1.0f + expf(-input)); }"
# NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
DENSE_RULES = (
    Rule("sigmoid.dense.f32", widest(4), "ex1"),
    Rule("sigmoid.dense.half", widest(2), "ex2"),
    Rule("sigmoid.dense.f64", always, "vec2"),
)

SPEC = elementwise_op(
    name="sigmoid",
    stem="Sigmoid",
    out="output",
    ins=("input",),
    # f32: __frcp_rn is the correctly rounded 1/y, the same bits as the IEEE division, cheaper;
    # f16/bf16 outputs: __expf (relative error <= (2 + 1.16|x|) 2^-24, far below 2^-11)
    cuda=ACCURATE,
    cuda_variant=lambda dt, _: "return __frcp_rn(1.0f + __expf(-input));" if dt in H else ACCURATE,
    numpy=_numpy,
    cpu_kernel="sigmoid",
    dtypes=F,
    reference=lambda input: __import__("torch").sigmoid(input),
    torch="torch.sigmoid(input)",
    summary="output = 1/(1+e^-x)",
    tensor_aliases={"x": "input", "y": "output"},
    dense_rules=DENSE_RULES,
)
