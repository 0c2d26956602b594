"""conv: y = F.conv1d/2d/3d(x, w, b, stride, padding, dilation, groups) (ops.md §6.1).

x (N, Cin, *L), w (Cout, Cin/G, *k), b (Cout,)?, y (N, Cout, *O), 1-3 spatial dims, any strides.
C-style create is upstream's ``(y, x, w, b, pads, strides, dilations, n)`` with ``groups`` last.

CPU: im2col through a strided view of the zero-padded input and one stacked BLAS GEMM per batch
chunk (infiniop_py/conv/cpu.py). NVIDIA: the family's configs (infiniop_py/conv) chosen by this
operator's rule table (cuda.py): cuDNN for dense problems where it loads, depthwise tiles at
memory speed, a direct kernel for tiny and few-channel convolutions, and an
implicit-GEMM kernel for everything else; ``desc.plan`` names the choice and the ``plan``
attribute pins it.
"""

from __future__ import annotations

from infiniop_py.conv import cpu as _cpu
from infiniop_py.conv import geometry
from infiniop_py.spec import Checker, Info, OpSpec, inp, out

from . import cuda as _cuda


def validate(check: Checker) -> Info:
    check.dtype_in("x", geometry.DTYPES)
    check.same_dtype("x", "y", "w", "b")
    geo = geometry.forward(check, "x", "w", "y", "b")
    check.writable("y")
    geometry.check_plan(check, (*_cuda.names(), *_cpu.PLAN_NAMES))
    return Info(check.op, check.tensors, check.attrs, geo=geo)


def cpu_factory(info: Info):
    geo = info.geo
    work = _cpu.work_dtype(info["x"].dtype)

    def run(views, ws, rt):
        _cpu.conv_forward(geo, views["y"], views["x"], views["w"], views["b"], work)

    run.plan_name = _cpu.plan_name("conv", geo)
    return run


def nvidia_factory(info: Info, handle):
    return _cuda.create(info, handle)


nvidia_factory.compile_units = _cuda.compile_units


def reference(x, w, b, pads=(0,), strides=(1,), dilations=(1,), groups=1, **_):
    import torch.nn.functional as F  # noqa: N812

    nd = x.ndim - 2
    p, s, d = geometry.full_lists(nd, pads or (0,), strides or (1,), dilations or (1,))
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    return fn(x, w, b, stride=s, padding=p, dilation=d, groups=groups)


SPEC = OpSpec(
    name="conv",
    stem="Conv",
    tensors=(
        out("y", aliases=("output",)),
        inp("x", aliases=("input",)),
        inp("w", aliases=("weight",)),
        inp("b", optional=True, aliases=("bias",)),
    ),
    attrs=geometry.attrs(c_rank=True),
    validate=validate,
    dtypes=geometry.DTYPES,
    cpu=cpu_factory,
    nvidia=nvidia_factory,
    reference=reference,
    torch="F.conv{1,2,3}d(x, w, b, stride, padding, dilation, groups)",
    summary="convolution over 1-3 spatial dims: pads, strides, dilations, groups, optional bias",
    c_create_args=("y", "x", "w", "b", "pads", "strides", "dilations", "n", "groups"),
    kernel_sources=("../../infiniop_py/conv/kernel.cu", "../../infiniop_py/conv/wgrad.cu"),
)
