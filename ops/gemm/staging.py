"""Strided copies on the GPU for the GEMM family: staging non-cuBLAS layouts through the
workspace and pre-filling outputs with a broadcast bias (then GEMM with beta = 1).

The copies reuse the elementwise framework's ``copy`` kernels on unsigned integers of the
element size (the same instantiations as ``rearrange``), so zero strides (broadcast) and
transposes take its vectorised / tiled paths.
"""

from __future__ import annotations

from infiniop_py.dtypes import DType
from infiniop_py.spec import Info
from infiniop_py.tensor import TensorDescriptor, contiguous_strides

UINT = {1: DType.U8, 2: DType.U16, 4: DType.U32, 8: DType.U64}
ALIGN = 256


class Copy:
    """dst (descriptor) <- src (descriptor) by element bytes; ``__call__(dst_ptr, src_ptr, stream)``."""

    def __init__(self, handle, dst: TensorDescriptor, src: TensorDescriptor):
        from infiniop_py.elementwise.cuda import ElementwiseKernel

        u = UINT[dst.itemsize]
        raw = Info("copy", {"dst": dst.with_dtype(u), "src": src.with_dtype(u)}, {}, out_name="dst", reads=("src",))
        self.kernel = ElementwiseKernel(raw, handle, "copy", "src", ("src",), ())
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


def compile_units():
    """The copy instantiations used here (identical to rearrange's copy kernels)."""
    from infiniop_py.elementwise.cuda import make_nvidia

    sizes = (2, 4, 8)
    copy = make_nvidia("copy", "src", ("src",), (), lambda: [(UINT[s], (UINT[s],)) for s in sizes])
    return copy.compile_units()
