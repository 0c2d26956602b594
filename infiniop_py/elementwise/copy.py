"""Strided copies on the GPU by element bytes, and staging through a workspace.

A copy is the elementwise framework's ``copy`` kernel on unsigned integers of the element size,
so zero strides (broadcast) and transposes take its vectorised / tiled paths. rearrange is one
such copy; the GEMM family stages operands whose layout cuBLAS cannot take through the workspace
(``Arena``, ``contiguous``) and pre-fills outputs with a broadcast bias; the index family copies
input to output.
"""

from __future__ import annotations

from ..dtypes import DType
from ..spec import Info
from ..tensor import TensorDescriptor, contiguous_strides

UINT = {1: DType.U8, 2: DType.U16, 4: DType.U32, 8: DType.U64}
ALIGN = 256


def copy_kernel(handle, dst: TensorDescriptor, src: TensorDescriptor, op: str = "copy"):
    """The ElementwiseKernel copying ``src`` into ``dst`` bit for bit (launch slots: dst, src)."""
    from .cuda import ElementwiseKernel

    u = UINT[dst.itemsize]
    raw = Info(op, {"dst": dst.with_dtype(u), "src": src.with_dtype(u)}, {}, out_name="dst", reads=("src",))
    return ElementwiseKernel(raw, handle, "copy", "src", ("src",), ())


class Copy:
    """dst (descriptor) <- src (descriptor) by element bytes; ``__call__(dst_ptr, src_ptr, stream)``."""

    def __init__(self, handle, dst: TensorDescriptor, src: TensorDescriptor):
        self.kernel = copy_kernel(handle, dst, src)
        self.empty = dst.numel == 0

    def __call__(self, dst_ptr: int, src_ptr: int, stream: int) -> None:
        if not self.empty:
            self.kernel.launch([dst_ptr, src_ptr], 0, (), stream)


def contiguous(shape, dtype: DType) -> TensorDescriptor:
    return TensorDescriptor(tuple(shape), contiguous_strides(shape), dtype)


class Arena:
    """Bump allocator of workspace offsets (bytes, 256-aligned)."""

    def __init__(self):
        self.size = 0

    def take(self, nbytes: int) -> int:
        off = self.size
        self.size += -(-max(nbytes, 0) // ALIGN) * ALIGN
        return off


def compile_units(sizes=(2, 4, 8)):
    """The copy instantiations for elements of ``sizes`` bytes (the GEMM and index families copy
    floats and index data of 2 to 8 bytes; rearrange every size)."""
    from .cuda import make_nvidia

    return make_nvidia("copy", "src", ("src",), (), lambda: [(UINT[s], (UINT[s],)) for s in sizes]).compile_units()
