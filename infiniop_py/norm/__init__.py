"""Shared pieces of the normalization family (ops.md §3): validation helpers, NumPy helpers
and the NVIDIA planning of the row-wise kernels in ``norm.cuh``.

Row-wise ops (rms_norm, layer_norm and their backward passes) treat every leading index as a
row of length D (the last dim). A group of TPR threads keeps a row in registers (NORM_NP packs of
VEC elements per thread); rows longer than that capacity go to a block-per-row kernel that
re-reads the row from global memory. Weight gradients are reduced in two deterministic stages:
per-block f32 (f64 for f64) partial rows in the workspace, then ``norm_col_sum``.
"""

from __future__ import annotations

import ctypes
import math
import struct
from pathlib import Path

import numpy as np

from ..cuda.compiler import Launch, Slot
from ..dtypes import DType
from ..layout import collapse
from ..spec import Checker
from ..status import Status

NORM_CUH = (Path(__file__).parent / "norm.cuh").read_text()
NP = 4  # NORM_NP (forward kernels)
NP_BWD = 2  # NORM_NP_BWD (backward kernels)
MAXL = 8  # NORM_MAXL
MAXT = 7  # NORM_MAXT
TPRS = (32, 64, 128, 256, 512, 1024)  # threads per row instantiated
ALIGN = 16


def source(kernel_cu: Path) -> str:
    """An operator's CUDA source: norm.cuh followed by its kernel.cu."""
    return NORM_CUH + '\n#line 1 "kernel.cu"\n' + kernel_cu.read_text()


# -- validation --------------------------------------------------------------------------------
def check_positive(check: Checker, name: str) -> float:
    v = check.attrs[name]
    if not (math.isfinite(v) and v > 0):
        check.fail(Status.BAD_PARAM, f"attribute '{name}' must be finite and > 0, got {v!r}")
    return v


def check_shape(check: Checker, name: str, shape) -> None:
    d = check[name]
    if d is not None and tuple(d.shape) != tuple(shape):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(d.shape)} must be {list(shape)}")


def check_rows(check: Checker, ref: str, *names: str) -> tuple[int, ...]:
    """ref has ndim >= 1 and a non-empty last dim; names share its shape."""
    d = check[ref]
    if d.ndim < 1:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{ref}' must have ndim >= 1, got a 0-d tensor")
    if d.shape[-1] == 0:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{ref}' has an empty normalized (last) dim: shape {list(d.shape)}")
    check.same_shape(ref, *names)
    return tuple(d.shape)


def check_std_shape(check: Checker, name: str, shape) -> None:
    """input_std_deviation: shape[:-1] or shape[:-1] + (1,)."""
    d = check[name]
    ok = (tuple(shape[:-1]), tuple(shape[:-1]) + (1,))
    if tuple(d.shape) not in ok:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(d.shape)} must be {list(ok[0])} or {list(ok[1])}")


def acc_numpy(dtype: DType):
    return np.float64 if dtype is DType.F64 else np.float32


# -- NVIDIA planning ---------------------------------------------------------------------------
def rows_meta(shape, row_tensors: dict, dstrides: dict, order: list) -> tuple[bytes, int]:
    """Bytes of NormRows and the row count.

    shape: the row tensors' shape [..., D]; row_tensors: {name: leading strides (len ndim-1)};
    dstrides: {name: stride along D} for every tensor; order: tensor names in spec order (the
    index of a name is its slot in lstride/dstride).
    """
    lead = tuple(shape[:-1])
    D = shape[-1]
    rows = math.prod(lead)
    names = [n for n in order if n in row_tensors]
    nl, lshape, lstr = 0, [], {}
    if rows > 0 and names:
        cs, css = collapse(lead, [tuple(row_tensors[n]) for n in names])
        nl = len(cs)
        lshape = list(cs)
        lstr = dict(zip(names, css))
    if nl > MAXL:
        raise ValueError("too many non-mergeable leading dims")
    blob = struct.pack("<qq", rows, D)
    blob += struct.pack(f"<{MAXL}q", *(lshape + [1] * (MAXL - nl)))
    for i in range(MAXT):
        st = list(lstr.get(order[i], ())) if i < len(order) else []
        blob += struct.pack(f"<{MAXL}q", *(st + [0] * (MAXL - len(st))))
    ds = [dstrides.get(order[i], 0) if i < len(order) else 0 for i in range(MAXT)]
    blob += struct.pack(f"<{MAXT}qii", *ds, nl, 0)
    return blob, rows


