"""gelu: exact (erf) or tanh-approximated GELU (ops.md §1.2).

The C-style ``infiniopCreateGeluDescriptor(h, output, input)`` takes no attribute and is the
exact form (the attribute's default); ``gelutanh`` is the tanh form as its own operator.
"""

from infiniop_py.dtypes import DType, F, H
from infiniop_py.elementwise import elementwise_op, float_expr
from infiniop_py.elementwise.cuda import widest
from infiniop_py.planner import Rule, always
from infiniop_py.spec import Attr

from .npmath import INV_SQRT2, SQRT_2_OVER_PI, erf
from .phi import gelu_half_body, phi_parts, to_f32

# GELU(x) = 0.5 x (1 + erf(x / sqrt 2)); tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
ERF_FORM = "T(0.5) * input * (T(1) + {erf}(input * T(0.70710678118654752440)))"
TANH_FORM = "T(0.5) * input * (T(1) + {tanh}(T(0.79788456080286535588) * (input + T(0.044715) * input * input * input)))"
# f16/bf16 outputs: 0.5 x (1 + tanh u) = x sigmoid(2u) exactly; __expf (relative error <= (2 + 1.16|2u|) 2^-24)
# and a correctly rounded reciprocal, no cancellation anywhere (tanh itself is never formed)
HALF_TANH_FORM = (
    "const float u = 0.79788456080286535588f * (input + 0.044715f * input * input * input); "
    "return input * __frcp_rn(1.0f + __expf(-2.0f * u));"
)


def gelu_variant(dtype, choices) -> str:
    """The kernel body for an output dtype and ``approximate`` (fixed at create: no run-time branch)."""
    if choices.get("approximate", "tanh") == "tanh":
        return HALF_TANH_FORM if dtype in H else float_expr(TANH_FORM)
    # f16/bf16 outputs: Phi from the cancellation-free erfc form (ops/gelu/phi.py), ~20 f32
    # instructions and two MUFU ops instead of erff's two polynomial branches
    return gelu_half_body() if dtype in H else float_expr(ERF_FORM)


def gelu_numpy(x, approximate="none"):
    import numpy as np

    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(x.dtype.type(SQRT_2_OVER_PI) * (x + x.dtype.type(0.044715) * x * x * x)))
    return 0.5 * x * (1 + erf(x * x.dtype.type(INV_SQRT2)))


def _reference(input, approximate="none"):
    import torch

    return torch.nn.functional.gelu(input, approximate=approximate)


SPEC = elementwise_op(
    name="gelu",
    stem="Gelu",
    out="output",
    ins=("input",),
    # approximate reaches the kernel as its index in choices: 0 = "none", 1 = "tanh"
    cuda=float_expr(f"if (approximate != T(0)) return {TANH_FORM}; return {ERF_FORM};"),
    cuda_variant=gelu_variant,  # the form chosen at create, cheaper tanh form for halves
    numpy=gelu_numpy,
    attrs=(Attr("approximate", "str", "none", choices=("none", "tanh"), doc='"none" (erf) or "tanh"'),),
    dtypes=F,
    reference=_reference,
    torch="F.gelu(input, approximate)",
    summary='output = GELU(x), approximate "none" (erf) or "tanh"',
    tensor_aliases={"x": "input", "y": "output"},
    dense_rules=(
        # NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
        Rule("gelu.dense.f32", widest(4), "ex1"),
        Rule("gelu.dense.half", widest(2), "ex4"),
        Rule("gelu.dense.f64", always, "pipe"),
    ),
)


def _cpu(info):
    """f32/f16/bf16, erf form: the erfc formula of phi.py in f32, one compiled loop on dense
    operands (cpu/kernels.py: gelu_erf), else in-place ufuncs on chunks (about 25 passes over
    cache-resident f32 buffers); f64 and the tanh form: the framework."""
    import numpy as np

    from infiniop_py.cpu import jit, pool
    from infiniop_py.cpu.rows import Outputs, bits, contiguous
    from infiniop_py.elementwise import make_cpu, parallel_chunks
    from infiniop_py.halfconv import copy_into

    from .phi import P_OVER_SQRT2, Q_HALF

    generic = make_cpu(gelu_numpy, ("approximate",))(info)
    out_dt = info.tensors["output"].dtype
    if info.attrs["approximate"] != "none" or out_dt not in H | {DType.F32}:
        return generic
    f32 = np.float32

    def compute(dst, x):
        xf = to_f32(x)
        cdf, e, tmp = (np.empty(x.shape, f32) for _ in range(3))
        with np.errstate(all="ignore"):
            phi_parts(xf, cdf, e, tmp)
            if dst.dtype == f32:
                np.multiply(xf, cdf, out=dst)
            else:
                np.multiply(xf, cdf, out=cdf)
                copy_into(dst, cdf)

    q = tuple(f32(c) for c in Q_HALF[::-1])
    a = f32(P_OVER_SQRT2)

    def run(views, ws, rt):
        dst, x = views["output"], views["input"]
        if not dst.size:
            return
        k = jit.kernels()
        if k is not None:  # every layout: contiguous copies in, a temporary out (same bits)
            out = Outputs()
            o = out.full(dst)
            pool.run_flat(lambda o, i: k.gelu_erf(i, q, a, o), [bits(o).reshape(-1), bits(contiguous(x)).reshape(-1)])
            out.done()
            return
        parallel_chunks(compute, dst, [x])

    return run


SPEC.cpu = _cpu
