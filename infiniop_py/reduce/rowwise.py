"""Planning and launching the row-wise kernels (softmax family, cross entropy; ``ROWWISE_FILES``).

A "row" is the line of elements along ``dim``; every other dim enumerates rows. An operator
names its row *mode* (``softmax``, ``log_softmax``, ``causal``, ``ce`` or ``ce_loss``: the
kernels' ``RW_<MODE>`` constant) and describes its rows with a ``RowLayout``; ``ROW_RULES``, an
ordered rule table (``infiniop_py.planner``), picks the kernel from the mode, the dtype and the
row length. docs/perf/reductions.md gives the measurements behind each rule id.
"""

from __future__ import annotations

import ctypes
import math
import struct
from dataclasses import dataclass

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..cuda.launch import device_limits, opt_in
from ..dtypes import DType, acc_size, itemsize
from ..layout import MAXD, collapse
from ..planner import Rule, always, first_match
from ..status import Status, error
from . import HERE, REDUCE_CUH
from .plan import pack_dim_meta, pow2ceil

ROWWISE_FILES = ("rowwise.cuh", "row_softmax.cu", "row_warp.cu", "row_lse.cu")  # in this order
ROWWISE_SOURCE = REDUCE_CUH + "".join((HERE / name).read_text() for name in ROWWISE_FILES)

SOFTMAX = ("softmax", "log_softmax")  # the modes of the softmax-only kernels
CE = ("ce", "ce_loss")  # the modes that write one value per row (cross entropy)
RAW_MIN_VECTORS = 4 * 512  # row_softmax: longer 16-bit rows cache raw packs
SHORT_MAX_PACKS = {4: 512, 2: 128}  # row_softmax_short: rows of at most this many packs, by element size
HYB_MIN_N, HYB_MAX_N = 16385, 65536  # row_softmax_hyb: row lengths
HYB_MAX_SMEM = 200 * 1024  # row_softmax_hyb: dynamic shared memory of one block at most
LSE_MIN_PACKS = 256  # row_lse: rows of at least this many packs
WARP_MINB = {8: 8, 16: 5, 32: 3}  # row_softmax_warp: blocks of 128 threads per SM in __launch_bounds__


def vec_of(dtype: DType) -> int:
    return 16 // itemsize(dtype)