def pick_tpr(D: int, vec: int, np_: int = NP) -> int | None:  # noqa: N803
    """Threads per row so that a row fits in registers (TPR * np_ * vec >= D), or None (too long)."""
    for t in TPRS:
        if t * np_ * vec >= D:
            return t
    return None


def rows_per_block(tpr: int) -> int:
    return 1 if tpr >= 256 else 256 // tpr


def vec_ok(D: int, vec: int, unit: list, lead: list) -> bool:  # noqa: N803
    """Vector path: D % vec == 0, unit-stride last dims, leading strides multiples of vec."""
    return vec > 1 and D % vec == 0 and all(s == 1 for s in unit) and all(s % vec == 0 for st in lead for s in st)


class Pick:
    """A vectorised launch (when planned), used when every listed pointer is aligned to its pack
    size, else the scalar launch. aligned: [(pointer index, bytes)]."""

    def __init__(self, vec: Launch | None, scalar: Launch, aligned: list):
        self.vec, self.scalar, self.aligned = vec, scalar, aligned

    def __call__(self, ptrs, ws, stream):
        if self.vec is not None:
            for i, a in self.aligned:
                if ptrs[i] % a:
                    break
            else:
                self.vec(ptrs, ws, stream)
                return
        self.scalar(ptrs, ws, stream)


