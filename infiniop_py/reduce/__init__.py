"""Shared reduction framework (CPU and CUDA): reduce a strided tensor over any set of axes.

``REDUCE_CUH`` holds the reusable device helpers (warp/block reduce for sum and max, online
softmax max/sum merge, flat-index decomposition); row-wise kernels include it by text
(``source = REDUCE_CUH + my_kernel``). ``ReduceKernel`` launches what ``plan.plan_reduce``
chooses for sum / max / mean over any axes with arbitrary input and output strides.
Accumulation is in f32 for half types and f32, f64 for f64, int64 for integers (max only).
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import numpy as np

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel
from ..dtypes import DType, acc_numpy, is_float, to_numpy
from ..halfconv import to_f32
from ..lru import LRU
from .plan import OPS, ReducePlan, kernel_names, pack_dim_meta, plan_reduce, pow2ceil

__all__ = ["OPS", "REDUCE_CUH", "REDUCE_SOURCE", "ReduceKernel", "ReducePlan", "kernel_names", "pack_dim_meta"]
__all__ += ["plan_reduce", "pow2ceil", "reduce_numpy", "release_tickets", "store", "TICKET_STREAMS"]

HERE = Path(__file__).parent
REDUCE_CUH = (HERE / "reduce.cuh").read_text()
REDUCE_SOURCE = REDUCE_CUH + (HERE / "reduce_kernels.cu").read_text()


#: Streams per one-launch reduction kernel that keep a ticket array; the least recently used
#: stream's array is freed (after that stream finishes its queued work) when another is needed.
TICKET_STREAMS = 8


def release_tickets(stream: int, hit) -> None:
    """Free an evicted stream's ticket array once no kernel queued on that stream can use it."""
    from ..cuda import runtime

    rt = runtime.cupy().cuda.runtime
    try:
        rt.streamSynchronize(stream)
    except Exception:  # the stream was destroyed meanwhile: wait for the whole device instead
        rt.deviceSynchronize()


