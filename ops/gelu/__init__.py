"""gelu: exact (erf) or tanh-approximated GELU (ops.md §1.2).

The C-style ``infiniopCreateGeluDescriptor(h, output, input)`` takes no attribute and is the
exact form (the attribute's default); ``gelutanh`` is the tanh form as its own operator.
"""

from infiniop_py.dtypes import DType, H
from infiniop_py.elementwise import float_expr
from infiniop_py.elementwise.cuda import dense_by_width
from infiniop_py.elementwise.declare import unary_op
from infiniop_py.elementwise.gelu import APPROXIMATE, ERF_FORM, TANH_FORM, gelu_numpy, gelu_variant, phi_parts, to_f32


def _reference(input, approximate="none"):
    import torch

    return torch.nn.functional.gelu(input, approximate=approximate)


SPEC = unary_op(
    "gelu",
    # approximate reaches the kernel as its index in choices: 0 = "none", 1 = "tanh"
    cuda=float_expr(f"if (approximate != T(0)) return {TANH_FORM}; return {ERF_FORM};"),
    cuda_variant=gelu_variant,  # the form chosen at create, cheaper tanh form for halves
    numpy=gelu_numpy,
    attrs=(APPROXIMATE,),
    reference=_reference,
    torch="F.gelu(input, approximate)",
    summary='output = GELU(x), approximate "none" (erf) or "tanh"',
    # NVIDIA dense-path configs by operand width (docs/perf/pointwise.md, "Default dense shape")
    dense_rules=dense_by_width("gelu", f32="ex1", half="ex4", f64="pipe"),
)


def _cpu(info):
    """f32/f16/bf16, erf form: the erfc formula of elementwise/gelu.py in f32, one compiled loop on dense
    operands (cpu/kernels.py: gelu_erf), else in-place ufuncs on chunks (about 25 passes over
    cache-resident f32 buffers); f64 and the tanh form: the framework."""
    import numpy as np

    from infiniop_py.cpu import jit, pool
    from infiniop_py.cpu.rows import Outputs, bits, contiguous
    from infiniop_py.elementwise import make_cpu, parallel_chunks
    from infiniop_py.elementwise.gelu import P_OVER_SQRT2, Q_HALF
    from infiniop_py.halfconv import copy_into

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