@dataclass(frozen=True)
class RowProblem:
    """``rows`` rows of ``n`` elements of ``dtype`` in ``mode``; ``along``: the dim is the input's
    fastest (else the column kernel); ``vec``: elements per 16-byte pack on the packed path (1:
    scalar loads); ``ti``: the C type of cross-entropy labels."""

    dtype: DType
    mode: str
    n: int
    rows: int
    vec: int
    along: bool = True
    ti: str = "int"

    @property
    def packed(self) -> bool:
        return self.along and self.vec > 1

    @property
    def size(self) -> int:
        return itemsize(self.dtype)

    @property
    def packs(self) -> int:  # whole 16-byte packs at the best alignment
        return self.n // self.vec

    @property
    def vectors(self) -> int:  # row_softmax's cache slots
        return -(-max(self.n, 1) // self.vec)

    def targs(self) -> str:
        return f"{ctype(self.dtype)}, RW_{self.mode.upper()}"


@dataclass(frozen=True)
class RowLaunch:
    """One kernel launch over the rows: ``ne`` goes to RowMeta.ne, ``smem`` is dynamic shared memory."""

    kernel: str
    grid: tuple
    block: tuple
    ne: int = 0
    smem: int = 0


@dataclass(frozen=True)
class Column:
    """``col_softmax``: one thread per row, neighbouring threads on neighbouring rows (coalesced)."""

    threads: int = 256

    def launch(self, p: RowProblem) -> RowLaunch:
        return RowLaunch(f"col_softmax<{p.targs()}, {p.ti}>", (-(-p.rows // self.threads),), (self.threads,))


@dataclass(frozen=True)
class Stream:
    """``row_lse``: the row streamed once, an online (max, sum) per batch of ``packs`` packs. A warp
    per row from ``warps`` rows on (8 rows per block), else the power of two that makes about that
    many warps, at most ``max_threads`` and no more than the packs need."""

    packs: int = 4
    warps: int = 4096
    max_threads: int = 256

    def launch(self, p: RowProblem) -> RowLaunch:
        G = 32 * max(1, min(self.max_threads // 32, self.warps // max(1, p.rows)))
        G = min(G, max(32, pow2ceil(-(-p.packs // self.packs))))
        G = max(32, min(self.max_threads, 1 << (G.bit_length() - 1)))
        rpb = self.max_threads // 32 if G == 32 else 1
        return RowLaunch(f"row_lse<{p.targs()}, {p.ti}, {self.packs}>", (-(-p.rows // rpb),), (G, rpb))


@dataclass(frozen=True)
class Hybrid:
    """``row_softmax_hyb``: a block per row, ``packs`` packs per thread in registers and the rest of
    the row in shared memory; 256 (f32) / 192 (16-bit) threads, fewer where the packs need fewer,
    1024 where the shared part would not fit."""

    packs: int = 8

    def launch(self, p: RowProblem) -> RowLaunch:
        need = -(-p.packs // self.packs)  # threads that hold the row in registers alone
        G = min(256 if p.size == 4 else 192, max(32, -(-need // 32) * 32))
        S = max(0, -(-p.packs // G) - self.packs)
        if S * G * 16 > HYB_MAX_SMEM:
            G = 1024
            S = max(0, -(-p.packs // G) - self.packs)
        kernel = f"row_softmax_hyb<{p.targs()}, {self.packs}>"
        return RowLaunch(kernel, (p.rows,), (G,), ne=S, smem=S * G * 16)


@dataclass(frozen=True)
class Short:
    """``row_softmax_short``: L lanes per row (32 / L rows per warp), P packs per lane, every size a
    template constant. L: the power of two (4-32) at or above packs / 2 (f32) or packs (16-bit);
    P: the fewest of 1, 2, 4, 8, 16 that cover the row (8 and 16 with 32 lanes only). At 16 packs
    per lane (f32 rows of 257-512 packs): one warp per block, packs from a 128-byte boundary."""

    def launch(self, p: RowProblem) -> RowLaunch:
        L = min(32, max(4, pow2ceil(-(-p.packs // (2 if p.size == 4 else 1)))))
        P = next(q for q in (1, 2, 4, 8, 16) if L * q >= p.packs and (q < 8 or L == 32))
        wpb, H = (1, 8) if P == 16 else (4, 0)
        rpb = wpb * (32 // L)
        return RowLaunch(f"row_softmax_short<{p.targs()}, {L}, {P}, {H}>", (-(-p.rows // rpb),), (32, wpb), ne=1)


@dataclass(frozen=True)
class Warp:
    """``row_softmax_warp``: a warp per row, P = 8, 16 or 32 packs per lane (the fewest that hold the
    row), 4 rows per block; at 16 packs one row per block with the packs from a 128-byte boundary
    (AL); exponentials as one FFMA and one ex2 (SH) for softmax, and for log_softmax at 32 packs.
    ``nc``: the packs by ld.global.nc loads (NC), exp_ftz(v - m), one row per block."""

    nc: bool = False

    def launch(self, p: RowProblem) -> RowLaunch:
        P = next(q for q in (8, 16, 32) if 32 * q >= p.packs)
        al, sh = int(P == 16), int(not self.nc and (p.mode == "softmax" or P == 32))
        tail = ", 0, 0, 1" if self.nc else f", {al}, 1" if sh else ", 1" if al else ""
        wpb = 1 if P == 16 or self.nc else 4
        kernel = f"row_softmax_warp<{p.targs()}, {P}, {WARP_MINB[P]}{tail}>"
        return RowLaunch(kernel, (-(-p.rows // wpb),), (32, wpb), ne=1)


@dataclass(frozen=True)
class Cached:
    """``row_softmax``: a row per group of G threads (a warp with 4 rows per block, or a block),
    cached in registers: MAXE vectors per thread (32 values; 8 raw 16-bit packs with ``raw``; 4
    for f64), G the fewest multiple of 32 that holds the row (1024 at most, then a loop mode)."""

    raw: bool = False

    def launch(self, p: RowProblem) -> RowLaunch:
        v = p.vec
        me = 4 if p.dtype is DType.F64 else 8 if self.raw else max(1, 32 // v)
        per = -(-p.vectors // me)  # threads the row needs
        G = max(32, -(-per // 32) * 32)
        ne = -(-p.vectors // G) if G <= 1024 else 0  # 0: loop mode
        G = min(G, 1024)
        rpb = 4 if G == 32 else 1
        kernel = f"row_softmax<{p.targs()}, {v}, {me}, {p.ti}, {int(self.raw)}>"
        return RowLaunch(kernel, (-(-p.rows // rpb),), (G, rpb), ne=ne)


ROW_RULES = (
    Rule("column", lambda p: not p.along, Column()),
    Rule("ce-stream", lambda p: p.packed and p.mode in CE and p.packs >= LSE_MIN_PACKS, Stream()),
    Rule(
        "softmax-hybrid",
        lambda p: p.packed and p.mode in SOFTMAX and p.size <= 4 and HYB_MIN_N <= p.n <= HYB_MAX_N,
        Hybrid(),
    ),
    Rule(
        "softmax-short",
        lambda p: p.packed and p.mode in SOFTMAX and p.size <= 4 and p.packs <= SHORT_MAX_PACKS[p.size],
        Short(),
    ),
    Rule("softmax-warp-nc", lambda p: p.packed and p.mode in SOFTMAX and p.size == 2 and 224 < p.packs <= 256, Warp(nc=True)),
    Rule(
        "softmax-warp",
        lambda p: p.packed and p.mode in SOFTMAX and p.size == 2 and (p.packs <= 512 or 896 < p.packs <= 1024),
        Warp(),
    ),
    Rule("row-raw", lambda p: p.packed and p.size == 2 and p.vectors > RAW_MIN_VECTORS, Cached(raw=True)),
    Rule("row-cached", always, Cached()),
)


def plan_row(p: RowProblem) -> tuple[str, RowLaunch]:
    """(rule id, launch) of the first rule of ``ROW_RULES`` that applies to ``p``."""
    rule, config = first_match(ROW_RULES, p, "row-wise")
    return rule, config.launch(p)


def kernel_names(mode: str, dtype: DType, ti: str = "int") -> list[str]:
    """Every kernel a row-wise plan of (mode, dtype, ti) can launch: the plans depend on the row
    length only through its whole 16-byte packs, the cache slots and the hybrid kernel's range,
    so these lengths reach every rule's kernels."""
    vec = vec_of(dtype)
    lengths = [q * vec for q in range(2, 1026)] + [HYB_MIN_N, HYB_MAX_N, HYB_MAX_N + vec]
    lengths += [RAW_MIN_VECTORS * vec, (RAW_MIN_VECTORS + 1) * vec]
    problems = [RowProblem(dtype, mode, n, 1, vec, True, ti) for n in lengths]
    problems += [RowProblem(dtype, mode, 2, 1, 1, True, ti), RowProblem(dtype, mode, 2, 1, 1, False, ti)]
    names = [plan_row(p)[1].kernel for p in problems]
    if mode == "ce_loss":
        names.append(f"ce_loss_finish<{ctype(dtype)}>")
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class RowFamily:
    """What a row-wise NVIDIA factory declares: its mode, dtypes and label C types."""

    mode: str
    dtypes: frozenset
    tis: tuple = ("int",)

    def compile_units(self):
        names = [n for dt in sorted(self.dtypes) for ti in self.tis for n in kernel_names(self.mode, dt, ti)]
        return [(ROWWISE_SOURCE, list(dict.fromkeys(names)))]


def row_factory(factory, mode: str, dtypes, tis=("int",)):
    """Declare ``factory`` a row-wise NVIDIA factory of ``mode``: ``factory.rows`` (the planner-vs-
    compile-set test sweeps it) and ``factory.compile_units`` (every kernel its plans can launch)."""
    factory.rows = RowFamily(mode, frozenset(dtypes), tuple(tis))
    factory.compile_units = factory.rows.compile_units
    return factory


@dataclass
class RowLayout:
    """What the planner needs: row length and strides along dim, row dims with 3 stride sets."""

    N: int
    sx: int
    sy: int
    row_shape: tuple
    row_strides: list  # [x, y, target] per row dim
    collapse_rows: bool = True  # False for causal (the seq index must stay innermost)
    seq: int = 1
    shift: int = 0


def split_dim(shape, strides_list, dim):
    """Row dims (every dim but ``dim``) and their strides for each operand."""
    keep = [i for i in range(len(shape)) if i != dim]
    return tuple(shape[i] for i in keep), [[s[i] for i in keep] for s in strides_list]


class RowwiseKernel(CudaKernel):
    """Row-wise work of ``mode`` on the rows of ``x``.

    slots: pointer positions (y, x, target) in calculate's order (None: absent, passes 0).
    With 16-byte packs, a second plan on scalar loads serves a y whose alignment differs from x's.
    """

    def __init__(self, handle, lay: RowLayout, dtype: DType, mode: str, slots, ti: str = "int", loss_slot=None):
        super().__init__(handle)
        R = math.prod(lay.row_shape)
        if R == 0 or (lay.N == 0 and mode not in CE):
            return
        if lay.collapse_rows:
            rshape, rstr = collapse(lay.row_shape, lay.row_strides)
        else:
            rshape, rstr = tuple(d for d in lay.row_shape), [tuple(s) for s in lay.row_strides]
        if len(rshape) > MAXD:
            raise error(Status.NOT_IMPLEMENTED, f"more than {MAXD} non-mergeable row dims")
        xs = [s for d, s in zip(rshape, rstr[0]) if d > 1]
        along = lay.N <= 1 or not xs or lay.sx <= min(xs)
        writes_rows = mode not in CE
        N = lay.N
        vec = vec_of(dtype)
        can_vec = (
            along
            and lay.sx == 1
            and N >= 2 * vec
            and (not writes_rows or (lay.sy == 1 and all((a - b) % vec == 0 for a, b in zip(rstr[0], rstr[1]))))
        )
        meta_rows = pack_dim_meta(rshape, rstr)
        ys, xs_slot, ts = slots
        tslot = Slot(ts) if ts is not None else ctypes.c_void_p(0)
        ws_slot = Slot("ws") if mode == "ce_loss" else ctypes.c_void_p(0)
        if mode == "ce_loss":
            self.workspace_size = 2 * R * acc_size(dtype)
        plans = [plan_row(RowProblem(dtype, mode, N, R, v, along, ti))[1] for v in ([vec, 1] if can_vec else [1])]
        names = [pl.kernel for pl in plans]
        if mode == "ce_loss":
            names.append(f"ce_loss_finish<{ctype(dtype)}>")
        mod = get_module(ROWWISE_SOURCE, names, handle.device_id)
        ysl = Slot(ys) if ys is not None else ctypes.c_void_p(0)
        self.main = []
        for pl in plans:
            if pl.smem and not opt_in(mod.kernels[pl.kernel], pl.smem, device_limits(handle.device_id)):
                raise error(Status.NOT_IMPLEMENTED, f"{pl.kernel}: {pl.smem} bytes of shared memory exceed the device's")
            meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, pl.ne)
            self.main.append(Launch(mod.ptr[pl.kernel], pl.grid, pl.block, [ysl, Slot(xs_slot), tslot, ws_slot, meta], pl.smem))
        self.vec_ok = can_vec
        self.xy = (xs_slot, ys if writes_rows else None)
        self.finish = None
        if mode == "ce_loss":
            self.finish = Launch(mod.ptr[names[-1]], (1,), (1024,), [Slot(loss_slot), Slot("ws"), ctypes.c_longlong(R)])
        self.launch = self._go

    def launch(self, ptrs, ws_ptr, rt, stream):  # empty: nothing to do
        return

    def _go(self, ptrs, ws_ptr, rt, stream):
        main = self.main[0]
        if self.vec_ok:
            xi, yi = self.xy
            if yi is not None and (ptrs[xi] - ptrs[yi]) % 16:
                main = self.main[1]
        main(ptrs, ws_ptr, stream)
        if self.finish is not None:
            self.finish(ptrs, ws_ptr, stream)
