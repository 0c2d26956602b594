"""The index family's shared machinery (gather, scatter, index_copy, index_copy_inplace):
validation helpers, NumPy helpers, the CUDA kernels of ``index.cu`` and their argument packing.
The index_copy implementation both index_copy operators use is :mod:`infiniop_py.index.copy`."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype, grid_for
from ..dtypes import IDX, SI, DType, F
from ..spec import Checker
from ..status import Status

SOURCE = (Path(__file__).parent / "index.cu").read_text()
DATA = F | SI | {DType.U8, DType.BOOL}
UTYPE = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
ITYPE = {DType.I32: "int32_t", DType.I64: "int64_t"}
MAXD = 8
BLOCK = 256
META_FMT = "<8q8q8q8q7q4i"  # struct IdxMeta (index.cu)
TAB_FMT = "<8q8q8q8q8q4i"  # struct TabMeta (index.cu)
TMAX = 12288  # ints per shared-memory last-writer table (48 KiB, no opt-in)
TBLOCK = 512  # threads per block of the table kernels (__launch_bounds__(512))


def check_index_dtype(check: Checker, name: str) -> None:
    d = check[name]
    if d.dtype not in IDX:
        check.fail(Status.BAD_TENSOR_DTYPE, f"index tensor '{name}' dtype {d.dtype.name} must be I32 or I64")


def check_ndim(check: Checker, *names) -> None:
    for n in names:
        d = check[n]
        if d is not None and d.ndim > MAXD:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{n}' has {d.ndim} dims; at most {MAXD} are supported")


def pack_meta(shape, s0, s1, s2, n, dim_size=0, dim_stride=0, length=0, st=(0, 0, 0), mode=0, flag=0) -> bytes:
    nd = len(shape)
    pad = MAXD - nd

    def fill(v, f):
        return list(v) + [f] * pad

    return struct.pack(
        META_FMT, *fill(shape, 1), *fill(s0, 0), *fill(s1, 0), *fill(s2, 0),
        n, dim_size, dim_stride, length, *st, nd, mode, flag, 0,
    )  # fmt: skip


def pack_tab(shape, s0, s1, s2, *, dim_size, length, chunk, n, st=(0, 0, 0, 0), axis=-1, mode=0, lpb=1) -> bytes:
    """struct TabMeta: shape/strides (padded to 8 dims), extents, axis strides (out, index, source, input)."""
    nd = len(shape)
    pad = MAXD - nd

    def fill(v, f):
        return list(v) + [f] * pad

    return struct.pack(
        TAB_FMT, *fill(shape, 1), *fill(s0, 0), *fill(s1, 0), *fill(s2, 0),
        dim_size, length, chunk, n, *st, nd, axis, mode, lpb,
    )  # fmt: skip


def index_type(n: int) -> str:
    return "unsigned int" if n < 2**31 else "unsigned long long"


def module(names, device_id):
    return get_module(SOURCE, list(names), device_id)


# --------------------------------------------------------------------------------------------
# NumPy helpers
# --------------------------------------------------------------------------------------------
def coords(shape):
    """Open mesh of coordinates for ``shape`` (broadcastable index arrays)."""
    return list(np.meshgrid(*[np.arange(d) for d in shape], indexing="ij", sparse=True)) if shape else []


class IndexKernel(CudaKernel):
    """A list of (Launch or callable) run in order; ``self.empty`` skips everything."""

    def __init__(self, handle):
        super().__init__(handle)
        self.device_id = handle.device_id
        self.empty = False
        self.steps = []

    def launch(self, ptrs, ws_ptr, rt, stream):
        if self.empty:
            return
        for s in self.steps:
            s(ptrs, ws_ptr, stream)


def grid(n, dev, per_block=BLOCK):
    return grid_for(n, per_block, dev)


__all__ = ["ctype", "Launch", "Slot"]
