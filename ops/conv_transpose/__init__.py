"""conv_transpose: y = F.conv_transpose1d/2d/3d(x, w, b, stride, padding, output_padding, groups,
dilation) (ops.md §6.3).

x (N, Cin, *L), w (Cin, Cout/G, *k), b (Cout,)?, y (N, Cout, *O) with
O = (L-1)·s - 2p + d·(k-1) + output_padding + 1, 0 <= output_padding < max(s, d).

CPU: one stacked GEMM gives every kernel offset's contribution, summed by stride phase with
contiguous additions in a fixed order (col2im), then stored and cropped (infiniop_py/conv/cpu.py). NVIDIA: the implicit-GEMM kernel by
stride phases (no zero insertion, no scatter, deterministic); see infiniop_py/conv/kernel.cu.
"""

from __future__ import annotations

from infiniop_py.conv import geometry
from infiniop_py.conv.cpu import conv_transposed
from infiniop_py.conv.declare import DATA_TENSORS, conv_op, data_validate

from . import cuda


def cpu_run(geo, views, work) -> None:
    conv_transposed(geo, geo.O, views["y"], views["x"], views["w"], views["b"], work)


def reference(x, w, b, pads=(0,), strides=(1,), dilations=(1,), output_padding=(0,), groups=1, **_):
    import torch.nn.functional as F  # noqa: N812

    nd = x.ndim - 2
    p, s, d, op = geometry.full_lists(nd, pads or (0,), strides or (1,), dilations or (1,), output_padding or (0,))
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    return fn(x, w, b, stride=s, padding=p, output_padding=op, groups=groups, dilation=d)


SPEC = conv_op(
    name="conv_transpose",
    stem="ConvTranspose",
    tensors=DATA_TENSORS,
    attrs=geometry.attrs(transpose=True),
    validate=data_validate(geometry.transpose, cuda),
    cuda=cuda,
    cpu_kind="transpose",
    cpu_run=cpu_run,
    reference=reference,
    torch="F.conv_transpose{1,2,3}d(x, w, b, stride, padding, output_padding, groups, dilation)",
    summary="transposed convolution over 1-3 spatial dims: pads, strides, dilations, output_padding, groups, bias",
)
