"""conv_backward: the gradients of F.conv1d/2d/3d (ops.md §6.2).

grad_input = the transposed convolution of grad_output with weight (same s, p, d, G; input
positions no window covers get 0); grad_weight[co, ci', κ] = Σ_n,o grad_output[n, co, o]·
input[n, ci, o·s - p + κ·d]; grad_bias[co] = Σ_n,o grad_output[n, co, o], only when present.

CPU: grad_input by the stride-phase col2im of conv_transpose (infiniop_py/conv/cpu.py),
grad_weight by im2col and one stacked GEMM per batch chunk. NVIDIA: grad_input by the phase-decomposed implicit GEMM; grad_weight by a tiled
kernel whose row sums are split into chunks with f32 partials in the workspace, summed by a
fixed-order reduction kernel (no atomics: bitwise reproducible); grad_bias likewise.
"""

from __future__ import annotations

from infiniop_py.conv import geometry
from infiniop_py.conv.cpu import conv_forward, conv_transposed, conv_weight_grad, flip_weight, flipped_forward
from infiniop_py.conv.declare import conv_op, planned_info
from infiniop_py.spec import Checker, Info, inp, out

from . import cuda


def validate(check: Checker) -> Info:
    check.dtype_in("grad_output", geometry.DTYPES)
    check.same_dtype("grad_output", "grad_input", "grad_weight", "grad_bias", "input", "weight")
    geo = geometry.forward(check, "input", "weight", "grad_output", None)
    check.same_shape("input", "grad_input")
    check.same_shape("weight", "grad_weight")
    geometry.bias_shape(check, "grad_bias", geo.cout)
    check.writable("grad_input", "grad_weight", "grad_bias")
    return planned_info(check, geo, cuda)


def cpu_run(geo, views, work) -> None:
    gi, gw, gb, go, x, w = (views[n] for n in ("grad_input", "grad_weight", "grad_bias", "grad_output", "input", "weight"))
    flipped = flipped_forward(geo)
    if flipped is None:
        conv_transposed(geo, geo.L, gi, go, w, None, work)
    else:  # unit strides and dilations: a convolution of grad_output with the flipped weights
        conv_forward(flipped, gi, go, flip_weight(geo, w), None, work)
    conv_weight_grad(geo, gw, gb, go, x, work)


def reference(grad_output, input, weight, pads=(0,), strides=(1,), dilations=(1,), groups=1, **_):
    import torch
    import torch.nn.functional as F  # noqa: N812

    nd = input.ndim - 2
    p, s, d = geometry.full_lists(nd, pads or (0,), strides or (1,), dilations or (1,))
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    with torch.enable_grad():
        x = input.detach().clone().requires_grad_(True)
        w = weight.detach().clone().requires_grad_(True)
        b = torch.zeros(weight.shape[0], dtype=weight.dtype, device=weight.device, requires_grad=True)
        y = fn(x, w, b, stride=s, padding=p, dilation=d, groups=groups)
        gx, gw, gb = torch.autograd.grad(y, (x, w, b), grad_output, allow_unused=True)
    zero = torch.zeros_like
    return {
        "grad_input": gx if gx is not None else zero(x),
        "grad_weight": gw if gw is not None else zero(w),
        "grad_bias": gb if gb is not None else zero(b),
    }


SPEC = conv_op(
    name="conv_backward",
    stem="ConvBackward",
    tensors=(
        out("grad_input"),
        out("grad_weight"),
        out("grad_bias", optional=True),
        inp("grad_output"),
        inp("input"),
        inp("weight"),
    ),
    attrs=geometry.attrs(),
    validate=validate,
    cuda=cuda,
    cpu_kind="backward",
    cpu_run=cpu_run,
    work_of="grad_output",
    reference=reference,
    torch="autograd of F.conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)",
    summary="gradients of a 1-3-d convolution: grad_input, grad_weight and, when requested, grad_bias",
)
