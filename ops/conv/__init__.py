"""conv: y = F.conv1d/2d/3d(x, w, b, stride, padding, dilation, groups) (ops.md §6.1).

x (N, Cin, *L), w (Cout, Cin/G, *k), b (Cout,)?, y (N, Cout, *O), 1-3 spatial dims, any strides.
C-style create is upstream's ``(y, x, w, b, pads, strides, dilations, n)`` with ``groups`` last.

CPU: the compiled direct convolution where the channels per group are few (depthwise, small
channel counts; numba), else im2col through a strided view of the zero-padded input and one
stacked BLAS GEMM per batch chunk (infiniop_py/conv/cpu.py); f32 accumulates in f32 unless a
"-f64" plan is pinned. NVIDIA: the family's configs (infiniop_py/conv) chosen by this
operator's rule table (cuda.py): cuDNN for dense problems where it loads, depthwise tiles at
memory speed, a direct kernel for tiny and few-channel convolutions, and an
implicit-GEMM kernel for everything else; ``desc.plan`` names the choice and the ``plan``
attribute pins it.
"""

from __future__ import annotations

from infiniop_py.conv import geometry
from infiniop_py.conv.cpu import conv_forward
from infiniop_py.conv.declare import DATA_TENSORS, conv_op, data_validate

from . import cuda


def cpu_run(geo, views, work) -> None:
    conv_forward(geo, views["y"], views["x"], views["w"], views["b"], work)


def reference(x, w, b, pads=(0,), strides=(1,), dilations=(1,), groups=1, **_):
    import torch.nn.functional as F  # noqa: N812

    nd = x.ndim - 2
    p, s, d = geometry.full_lists(nd, pads or (0,), strides or (1,), dilations or (1,))
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    return fn(x, w, b, stride=s, padding=p, dilation=d, groups=groups)


SPEC = conv_op(
    name="conv",
    stem="Conv",
    tensors=DATA_TENSORS,
    attrs=geometry.attrs(c_rank=True),
    validate=data_validate(geometry.forward, cuda),
    cuda=cuda,
    cpu_kind="conv",
    cpu_run=cpu_run,
    reference=reference,
    torch="F.conv{1,2,3}d(x, w, b, stride, padding, dilation, groups)",
    summary="convolution over 1-3 spatial dims: pads, strides, dilations, groups, optional bias",
    c_create_args=("y", "x", "w", "b", "pads", "strides", "dilations", "n", "groups"),
)
