"""conv_transpose: y = F.conv_transpose1d/2d/3d(x, w, b, stride, padding, output_padding, groups,
dilation) (ops.md §6.3).

x (N, Cin, *L), w (Cin, Cout/G, *k), b (Cout,)?, y (N, Cout, *O) with
O = (L-1)·s - 2p + d·(k-1) + output_padding + 1, 0 <= output_padding < max(s, d).

CPU: one stacked GEMM gives every kernel offset's contribution, added into a zero-padded output
offset by offset in a fixed order (col2im), then cropped. NVIDIA: the implicit-GEMM kernel by
stride phases (no zero insertion, no scatter, deterministic); see infiniop_py/conv/kernel.cu.
"""

from __future__ import annotations

from infiniop_py.conv import geometry
from infiniop_py.conv.cpu import conv_transposed
from infiniop_py.conv.declare import DATA_TENSORS, KERNEL_SOURCES, cpu_backend, data_validate, nvidia_backend
from infiniop_py.spec import OpSpec

from . import cuda


def cpu_run(geo, views, work) -> None:
    conv_transposed(geo, geo.O, views["y"], views["x"], views["w"], views["b"], work)


def reference(x, w, b, pads=(0,), strides=(1,), dilations=(1,), output_padding=(0,), groups=1, **_):
    import torch.nn.functional as F  # noqa: N812

    nd = x.ndim - 2
    p, s, d, op = geometry.full_lists(nd, pads or (0,), strides or (1,), dilations or (1,), output_padding or (0,))
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    return fn(x, w, b, stride=s, padding=p, output_padding=op, groups=groups, dilation=d)


SPEC = OpSpec(
    name="conv_transpose",
    stem="ConvTranspose",
    tensors=DATA_TENSORS,
    attrs=geometry.attrs(transpose=True),
    validate=data_validate(geometry.transpose, cuda),
    dtypes=geometry.DTYPES,
    cpu=cpu_backend("transpose", "x", cpu_run),
    nvidia=nvidia_backend(cuda),
    reference=reference,
    torch="F.conv_transpose{1,2,3}d(x, w, b, stride, padding, output_padding, groups, dilation)",
    summary="transposed convolution over 1-3 spatial dims: pads, strides, dilations, output_padding, groups, bias",
    kernel_sources=KERNEL_SOURCES,
)
