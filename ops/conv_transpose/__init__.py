"""conv_transpose: y = F.conv_transpose1d/2d/3d(x, w, b, stride, padding, output_padding, groups,
dilation) (ops.md §6.3).

x (N, Cin, *L), w (Cin, Cout/G, *k), b (Cout,)?, y (N, Cout, *O) with
O = (L-1)·s - 2p + d·(k-1) + output_padding + 1, 0 <= output_padding < max(s, d).

CPU: one stacked GEMM gives every kernel offset's contribution, added into a zero-padded output
offset by offset in a fixed order (col2im), then cropped. NVIDIA: the implicit-GEMM kernel by
stride phases (no zero insertion, no scatter, deterministic); see infiniop_py/conv/kernel.cu.
"""

from __future__ import annotations

from infiniop_py.conv import cpu as _cpu
from infiniop_py.conv import geometry
from infiniop_py.spec import Checker, Info, OpSpec, inp, out

from . import cuda as _cuda


def validate(check: Checker) -> Info:
    check.dtype_in("x", geometry.DTYPES)
    check.same_dtype("x", "y", "w", "b")
    geo = geometry.transpose(check, "x", "w", "y", "b")
    check.writable("y")
    geometry.check_plan(check, (*_cuda.names(), *_cpu.PLAN_NAMES))
    return Info(check.op, check.tensors, check.attrs, geo=geo)


def cpu_factory(info: Info):
    geo = info.geo
    work = _cpu.work_dtype(info["x"].dtype)

    def run(views, ws, rt):
        _cpu.conv_transposed(geo, geo.O, views["y"], views["x"], views["w"], views["b"], work)

    run.plan_name = _cpu.plan_name("transpose", geo)
    return run


def nvidia_factory(info: Info, handle):
    return _cuda.create(info, handle)


nvidia_factory.compile_units = _cuda.compile_units


def reference(x, w, b, pads=(0,), strides=(1,), dilations=(1,), output_padding=(0,), groups=1, **_):
    import torch.nn.functional as F  # noqa: N812

    nd = x.ndim - 2
    p, s, d, op = geometry.full_lists(nd, pads or (0,), strides or (1,), dilations or (1,), output_padding or (0,))
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    return fn(x, w, b, stride=s, padding=p, output_padding=op, groups=groups, dilation=d)


SPEC = OpSpec(
    name="conv_transpose",
    stem="ConvTranspose",
    tensors=(
        out("y", aliases=("output",)),
        inp("x", aliases=("input",)),
        inp("w", aliases=("weight",)),
        inp("b", optional=True, aliases=("bias",)),
    ),
    attrs=geometry.attrs(transpose=True),
    validate=validate,
    dtypes=geometry.DTYPES,
    cpu=cpu_factory,
    nvidia=nvidia_factory,
    reference=reference,
    torch="F.conv_transpose{1,2,3}d(x, w, b, stride, padding, output_padding, groups, dilation)",
    summary="transposed convolution over 1-3 spatial dims: pads, strides, dilations, output_padding, groups, bias",
    kernel_sources=("../../infiniop_py/conv/kernel.cu", "../../infiniop_py/conv/wgrad.cu"),
)
