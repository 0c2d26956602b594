"""interpolate_nearest: F.interpolate(input, size=output.shape[2:], mode="nearest") for 1-3
spatial dims (ops.md §6.9): src = min(floor(dst·scale), in-1), scale = in/out in f32."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel
from infiniop_py.dtypes import DType, F
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status

SOURCE = (Path(__file__).parent / "kernel.cu").read_text()
DTYPES = F | {DType.I8, DType.U8}
UTYPE = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
META_FMT = "<5q5q5q5q5fii4xq"  # struct InterpMeta (kernel.cu): rows is 8-aligned at 192
BLOCK = 256  # threads per block (__launch_bounds__(256))
RB = 16  # rows per block step (INTERP_RB in kernel.cu)
VEC = {1: 16, 2: 8, 4: 4, 8: 2}  # elements per 16-byte store, by item size


def validate(check: Checker) -> Info:
    o, i = check["output"], check["input"]
    check.dtype_in("input", DTYPES)
    check.same_dtype("input", "output")
    if i.ndim not in (3, 4, 5):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'input' must be (N, C, *S) with 1-3 spatial dims, got shape {list(i.shape)}")
    if o.ndim != i.ndim or o.shape[:2] != i.shape[:2]:
        check.fail(
            Status.BAD_TENSOR_SHAPE, f"tensor 'output' shape {list(o.shape)} must keep N, C and rank of 'input' {list(i.shape)}"
        )
    for d in range(2, i.ndim):
        if o.shape[d] > 0 and i.shape[d] == 0:
            check.fail(Status.BAD_TENSOR_SHAPE, f"input spatial dim {d} is empty but output size is {o.shape[d]}")
    check.writable("output")
    return Info(check.op, check.tensors, check.attrs)


def src_index(n_in: int, n_out: int) -> np.ndarray:
    scale = np.float32(n_in) / np.float32(n_out) if n_out else np.float32(0)
    idx = np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(idx, n_in - 1)


def cpu(info: Info):
    o, i = info["output"], info["input"]
    sel = (slice(None), slice(None)) + np.ix_(*[src_index(i.shape[d], o.shape[d]) for d in range(2, o.ndim)])

    def run(views, ws, rt):
        if views["output"].size:
            views["output"][...] = views["input"][sel]

    return run


class InterpKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        o, i = info["output"], info["input"]
        self.empty = o.numel == 0
        if self.empty:
            return
        nd = o.ndim
        scales = [1.0, 1.0] + [float(np.float32(i.shape[d]) / np.float32(o.shape[d])) for d in range(2, nd)]
        pad = 5 - nd
        rows = math.prod(o.shape[:-1])
        w = o.shape[-1]
        # 16-byte stores when every row starts 16-byte aligned (pointer checked per call) and is
        # a whole number of vectors; otherwise one element per thread.
        vec = 16 // o.itemsize
        self.vec_ok = (
            vec > 1
            and o.strides[-1] == 1
            and w % vec == 0
            and all(o.strides[d] % vec == 0 for d in range(nd - 1) if o.shape[d] > 1)
        )
        mod_names = [f"interp_nearest<{UTYPE[o.itemsize]}, 1>"] + (
            [f"interp_nearest<{UTYPE[o.itemsize]}, {vec}>"] if self.vec_ok else []
        )
        mod = get_module(SOURCE, mod_names, handle.device_id)
        grid = (max(1, min(-(-rows // RB), 1 << 20)),)

        def plan(name, v):
            nv = -(-w // v)
            tpr = min(BLOCK, max(32, 1 << (nv - 1).bit_length()))  # threads per row, power of two
            meta = struct.pack(
                META_FMT, *(list(o.shape) + [1] * pad), *(list(i.shape) + [1] * pad),
                *(list(o.strides) + [0] * pad), *(list(i.strides) + [0] * pad), *(scales + [1.0] * pad), nd, tpr, rows,
            )  # fmt: skip
            return Launch(mod.ptr[name], grid, (BLOCK,), [Slot(0), Slot(1), meta])

        self.k = plan(mod_names[0], 1)
        self.kv = plan(mod_names[1], vec) if self.vec_ok else None
        self.align = vec * o.itemsize

    def launch(self, ptrs, ws_ptr, rt, stream):
        if self.empty:
            return
        if self.kv is not None and ptrs[0] % self.align == 0:
            self.kv(ptrs, ws_ptr, stream)
        else:
            self.k(ptrs, ws_ptr, stream)


def nvidia(info, handle):
    return InterpKernel(info, handle)


nvidia.compile_units = lambda: [(SOURCE, [f"interp_nearest<{u}, {v}>" for s, u in UTYPE.items() for v in (1, VEC[s])])]


def reference(input, out_shapes):
    """Same index rule as the backends, applied with torch indexing (any dtype)."""
    import torch

    shape = out_shapes["output"]
    idx = [torch.from_numpy(src_index(input.shape[d], shape[d])) for d in range(2, input.ndim)]
    grids = torch.meshgrid(*idx, indexing="ij")
    return {"output": input[(slice(None), slice(None), *grids)]}


SPEC = declare(
    globals(),
    name="interpolate_nearest",
    stem="InterpolateNearest",
    tensors=(out("output"), inp("input")),
    dtypes=DTYPES,
    torch='F.interpolate(input, size=output.shape[2:], mode="nearest")',
    summary="nearest-neighbour resize of 1-3 spatial dims (legacy torch 'nearest')",
    kernel_sources=("kernel.cu",),
)
