"""NVIDIA rearrange: tiled transpose through shared memory, else the elementwise copy kernels."""

from __future__ import annotations

import struct
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel
from infiniop_py.dtypes import DType
from infiniop_py.elementwise.cuda import ElementwiseKernel
from infiniop_py.layout import collapse
from infiniop_py.spec import Info

SOURCE = (Path(__file__).parent / "kernel.cu").read_text()
UINT = {1: DType.U8, 2: DType.U16, 4: DType.U32, 8: DType.U64}
CTYPE = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
MAX_BATCH = 6


def tile_config(itemsize: int) -> tuple[int, int]:
    """(TILE, ROWS): 64-wide tiles for 1- and 2-byte elements so each warp row moves >= 64 bytes."""
    return (64, 8) if itemsize <= 2 else (32, 8)


def kernel_name(itemsize: int) -> str:
    tile, rows = tile_config(itemsize)
    return f"rearrange_tiled<{CTYPE[itemsize]}, {tile}, {rows}>"


def transpose_plan(shape, dst_strides, src_strides):
    """(a, b, batch dims) when a tiled transpose applies, else None.

    A is dst's contiguous innermost dim; B is the dim where src has stride 1.
    """
    if len(shape) < 2 or dst_strides[-1] != 1 or src_strides[-1] == 1:
        return None
    a = len(shape) - 1
    cands = [k for k in range(len(shape) - 1) if src_strides[k] == 1]
    if not cands:
        return None
    b = cands[0]
    batch = [k for k in range(len(shape)) if k not in (a, b)]
    if len(batch) > MAX_BATCH:
        return None
    return a, b, batch


class RearrangeKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        dst, src = info.tensors["dst"], info.tensors["src"]
        size = dst.itemsize
        self.launch = self._noop
        if dst.numel == 0:
            return
        shape, (ds, ss) = collapse(dst.shape, [dst.strides, src.strides])
        plan = transpose_plan(shape, ds, ss)
        if plan is None:
            raw = Info(info.op, {"dst": dst.with_dtype(UINT[size]), "src": src.with_dtype(UINT[size])}, {}, out_name="dst", reads=("src",))
            self.copy = ElementwiseKernel(raw, handle, "copy", "src", ("src",), ())
            self.launch = self.copy.launch
            return
        a, b, batch = plan
        tile, rows = tile_config(size)
        bshape = [shape[k] for k in batch]
        nb = 1
        for d in bshape:
            nb *= d
        pad = MAX_BATCH - len(batch)
        meta = struct.pack(
            "<6q6q6q6qqii",
            shape[a], shape[b], ds[a], ds[b], ss[a], ss[b],
            *(bshape + [1] * pad),
            *([ds[k] for k in batch] + [0] * pad),
            *([ss[k] for k in batch] + [0] * pad),
            nb, len(batch), 0,
        )
        name = kernel_name(size)
        mod = get_module(SOURCE, [name], handle.device_id)
        grid = (-(-shape[a] // tile), min(-(-shape[b] // tile), 65535), min(nb, 65535))
        self.tiled = Launch(mod.ptr[name], grid, (tile, rows), [Slot(0), Slot(1), meta])
        self.launch = self._tiled

    def _noop(self, ptrs, ws_ptr, rt, stream):
        return

    def _tiled(self, ptrs, ws_ptr, rt, stream):
        self.tiled(ptrs, ws_ptr, stream)


def factory(info: Info, handle):
    return RearrangeKernel(info, handle)


def compile_units():
    from infiniop_py.elementwise.cuda import make_nvidia

    units = [(SOURCE, [kernel_name(s) for s in CTYPE])]
    copy = make_nvidia("copy", "src", ("src",), (), lambda: [(UINT[s], (UINT[s],)) for s in CTYPE])
    return units + copy.compile_units()


factory.compile_units = compile_units