class ReduceKernel(CudaKernel):
    """Reduction of tensor ``x_name`` into ``y_name`` over ``axes`` (indices of x's dims).

    ``y_kept_strides[i]``: the output stride for kept input dim i (any value for reduced dims).
    ``slots``: (y index, x index) positions of the pointers in calculate's order.
    """

    def __init__(self, handle, x_desc, y_kept_strides, axes, op: str, slots=(0, 1)):
        super().__init__(handle)
        from ..cuda import runtime

        sm = runtime.properties(handle.device_id)["sm_count"]
        dtype = x_desc.dtype
        p = plan_reduce(x_desc.shape, x_desc.strides, y_kept_strides, axes, dtype, sm, op)
        self.plan = p
        self._slots = slots
        self.launches = self._build(handle, p, slots)
        self.workspace_size = p.workspace
        # a packed column plan needs a 16-byte aligned x: keep the scalar plan for other pointers
        self.fallback = None
        if p.kind in ("cols", "tile") and p.vec > 1:
            q = plan_reduce(x_desc.shape, x_desc.strides, y_kept_strides, axes, dtype, sm, op, col_vec=False)
            self.fallback = self._build(handle, q, slots)
            self.workspace_size = max(p.workspace, q.workspace)
            self.x_slot = slots[1]
            self.launch = self._launch_checked
        if p.last:
            # stream -> (device memory, Launch with its ticket array), for the most recent streams
            self._tickets = LRU(TICKET_STREAMS, release_tickets)
            self.launch = self._launch_last

    def _launch_last(self, ptrs, ws_ptr, rt, stream):
        hit = self._tickets.get(stream)
        if hit is None:
            hit = self._ticket_launch(stream)
            self._tickets.put(stream, hit)
        hit[1](ptrs, ws_ptr, stream)

    def _ticket_launch(self, stream):
        """The one-launch kernel bound to a fresh ticket array for ``stream`` (zeroed on it)."""
        from ..cuda import runtime

        cp = runtime.cupy()
        p = self.plan
        gx = p.grid[0]
        # tickets (one per row), then for LAST = 3 the 64-bit flagged partial slots (S x M)
        nbytes = 4 * (gx + (gx & 1)) + (8 * p.S * p.M if p.last == 3 else 0)
        mem = cp.cuda.alloc(nbytes)
        cp.cuda.runtime.memsetAsync(mem.ptr, 0, nbytes, stream)
        base = self.launches[0]
        ws = ctypes.c_void_p(0) if p.last == 3 else Slot("ws")
        args = [Slot(self._slots[0]), Slot(self._slots[1]), ws, p.meta, ctypes.c_void_p(mem.ptr)]
        return mem, Launch(base.fn_ptr, base.grid, base.block, args)

    @staticmethod
    def _build(handle, p: ReducePlan, slots):
        if p.kind == "none":
            return []
        names = [p.kernel] + ([p.finish] if p.finish else [])
        mod = get_module(REDUCE_SOURCE, names, handle.device_id)
        ys, xs = slots
        if p.kind == "tile":
            return [Launch(mod.ptr[p.kernel], p.grid, p.block, [Slot(ys), Slot(xs), p.meta], shmem=p.shmem)]
        ws = Slot("ws") if p.workspace else ctypes.c_void_p(0)
        args = [Slot(ys), Slot(xs), ws, p.meta]
        if p.kind == "rows":  # the ticket array (bound per stream by _ticket_launch when p.last)
            args.append(ctypes.c_void_p(0))
        out = [Launch(mod.ptr[p.kernel], p.grid, p.block, args)]
        if p.finish:
            out.append(Launch(mod.ptr[p.finish], p.finish_grid, p.finish_block, [Slot(ys), Slot("ws"), p.meta]))
        return out

    def _launch_checked(self, ptrs, ws_ptr, rt, stream):
        lns = self.launches if ptrs[self.x_slot] % 16 == 0 else self.fallback
        for ln in lns:
            ln(ptrs, ws_ptr, stream)

    def launch(self, ptrs, ws_ptr, rt, stream):
        for ln in self.launches:
            ln(ptrs, ws_ptr, stream)


# --------------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------------
def reduce_numpy(x: np.ndarray, axes: tuple, op: str, dtype: DType) -> np.ndarray:
    """The reduction in the accumulator type (kept dims kept as size 1)."""
    # halves through halfconv.to_f32 (NumPy's own f16 -> f32 cast goes element by element)
    a = to_f32(x) if dtype in (DType.F16, DType.BF16) else x.astype(acc_numpy(dtype), copy=False)
    axes = tuple(axes)
    if op in ("sum", "mean"):
        # NumPy sums a contiguous trailing block pairwise (error ~ log n), but any other layout
        # sequentially (error ~ n): a column or multi-axis f32 sum of a few thousand terms that
        # cancel can miss the f32 tolerance. Those accumulate in float64 (about 2x the time of
        # the f32 loop, still within 3x torch on the CPU); the trailing case keeps f32.
        nd = a.ndim
        trailing = axes == tuple(range(nd - len(axes), nd)) and a.flags.c_contiguous
        acc = a.dtype if trailing or a.dtype == np.float64 or not is_float(dtype) else np.float64
        s = np.add.reduce(a, axis=axes, keepdims=True, dtype=acc)
        if op == "sum":
            return s
        n = math.prod(x.shape[i] for i in axes)
        with np.errstate(invalid="ignore", divide="ignore"):
            return s / s.dtype.type(n) if n else np.full(s.shape, np.nan, dtype=s.dtype)
    # max: NaN propagates (np.maximum does)
    return np.maximum.reduce(a, axis=axes, keepdims=True)


def store(out: np.ndarray, value: np.ndarray, dtype: DType) -> None:
    """Write ``value`` (keepdim-shaped) into ``out`` (any shape with the same element count)."""
    if out.size == 0:
        return
    out[...] = value.reshape(out.shape).astype(to_numpy(dtype))