def align_up(n: int, a: int = 256) -> int:
    return -(-n // a) * a


class RowPlan:
    """Planning shared by the row-wise kernels.

    order: tensor names in spec order (slot i of NormRows is order[i]); rows: names of the
    [..., D] tensors; row_extra: tensors indexed per row only (layer_norm's std); params: [D]
    vectors (weight, bias, and weight gradients). The vector path uses VEC = 16 bytes of the row
    dtype when the layouts allow it (``vec`` > 1, ``vec_tpr``); the scalar path uses ``tpr``
    threads per row, or the block-per-row kernel when ``tpr`` is None.
    """

    def __init__(self, info, order, rows, params=(), row_extra=(), np_: int = NP):
        t = info.tensors
        order = list(order)
        ref = t[rows[0]]
        self.shape = tuple(ref.shape)
        self.D = D = self.shape[-1]
        nd = len(self.shape)
        present = [n for n in rows if t.get(n) is not None]
        lead = {n: t[n].strides[: nd - 1] for n in present}
        for n in row_extra:
            if t.get(n) is not None:
                lead[n] = t[n].strides[: nd - 1]
        dstr = {n: t[n].strides[-1] for n in present}
        for n in params:
            if t.get(n) is not None:
                dstr[n] = t[n].strides[0]
        self.meta, self.rows = rows_meta(self.shape, lead, dstr, order)
        vec = 16 // ref.itemsize
        units = [dstr[n] for n in present] if D > 1 else []
        ok = vec_ok(D, vec, units, [lead[n] for n in present])
        self.vec = vec if ok else 1
        self.vec_tpr = pick_tpr(D, vec, np_) if ok else None
        if self.vec_tpr is None:
            self.vec = 1
        self.tpr = pick_tpr(D, 1, np_)
        self.aligned = [(order.index(n), vec * t[n].itemsize) for n in present]
        self.aligned += [(order.index(n), vec * t[n].itemsize) for n in params if t.get(n) is not None and t[n].strides[0] == 1]

    @staticmethod
    def groups(rows: int, tpr: int) -> int:
        return -(-rows // rows_per_block(tpr))

    @staticmethod
    def block(tpr: int) -> int:
        return tpr * rows_per_block(tpr)


class Seq:
    """Launches run in order as one callable (ptrs, ws, stream)."""

    def __init__(self, *launches):
        self.launches = launches

    def __call__(self, ptrs, ws, stream):
        for launch in self.launches:
            launch(ptrs, ws, stream)


def sm_count(handle) -> int:
    from ..cuda.runtime import properties

    return int(properties(handle.device_id)["sm_count"])


def bwd_per_sm(mod, expr: str, tpr: int | None) -> int | None:
    """Resident blocks per SM of a backward stage-1 kernel (None: the default guess)."""
    if tpr is None:
        return None
    fn = getattr(mod, "kernels", {}).get(expr)
    return resident_blocks(fn, RowPlan.block(tpr)) if fn is not None else None


def persistent_grid(plan: RowPlan, tpr: int | None, sms: int, per_sm: int | None = None) -> tuple[int, int]:
    """(blocks, threads) of a backward stage 1: one wave of resident blocks (``per_sm`` per SM,
    from ``resident_blocks``; default about 1024 threads per SM), so the partial rows stay few;
    tpr None is the block-per-row kernel."""
    if tpr is None:
        return max(1, min(plan.rows, sms)), 1024
    block = RowPlan.block(tpr)
    if per_sm is None:
        per_sm = max(1, 1024 // block)
    return max(1, min(RowPlan.groups(plan.rows, tpr), sms * per_sm)), block


def forward_grid(plan: RowPlan, tpr: int | None, sms: int, r: int = 1) -> tuple[int, int]:
    """(blocks, threads) of a forward kernel; r rows per row group and step (fwd_rows)."""
    if tpr is None:
        return max(1, min(plan.rows, sms * 64)), 1024
    return max(1, min(-(-plan.rows // (rows_per_block(tpr) * r)), 1 << 30)), RowPlan.block(tpr)


def fwd_rows(tpr: int | None) -> int:
    """Rows each row group of a forward kernel loads at once (the template parameter R).

    Short rows (TPR <= 64: f16 D <= 2048, f32 D <= 1024) load two rows per step so that a
    thread has twice the bytes in flight; longer rows already have enough.
    """
    if tpr is None or tpr > 256:
        return 1
    return 2 if tpr <= 64 else 1


def resident_blocks(fn, block: int, dyn_smem: int = 0) -> int:
    """Blocks of ``block`` threads of CuPy function ``fn`` that fit on one SM at once (from its
    register and static shared-memory use plus ``dyn_smem`` dynamic bytes; H100/H200 limits).
    1 when the figures are missing."""
    try:
        regs = int(fn.num_regs)
        smem = int(fn.shared_size_bytes)
    except Exception:
        return 1
    warps = -(-block // 32)
    warp_regs = -(-max(regs, 1) * 32 // 256) * 256
    by_regs = (65536 // warp_regs) // warps
    by_threads = 2048 // (warps * 32)
    by_smem = (228 * 1024) // (smem + dyn_smem + 1024)
    return max(1, min(by_regs, by_threads, by_smem, 32))


# -- cp.async pipelined row kernels (the ``*_cp`` kernels; norm.cuh) ----------------------------
PIPE_SMEM_MAX = 200 * 1024  # dynamic shared memory of one block at most
BWD_STAGES = 3  # ring depth of the backward stage 1 (rows in flight per group: stages - 1)
FWD_PIPE_MAX_TPR = 64  # forward: pipelined only for short rows (f16 D <= 2048, f32 D <= 1024)
BWD_PIPE_MIN_TPR = 256  # backward: pipelined only for row groups of 256+ threads


def pipe_stages(kind: str, tpr: int | None, tensors: int, np_: int, fwd_stages: int = 3) -> int:
    """Ring depth S of a pipelined kernel (0: use the register-prefetch kernel).

    Measured on the H200 (docs/perf/norms.md): the forward ring is faster for short rows
    (TPR <= 64; ``fwd_stages`` is 2 for rms_norm, 3 for layer_norm) and 5-10 % slower for long
    ones; the backward ring (S = 3) pays off from 256-thread row groups on. S shrinks until the
    ring (S * tensors * np_ * block * 16 bytes) fits PIPE_SMEM_MAX."""
    if tpr is None:
        return 0
    if kind == "fwd":
        s = fwd_stages if tpr <= FWD_PIPE_MAX_TPR else 0
    else:
        s = BWD_STAGES if tpr >= BWD_PIPE_MIN_TPR else 0
    if s < 2:
        return 0
    s = min(s, 4)
    if kind == "bwd" and tpr >= 1024:
        s = 2  # 1024-thread groups: registers too tight for a deeper ring (spills)
    block = RowPlan.block(tpr)
    while s >= 2 and pipe_smem(s, tensors, np_, block) > PIPE_SMEM_MAX:
        s -= 1
    return s if s >= 2 else 0


def pipe_smem(stages: int, tensors: int, np_: int, block: int) -> int:
    return stages * tensors * np_ * block * 16


def allow_dyn_smem(fn, nbytes: int) -> bool:
    """Let CuPy kernel ``fn`` launch with ``nbytes`` of dynamic shared memory and prefer the
    largest shared-memory carveout. The opt-in is set whatever the size: static plus dynamic
    shared memory above 48 KiB needs it even when the dynamic part alone is 48 KiB.
    False when it cannot be set (the caller then plans the register-prefetch kernel)."""
    if fn is None:
        return nbytes <= 40 * 1024
    try:
        if int(fn.shared_size_bytes) + nbytes > 227 * 1024:
            return False
        fn.max_dynamic_shared_size_bytes = int(nbytes)
    except Exception:
        return False
    try:
        fn.preferred_shared_memory_carveout = 100
    except Exception:
        pass
    return True


def pipe_grid(plan: RowPlan, tpr: int, sms: int, fn, dyn_smem: int, block: int | None = None) -> tuple[int, int]:
    """(blocks, threads) of a persistent pipelined kernel: one wave of resident blocks of
    ``block`` threads (default ``RowPlan.block(tpr)``; row groups of tpr threads each)."""
    block = block or RowPlan.block(tpr)
    per_sm = resident_blocks(fn, block, dyn_smem) if fn is not None else max(1, 1024 // block)
    groups = -(-plan.rows // (block // tpr))
    return max(1, min(groups, sms * per_sm)), block


# Variant bits of the backward *_cp kernels (template parameter OPT; ops/*_backward/kernel.cu):
# 4 16-byte partial stores, 8 two 256-thread row groups per block. Chosen per row-group size
# (docs/perf/norms.md): 256-thread groups run two per block (8: half the partial rows, written
# through shared memory with coalesced stores), 512-thread groups store their partial rows with
# 16-byte stores (4); 1024-thread groups keep plain stores for layer_norm (4 spilled more there
# and measured 3 % slower) and use 4 for rms_norm.
BWD_OPTS = {"layer": {256: 8, 512: 4}, "rms": {256: 8, 512: 4, 1024: 4}}


def bwd_opt(kind: str, tpr: int | None) -> int:
    """OPT of a backward *_cp kernel (kind "layer" or "rms")."""
    return BWD_OPTS[kind].get(tpr, 0)


def bwd_block(tpr: int, opt: int) -> int:
    """Threads per block of a backward *_cp kernel (norm_bwd_block in norm.cuh)."""
    if tpr >= 256:
        return 512 if (opt & 8) and tpr == 256 else tpr
    return 256


def col_sum2_launch(fn_ptr: int, outs: list, D: int, nparts: int) -> Launch:  # noqa: N803
    """One launch of norm_col_sum2 for one or two (out slot, ws offset, out stride) triples."""
    o0 = outs[0]
    o1 = outs[1] if len(outs) > 1 else outs[0]
    return Launch(
        fn_ptr,
        (-(-D // 32), len(outs)),
        (1024,),
        [
            Slot(o0[0]),
            Slot(o1[0]),
            Slot("ws", o0[1]),
            Slot("ws", o1[1]),
            ctypes.c_longlong(D),
            ctypes.c_int(nparts),
            ctypes.c_longlong(o0[2]),
            ctypes.c_longlong(o1[2]),
        ],
    )


def acc_ctype(dtype: DType) -> str:
    return "double" if dtype is DType.F64 else "float"


def acc_size(dtype: DType) -> int:
    return 8 if dtype is DType.F64 else 4


def noop(ptrs, ws, rt, stream):
    return None
