"""cuDNN (infiniop_py.cuda.cudnn) as configs of the conv family, for dense convolutions: the
forward or data-gradient convolution (``Cudnn``) and the weight gradient (``CudnnWGrad``, its
bias gradient by our partial-sum kernels).
"""

from __future__ import annotations

import math

from infiniop_py.cuda.kernel import ctype
from infiniop_py.dtypes import DType
from infiniop_py.spatial import packed_channel_order
from infiniop_py.status import InfiniopError, Status, error
from infiniop_py.tensor import TensorDescriptor

from .kernels import bias_launches
from .problem import GPU_DTYPES, Conv, WeightGrad, align


def cudnn_available() -> bool:
    """Whether the cuDNN candidate can be built here (frontend and library load)."""
    try:
        from infiniop_py.cuda import cudnn
    except ImportError:
        return False
    try:
        return bool(cudnn.available())
    except Exception:  # noqa: BLE001 - availability is a yes/no question
        return False


def packed(*tensors: TensorDescriptor) -> bool:
    """cuDNN gets only tensors packed channel-first or channel-last: with other strides (a
    weight with its spatial axes swapped, say) some of its engines return wrong results."""
    return all(packed_channel_order(t.shape, t.strides) for t in tensors)


def dense(cg: int, ng: int, kvol: int) -> bool:
    """Groups small relative to the channels: enough of a GEMM per group for cuDNN."""
    return cg >= 8 and ng >= 8 and cg * kvol >= 32


def takes(dtype: DType, cg: int, ng: int, kvol: int, data, tensors) -> bool:
    """Whether a cuDNN config is offered the problem: a GPU dtype, the ``data`` tensors not
    empty, dense groups, every tensor packed, and cuDNN loads."""
    return (
        dtype in GPU_DTYPES and all(t.numel > 0 for t in data) and dense(cg, ng, kvol) and packed(*tensors) and cudnn_available()
    )


class _CudnnLaunch:
    """A cuDNN call in a plan's launch list: ``(ptrs, ws_ptr, stream)`` like ``Launch``."""

    def __init__(self, conv, x_slot, w_slot, y_slot, b_slot, ws_offset: int = 0):
        self.conv = conv
        self.slots = (x_slot, w_slot, y_slot, b_slot)
        self.ws_offset = ws_offset

    def __call__(self, ptrs, ws_ptr: int, stream: int) -> None:
        x, w, y, b = self.slots
        self.conv(ptrs[x], ptrs[w], ptrs[y], ws_ptr + self.ws_offset if ws_ptr else 0, stream, ptrs[b] if b is not None else None)


class _BiasAdd:
    """y += b[channel] in place, through the library's own elementwise add (output aliasing its
    first input, the bias broadcast by zero strides): follows a cuDNN call that could not fuse it."""

    def __init__(self, c: Conv, device_id: int, y_slot: int, b_slot: int):
        from infiniop_py import create_handle
        from infiniop_py.descriptor import create_descriptor

        y = c.y
        bstride = c.b.strides[0]
        b = TensorDescriptor(y.shape, tuple(bstride if i == 1 else 0 for i in range(y.ndim)), y.dtype)
        self.desc = create_descriptor("add", create_handle(f"nvidia:{device_id}"), y, y, b)
        if self.desc.workspace_size:  # pragma: no cover - the elementwise add needs none
            raise error(Status.INTERNAL_ERROR, "conv_transpose: the bias add asks for a workspace")
        self.kernel = self.desc._kernel
        self.slots = (y_slot, b_slot)

    def __call__(self, ptrs, ws_ptr: int, stream: int) -> None:
        y, b = self.slots
        self.kernel([ptrs[y], ptrs[y], ptrs[b]], 0, (), stream)


class Cudnn:
    """cuDNN's forward (conv) or data-gradient (conv_transpose, grad_input) convolution, the
    plan chosen by cuDNN's heuristics and timing (deterministic plans only; f32 without TF32
    unless ``allow_tf32``). Building raises NOT_IMPLEMENTED where cuDNN declines."""

    name = "cudnn"

    def applies(self, c: Conv) -> bool:
        return takes(c.dtype, c.cg, c.ng, c.kvol, (c.x, c.y), (c.x, c.w, c.y))

    def kernel_names(self, c: Conv) -> list[str]:
        return []

    def build(self, c: Conv, device_id: int, ws_base: int = 0):
        from infiniop_py.cuda import cudnn

        y_slot, x_slot, w_slot, b_slot = c.slots
        kw = dict(bias=c.b, allow_tf32=c.tf32, deterministic=True, device_id=device_id)
        if c.transposed:  # cuDNN's dgrad: its x is our output, its y our input
            try:
                conv = cudnn.CudnnConv("dgrad", c.y, c.w, c.x, c.p, c.s, c.d, c.groups, **kw)
            except InfiniopError as exc:
                if c.b is None or exc.status != Status.NOT_IMPLEMENTED:
                    raise
                # cuDNN has few dgrad engines with a fused bias: dgrad alone, then y += b[channel]
                conv = cudnn.CudnnConv("dgrad", c.y, c.w, c.x, c.p, c.s, c.d, c.groups, **{**kw, "bias": None})
                launch = _CudnnLaunch(conv, y_slot, w_slot, x_slot, None, ws_base)
                return [launch, _BiasAdd(c, device_id, y_slot, b_slot)], int(conv.workspace_size)
            launch = _CudnnLaunch(conv, y_slot, w_slot, x_slot, b_slot if c.b is not None else None, ws_base)
        else:
            conv = cudnn.CudnnConv("fprop", c.x, c.w, c.y, c.p, c.s, c.d, c.groups, **kw)
            launch = _CudnnLaunch(conv, x_slot, w_slot, y_slot, b_slot if c.b is not None else None, ws_base)
        return [launch], int(conv.workspace_size)


class CudnnWGrad:
    """cuDNN's weight gradient; grad_bias (when requested) by our partial-sum kernels."""

    name = "cudnn"

    def applies(self, p: WeightGrad) -> bool:
        return takes(p.dtype, p.cg, p.ng, math.prod(p.k), (p.x, p.go), (p.x, p.go, p.gw))

    def applies_dtype(self, dtype: DType) -> bool:
        return dtype in GPU_DTYPES

    def kernel_names(self, p: WeightGrad) -> list[str]:
        t = ctype(p.dtype)
        return [f"conv_bias_grad<{t}>", f"conv_grad_reduce<{t}>"] if p.gb is not None else []

    def names(self, dtype: DType) -> list[str]:
        return []

    def build(self, p: WeightGrad, device_id: int, ws_base: int = 0):
        from infiniop_py.cuda import cudnn

        gw_slot, _, go_slot, x_slot = p.slots
        conv = cudnn.CudnnConv(
            "wgrad", p.x, p.gw, p.go, p.p, p.s, p.d, p.groups, allow_tf32=p.tf32, deterministic=True, device_id=device_id
        )
        ws = align(int(conv.workspace_size))
        more, end = bias_launches(p, device_id, ws_base + ws)
        return [_CudnnLaunch(conv, x_slot, gw_slot, go_slot, None, ws_base), *more], end - ws_base
