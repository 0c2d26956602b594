"""Shared reduction framework (CPU and CUDA): reduce a strided tensor over any set of axes.

``REDUCE_CUH`` holds the reusable device helpers (warp/block reduce for sum and max, online
softmax max/sum merge, flat-index decomposition); row-wise kernels include it by text
(``source = REDUCE_CUH + my_kernel``). ``ReduceKernel`` plans and launches sum/max/mean over
any axes with arbitrary input and output strides:

- the kept dims and the reduced dims are collapsed separately (no copies, no permutation of
  data: only the index arithmetic is permuted);
- ``reduce_rows`` when the innermost reduced dim is the input's fastest (last-dim and full
  reductions): a warp per row for short rows, a block per row for long ones, 16-byte loads
  issued in batches of U = 8 per thread, groups sized so a thread owns about 16 packs;
  f16 / bf16 on that path use ``reduce_rows16`` (raw 32-bit words: two f32 sums per thread,
  max on packed pairs with max.NaN.{f16,bf16}x2) and, for rows of >= 2048 with >= 8 rows per
  SM, a warp per row (32 packs per lane, 4 rows per block); ``IOP_REDUCE_H16=0`` /
  ``IOP_REDUCE_WARP=0`` restore reduce_rows / the 64-thread rows;
- short contiguous f32 / f16 / bf16 rows (at most 256 16-byte packs: 2048 halves, 1024 f32)
  use ``reduce_rows_warp`` instead (round 9D): a warp per row, 4 rows per block, every lane's
  loads (up to 8 packs) issued before any is combined, no block barrier; (4, 512, 896) axis -1
  2.4-3.3 us kernel-only on the H200 against 3.7-4.4 with the 64-thread row blocks (torch
  3.1-4.0); ``IOP_REDUCE_RW=0`` restores the plans below;
- ``reduce_cols`` when a kept dim is the fastest (middle/outer and multi-axis reductions):
  threads read coalesced along the contiguous dim, each accumulating one output;
  ``reduce_cols_vec`` when that dim is contiguous and pack-aligned: 16-byte packs, one thread
  per 16 bytes of outputs (same per-output order, so bitwise identical to ``reduce_cols``);
- with too few outputs to fill the GPU, column plans become one-launch tiles
  (``reduce_cols_tile``: a block owns a tile of outputs and their whole reduced extent, its
  thread rows combined by a fixed shared-memory tree); row plans split the reduced extent into
  S chunks whose partials go to the workspace (the split grid is one wave at ~1024 resident
  threads per SM) and, with at most 32 outputs, one block of each row combines them in a fixed
  order in the same launch (integer tickets in descriptor-owned device memory, one array per
  stream, self-resetting); otherwise ``reduce_finish`` does in a second launch. Deterministic,
  no float atomics. ``IOP_REDUCE_COLS=split`` / ``IOP_REDUCE_FINISH=2pass`` restore the
  two-launch plans;
- the one-launch finish (``row_finish``'s LAST): 1 = each block writes its partial to the
  workspace, ``__threadfence`` + ``atomicAdd`` ticket, the last one combines; 3 (f16 / bf16 /
  f32 accumulators) = no fence: a block publishes {flag, partial} as one 64-bit store into
  descriptor-owned slots and the block that drew the last *start* ticket polls them;
  ``IOP_REDUCE_LASTMODE=fence|acqrel|flag`` picks one;
- f16 / bf16 full reductions (one contiguous row per output split over S blocks) read it by a
  grid-stride sweep (``reduce_rows16`` ILV = 1: thread g of S * 256 takes packs g, g + S * 256,
  ...) and finish with LAST = 3: 8192^2 34.0-34.3 us kernel-only on the H200 against 35.2-36.5
  with one contiguous chunk per block (``IOP_REDUCE_ILV=0``, which also restores LAST = 1).

Accumulation is in f32 for half types and f32, f64 for f64, int64 for integers (max only).
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..dtypes import DType, is_float, itemsize, to_numpy
from ..halfconv import to_f32
from ..layout import MAXD, collapse
from ..lru import LRU
from ..status import Status, error

HERE = Path(__file__).parent
REDUCE_CUH = (HERE / "reduce.cuh").read_text()
REDUCE_SOURCE = REDUCE_CUH + (HERE / "reduce_kernels.cu").read_text()

OPS = {"sum": ("SumOp", 0), "max": ("MaxOp", 0), "mean": ("SumOp", 1)}


def env_num(name: str, default, kind=int):
    """A numeric tuning switch (an environment variable read at descriptor create): ``default``
    when unset or empty, else the value as ``kind``; a value that is not a number is a
    BAD_PARAM error naming the variable."""
    v = os.environ.get(name, "")
    if v == "":
        return default
    try:
        return kind(v)
    except ValueError:
        raise error(
            Status.BAD_PARAM, f"tuning switch {name}={v!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None


def acc_size(dtype: DType) -> int:
    """Bytes of the accumulator type of ``dtype`` (Acc<T> in reduce.cuh)."""
    if dtype is DType.F64 or not is_float(dtype):
        return 8
    return 4


def pack_dim_meta(shape, strides_list) -> bytes:
    """Bytes of ``DimMeta`` (reduce.cuh): up to MAXD dims (innermost last), 3 stride sets."""
    nd = len(shape)
    if nd > MAXD:
        raise ValueError("too many dims")
    blob = struct.pack(f"<{MAXD}q", *(list(shape) + [1] * (MAXD - nd)))
    for k in range(3):
        st = list(strides_list[k]) if k < len(strides_list) else []
        blob += struct.pack(f"<{MAXD}q", *(st + [0] * (MAXD - len(st))))
    return blob + struct.pack("<ii", nd, 0)


def fit_dims(shape, strides_list):
    """Merge leading dims until at most MAXD remain (a merged dim is decomposed on the host
    only when it keeps the stride arithmetic exact; otherwise NOT_IMPLEMENTED)."""
    shape = list(shape)
    strides_list = [list(s) for s in strides_list]
    if len(shape) > MAXD:
        raise error(Status.NOT_IMPLEMENTED, f"more than {MAXD} non-mergeable dims are not supported")
    return tuple(shape), [tuple(s) for s in strides_list]


def _pow2ceil(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@dataclass
class ReducePlan:
    kind: str  # "rows", "cols" or "none" (no outputs)
    meta: bytes
    grid: tuple
    block: tuple
    vec: int
    S: int
    M: int
    L: int
    workspace: int
    U: int = 1  # rows: 16-byte packs loaded per thread before combining (reduce_rows' U)
    fin: int = 0  # threads of the one-block-per-output finish (0: reduce_finish, a warp per output)
    shmem: int = 0  # dynamic shared memory of the main kernel (tile plans)
    last: int = 0  # rows split, one launch (per-stream tickets): row_finish's LAST mode 1, 2 or 3
    h16: int = 0  # rows, f16/bf16 on the 16-byte path: reduce_rows16 (raw words, packed max)
    ldk: int = 0  # reduce_rows16's load instruction (r16_ld<LDK>)
    ilv: int = 0  # reduce_rows16 on one split contiguous row: grid-stride sweep (ILV = 1)
    rw: int = 0  # reduce_rows_warp: a warp per short contiguous row, NP = rw packs per lane per batch
    rwdep: int = -1  # reduce_rows_warp's DEP (combines depend on all NP loads); -1: 1 for sums, 0 for max


# split row plans over at most this many input bytes finish in their last block (one launch).
# Measured on the H200 (one process, alternating): faster at every size tried, (4,512,896) f32
# 14.7 vs 19.2 us and 8192^2 f16 37.8 vs 40.2 us, so there is no limit.
LAST_MAX_BYTES = 1 << 62


# reduce_rows16's load instruction (0 plain, 1 nc + L1::no_allocate, 2 + L2::256B, 3 + L2::128B)
LDK_DEFAULT = 0

# one-launch finish of split row plans (row_finish's LAST): 1 __threadfence + atomicAdd ticket
# per block, 2 one atom.acq_rel per block, 3 flagged 64-bit partial slots polled by the block
# that started last (float accumulators only; others use 1). IOP_REDUCE_LASTMODE=fence|acqrel|flag
# (a tuning switch). Default: 3 for the grid-stride half plans (ILV), 1 elsewhere. Measured on
# the H200, one process, graph replay (round 8A): with contiguous chunks the finish mode is
# within noise for sums (8192^2 f16 fence 35.8, acqrel 35.6, flag 36.2 us; f32 64.0 vs 64.8 us).
LAST_MODES = {"fence": 1, "acqrel": 2, "flag": 3}
LAST_DEFAULT = 1
LAST_DEFAULT_ILV = 3


def last_mode(dtype: DType, ilv: int = 0) -> int:
    default = LAST_DEFAULT_ILV if ilv else LAST_DEFAULT
    mode = LAST_MODES.get(os.environ.get("IOP_REDUCE_LASTMODE", ""), default)
    if mode == 3 and not (is_float(dtype) and acc_size(dtype) == 4):
        mode = 1
    return mode


# reduce_rows_warp (round 9D): a warp per short contiguous f32 / f16 / bf16 row (Ri <= 256
# 16-byte packs: f16 / bf16 2048, f32 1024 elements), NP 16-byte loads per lane issued before any
# is combined, RPB = 4 rows per block, no block barrier. Replaces, for those rows, the 64-thread
# blocks of one row each (rows of > 512: a two-warp block reduce, 1.75 packs per thread in f16
# at Ri = 896, loaded one after the other by the remainder loop), the 8-rows-per-block
# reduce_rows plan (rows of <= 512) and round 7's reduce_rows16 warp plan at Ri = 2048. H200,
# graph replay (kernel-only), one process, round 9D run 1: (4, 512, 896) last-dim sum f16 3.71 ->
# 2.46 us (torch 3.09), f32 3.94 -> 2.98 (torch 3.62), max f32 4.38 -> 3.21 (torch 3.70); 8192 x
# 512 f16 6.51 -> 4.46; 2048 x 2048 f16 5.10 -> 4.51. IOP_REDUCE_RW (tuning switch): "0" restores
# the old plans, "mid" only takes rows of > 512 that round 7's rule leaves (run 1's default);
# IOP_REDUCE_RWB rows per block; IOP_REDUCE_RWNP packs per lane per batch (1, 2, 4 or 8; default
# the fewest that hold the row in one batch, at most 8); IOP_REDUCE_RWDEP 0 / 1 forces the
# kernel's DEP (every combine made to depend on all NP loads; default 1 for sum / mean, where it
# measured 0.05-0.15 us faster, 0 for max, where it measured 0.1-0.2 us slower).
RW_NP = (1, 2, 4, 8)
RW_RPB = 4


def row_warp(dtype: DType, vec: int, Ri: int, Ro: int, M: int, L: int, sm_count: int):  # noqa: N803
    """(NP, rows per block) of the warp-per-row plan for this row shape, or None."""
    mode = os.environ.get("IOP_REDUCE_RW", "1")
    if mode == "0" or dtype not in (DType.F32, DType.F16, DType.BF16) or vec == 1 or Ro != 1:
        return None
    nv = -(-Ri // vec)
    if nv > 32 * RW_NP[-1]:
        return None
    if mode == "mid" and (
        L <= 512
        or (dtype is not DType.F32 and Ri >= 2048 and M >= 8 * sm_count and os.environ.get("IOP_REDUCE_WARP", "1") != "0")
    ):
        return None
    np_ = env_num("IOP_REDUCE_RWNP", 0) or min(RW_NP[-1], _pow2ceil(-(-nv // 32)))
    if np_ not in RW_NP:
        raise ValueError(f"IOP_REDUCE_RWNP must be one of {RW_NP}")
    rpb = env_num("IOP_REDUCE_RWB", RW_RPB)
    return np_, max(1, min(16, rpb))


def _tuning() -> str:
    """``IOP_REDUCE_PLAN=v1`` (a tuning switch for A/B benchmarks) restores the first row plan:
    one pack per loop step, 128/256-thread groups by L, grids sized for 2048 threads per SM and
    a warp per output in the finish."""
    return os.environ.get("IOP_REDUCE_PLAN", "")


def plan_reduce(shape, x_strides, y_strides, axes, dtype: DType, sm_count: int, col_vec: bool = True) -> ReducePlan:
    """Plan a reduction of ``shape`` over ``axes``; ``y_strides[i]`` is the output stride of kept
    input dim i (ignored for reduced dims). ``col_vec``: a column plan may use 16-byte packs
    (``reduce_cols_vec``; the caller falls back to ``col_vec=False`` when x is not aligned)."""
    ndim = len(shape)
    axes = set(axes)
    kept = [i for i in range(ndim) if i not in axes]
    red = [i for i in range(ndim) if i in axes]
    M = math.prod(shape[i] for i in kept)
    L = math.prod(shape[i] for i in red)
    if M == 0:
        return ReducePlan("none", b"", (1,), (1,), 1, 1, 0, L, 0)
    kshape, (kin, kout) = collapse([shape[i] for i in kept], [[x_strides[i] for i in kept], [y_strides[i] for i in kept]])
    if L == 0:
        rshape, rstr = (), ()
    else:
        rshape, (rstr,) = collapse([shape[i] for i in red], [[x_strides[i] for i in red]])
    kshape, (kin, kout) = fit_dims(kshape, [kin, kout])
    target = sm_count * 2048  # resident threads that fill the GPU
    kept_min = kin[-1] if kshape else None
    red_min = rstr[-1] if rshape else None
    rows = not kshape or (rshape and red_min <= kept_min) or L <= 1
    kept_meta = pack_dim_meta(kshape, [kin, kout])
    if rows:
        Ri = rshape[-1] if rshape else max(L, 0)
        si = rstr[-1] if rshape else 0
        oshape, ostr = (rshape[:-1], rstr[:-1]) if rshape else ((), ())
        oshape, (ostr,) = fit_dims(oshape, [ostr])
        Ro = math.prod(oshape) if L else 1
        if L == 0:
            Ri, Ro = 0, 1
        vec = 16 // itemsize(dtype) if si == 1 and Ri >= 2 * (16 // itemsize(dtype)) else 1
        v1 = _tuning() == "v1"
        rw = row_warp(dtype, vec, Ri, Ro, M, L, sm_count) if not v1 else None
        if rw is not None:
            np_, rpb = rw
            red_meta = pack_dim_meta(oshape, [ostr])
            meta = kept_meta + red_meta + struct.pack("<6qii", M, L, Ri, si, Ro, 0, 1, 0)
            dep = env_num("IOP_REDUCE_RWDEP", -1)  # tuning switch; -1: by op (_build)
            return ReducePlan("rows", meta, (-(-M // rpb), 1), (32, rpb), vec, 1, M, L, 0, np_, rw=np_, rwdep=dep)
        U = 1 if v1 or vec == 1 else 8
        h16 = int(vec == 8 and dtype in (DType.F16, DType.BF16) and not v1 and os.environ.get("IOP_REDUCE_H16", "1") != "0")
        if h16:
            U = env_num("IOP_REDUCE_U", U)  # tuning switch: 8 or 16 loads in flight
        if not v1 and vec > 1 and Ro == 1 and L > 512:
            # contiguous rows: threads per row so that each thread owns about U packs (one
            # batch of U loads in flight), 64..256; blocks of 64-256 threads keep 1024+ per SM
            # 16 packs per thread (two batches) measured best on the H200: 8192^2 f32 dim 1
            # 65 us (97% of copy BW) against 75 us with 8 and 88 us for the v1 plan
            # f16 / bf16 rows of >= 2048 with enough rows to fill the GPU: a warp per row (32
            # packs per lane, 4 rows per block): 8192^2 dim 1 on the H200, graph replay, f16 sum
            # 33.3 vs 34.0 us, max 34.4 vs 35.5 us (IOP_REDUCE_WARP=0: 64 threads per row)
            warp = h16 and Ri >= 2048 and M >= 8 * sm_count and os.environ.get("IOP_REDUCE_WARP", "1") != "0"
            ppt = env_num("IOP_REDUCE_PPT", 32 if warp else 16)  # tuning switch: packs per thread
            gmin = env_num("IOP_REDUCE_GMIN", 32 if warp else 64)  # tuning switch: 32 = a warp per row
            gmax = env_num("IOP_REDUCE_GMAX", 256)  # tuning switch: threads per row at most
            G = min(gmax, max(gmin, _pow2ceil(-(-Ri // (vec * ppt)))))
            rpb = 4 if G == 32 else 1
        elif L <= 512:
            G, rpb = 32, 8
        elif L <= 4096:
            G, rpb = 128, 1
        else:
            G, rpb = 256, 1
        nblocks = -(-M // rpb)
        threads = nblocks * G * rpb
        S, chunk, split_outer = 1, 0, 0
        # a split fills the GPU once: v1 aimed at 2048 threads per SM; with U packs per thread
        # (more registers) about 1024 are resident, and a grid of one wave has no tail
        tgt = target if v1 or U == 1 else sm_count * env_num("IOP_REDUCE_TPS", 1024)
        per = G * vec * (4 if v1 or U == 1 else min(U, 8))
        if threads < tgt and L >= G * vec * 8:
            want = min(-(-tgt // threads), max(1, L // per), 65535)
            if want > 1:
                if Ri >= want * G * vec or Ro == 1:
                    chunk = -(-Ri // want)
                    chunk = -(-chunk // vec) * vec
                    S = -(-Ri // chunk)
                else:
                    split_outer = 1
                    chunk = -(-Ro // min(want, Ro))
                    S = -(-Ro // chunk)
        red_meta = pack_dim_meta(oshape, [ostr])
        meta = kept_meta + red_meta + struct.pack("<6qii", M, L, Ri, si, Ro, chunk, S, split_outer)
        ws = S * M * acc_size(dtype) if S > 1 else 0
        fin = min(1024, max(32, _pow2ceil(S))) if S > 1 and M <= 32 and not v1 else 0
        # f16 / bf16, one contiguous row per output split over S blocks (full reductions, few
        # long rows): reduce_rows16 reads it by a grid-stride sweep (ILV = 1) instead of one
        # contiguous chunk per block. H200, 8192^2 / 2^26 half sum / max / mean, graph replay:
        # 34.0-34.3 us against 35.2-36.5 (the dim-1 plan on the same bytes: 33.8).
        # IOP_REDUCE_ILV=0 (a tuning switch) restores the chunks.
        ilv = int(h16 and S > 1 and rpb == 1 and Ro == 1 and not split_outer and os.environ.get("IOP_REDUCE_ILV", "1") != "0")
        last = 0
        if S > 1 and rpb == 1 and M <= 32 and not v1:
            mode = os.environ.get("IOP_REDUCE_FINISH", "")  # tuning switch: "2pass" or "last"
            last = int(mode == "last" or (mode != "2pass" and M * L * itemsize(dtype) <= LAST_MAX_BYTES))
            if last:
                last = last_mode(dtype, ilv)
                if last == 3:
                    ws = 0  # the partials live in the descriptor's flagged slots
        ldk = env_num("IOP_REDUCE_LDK", LDK_DEFAULT) if h16 else 0  # tuning switch
        return ReducePlan("rows", meta, (nblocks, S), (G, rpb), vec, S, M, L, ws, U, fin, 0, last, h16, ldk, ilv)
    # columns
    rshape, (rstr,) = fit_dims(rshape, [rstr])
    BY = 8
    cv = 16 // itemsize(dtype)
    if not (
        col_vec
        and kin[-1] == 1
        and kshape[-1] % cv == 0
        and all(st % cv == 0 for st in kin[:-1])
        and all(st % cv == 0 for st in rstr)
    ):
        cv = 1
    gx = -(-M // (32 * cv))
    threads = gx * 32 * BY
    S, chunk = 1, 0
    if threads < target:
        want = min(-(-target // threads), max(1, L // (BY * 4)), 65535)
        if want > 1:
            chunk = -(-L // want)
            S = -(-L // chunk)
    si = rstr[0] if len(rshape) == 1 else 0
    red_meta = pack_dim_meta(rshape, [rstr])
    if S > 1 and _cols_mode() != "split":
        meta = kept_meta + red_meta + struct.pack("<6qii", M, L, L, si, 1, 0, 1, 0)
        return _tile_plan(meta, M, L, tile_vec(cv, dtype), dtype, sm_count)
    meta = kept_meta + red_meta + struct.pack("<6qii", M, L, L, si, 1, chunk, S, 0)
    ws = S * M * acc_size(dtype) if S > 1 else 0
    return ReducePlan("cols", meta, (gx, S), (32, BY), cv, S, M, L, ws)


def _cols_mode() -> str:
    """``IOP_REDUCE_COLS=split`` (a tuning switch for A/B benchmarks) restores the two-launch
    column plan (split pass + finish) where the one-launch tile plan is the default."""
    return os.environ.get("IOP_REDUCE_COLS", "")


TILE_U = 4  # packs in flight per thread in reduce_cols_tile


def tile_vec(cv: int, dtype: DType) -> int:
    """Pack width of a tile plan: cv, or scalar where cv 64-bit accumulators (int8 max: 16)
    do not fit the 64 registers of a 1024-thread block."""
    return cv if cv * acc_size(dtype) <= 64 else 1


def _tile_plan(meta: bytes, M: int, L: int, cv: int, dtype: DType, sm_count: int) -> ReducePlan:  # noqa: N803
    """One launch for a column reduction that would otherwise split: a block owns TX * cv
    outputs and their whole reduced extent, shared by BY thread rows (a power of two) combined
    by a shared-memory tree. TX: full 128-byte lines per reduced position when that still gives
    a block per SM, else narrower tiles (at least 32 bytes) for more blocks; BY fills about
    1024 resident threads per SM with at least 4 positions per thread."""
    seg = cv * itemsize(dtype)  # bytes per thread per reduced position
    ncols = -(-M // cv)
    tx_line, tx_min = max(1, 128 // seg), max(1, 32 // seg)
    tx_env = env_num("IOP_REDUCE_TILE_TX", 0)  # tuning switch
    if tx_env:
        TX = tx_env
    elif -(-ncols // tx_line) * 100 >= sm_count * 95:  # 8192^2 f16 dim 0: 128 blocks, 36.8 vs 40.6 us at TX = 4
        TX = tx_line
    else:
        TX = max(tx_min, 1 << (max(1, ncols // sm_count).bit_length() - 1))
    TX = max(1, min(TX, 32, _pow2ceil(ncols)))
    nblocks = -(-ncols // TX)
    tpb = min(1024, max(128, _pow2ceil(-(-sm_count * 1024 // nblocks))))
    if nblocks >= sm_count:
        tpb = min(tpb, 512)
    tpb = env_num("IOP_REDUCE_TILE_TPB", tpb)  # tuning switch
    BY = max(1, min(tpb // TX, 1 << (max(1, L // 4).bit_length() - 1)))
    acc = acc_size(dtype)
    while BY > 1 and (BY // 2) * TX * cv * acc > 48 * 1024:
        BY //= 2
    shmem = max(1, BY // 2) * TX * cv * acc
    return ReducePlan("tile", meta, (nblocks,), (TX, BY), cv, 1, M, L, 0, TILE_U, 0, shmem)


def kernel_names(dtype: DType, op: str) -> list[str]:
    """Every instantiation one (dtype, op) may use."""
    t = ctype(dtype)
    o, mean = OPS[op]
    vec = 16 // itemsize(dtype)
    lasts = (0, 1, 2, 3) if is_float(dtype) and acc_size(dtype) == 4 else (0, 1, 2)
    return (
        [f"reduce_rows<{t}, {o}, {mean}, {v}, {u}, {la}>" for v, u in ((vec, 8), (vec, 1), (1, 1)) for la in lasts]
        + [
            f"reduce_cols<{t}, {o}, {mean}>",
            f"reduce_cols_vec<{t}, {o}, {mean}, {vec}>",
            f"reduce_cols_tile<{t}, {o}, {mean}, {tile_vec(vec, dtype)}, {TILE_U}>",
            f"reduce_cols_tile<{t}, {o}, {mean}, 1, {TILE_U}>",
            f"reduce_finish<{t}, {o}, {mean}>",
            f"reduce_finish_block<{t}, {o}, {mean}>",
        ]
        + (
            [f"reduce_rows16<{t}, {o}, {mean}, 8, {LDK_DEFAULT}, {la}, {il}>" for la in lasts for il in (0, 1)]
            if dtype in (DType.F16, DType.BF16)
            else []
        )
        + (
            [f"reduce_rows_warp<{t}, {o}, {mean}, {n}, {d}>" for n in RW_NP for d in (0, 1)]
            if dtype in (DType.F32, DType.F16, DType.BF16)
            else []
        )
    )


def default_kernel_names(dtype: DType, op: str) -> list[str]:
    """The part of ``kernel_names`` that ``plan_reduce`` can select with the tuning switches as
    set (unset: the defaults), so the compile check covers each kernel a descriptor can launch:
    reduce_rows_warp with its op's DEP; reduce_rows16 finishing in its last block only in the
    mode ``last_mode`` picks (with or without the grid-stride sweep); reduce_rows with U = 1 only
    unpacked (or under IOP_REDUCE_PLAN=v1), packed only where reduce_rows16 does not take the
    row. ``kernel_names`` adds the other switch settings (``tools/compile_check.py --all``)."""
    v1 = _tuning() == "v1"
    half = dtype in (DType.F16, DType.BF16)
    h16 = half and not v1 and os.environ.get("IOP_REDUCE_H16", "1") != "0"
    dep = env_num("IOP_REDUCE_RWDEP", -1)
    dep = dep if dep >= 0 else int(op != "max")
    ldk = env_num("IOP_REDUCE_LDK", LDK_DEFAULT)
    keep = []
    for name in kernel_names(dtype, op):
        args = [a.strip() for a in name[name.index("<") + 1 : -1].split(",")]
        kind = name[: name.index("<")]
        if kind == "reduce_rows_warp":
            ok = not v1 and int(args[4]) == dep
        elif kind == "reduce_rows16":
            last, ilv = int(args[5]), int(args[6])
            ok = h16 and int(args[4]) == ldk and (last == 0 or last == last_mode(dtype, ilv))
        elif kind == "reduce_rows":
            vec, u, last = int(args[3]), int(args[4]), int(args[5])
            packed_ok = vec > 1 and not h16 and u == (1 if v1 else 8)
            ok = (vec == 1 or packed_ok) and (last == 0 or (not v1 and last == last_mode(dtype)))
        else:
            ok = True
        if ok:
            keep.append(name)
    return keep


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
        p = plan_reduce(x_desc.shape, x_desc.strides, y_kept_strides, axes, dtype, sm)
        self.plan = p
        self._slots = slots
        self.launches = self._build(handle, p, dtype, op, slots)
        self.workspace_size = p.workspace
        # a packed column plan needs a 16-byte aligned x: keep the scalar plan for other pointers
        self.fallback = None
        if p.kind in ("cols", "tile") and p.vec > 1:
            q = plan_reduce(x_desc.shape, x_desc.strides, y_kept_strides, axes, dtype, sm, col_vec=False)
            self.fallback = self._build(handle, q, dtype, op, slots)
            self.workspace_size = max(p.workspace, q.workspace)
            self.x_slot = slots[1]
            if self.fallback is not None:
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
    def _build(handle, p, dtype, op, slots):
        if p.kind == "none":
            return []
        t = ctype(dtype)
        o, mean = OPS[op]
        if p.kind == "tile":
            main = f"reduce_cols_tile<{t}, {o}, {mean}, {p.vec}, {p.U}>"
            mod = get_module(REDUCE_SOURCE, [main], handle.device_id)
            ys, xs = slots
            return [Launch(mod.ptr[main], p.grid, p.block, [Slot(ys), Slot(xs), p.meta], shmem=p.shmem)]
        if p.kind == "rows" and p.rw:
            dep = p.rwdep if p.rwdep >= 0 else int(op != "max")
            main = f"reduce_rows_warp<{t}, {o}, {mean}, {p.rw}, {dep}>"
        elif p.kind == "rows" and p.h16:
            main = f"reduce_rows16<{t}, {o}, {mean}, {p.U}, {p.ldk}, {p.last}, {p.ilv}>"
        elif p.kind == "rows":
            main = f"reduce_rows<{t}, {o}, {mean}, {p.vec}, {p.U}, {p.last}>"
        elif p.vec > 1:
            main = f"reduce_cols_vec<{t}, {o}, {mean}, {p.vec}>"
        else:
            main = f"reduce_cols<{t}, {o}, {mean}>"
        names = [main]
        fin = f"reduce_finish_block<{t}, {o}, {mean}>" if p.fin else f"reduce_finish<{t}, {o}, {mean}>"
        if p.S > 1 and not p.last:
            names.append(fin)
        mod = get_module(REDUCE_SOURCE, names, handle.device_id)
        ys, xs = slots
        ws = Slot("ws") if p.S > 1 and p.last != 3 else ctypes.c_void_p(0)
        nul = ctypes.c_void_p(0)
        if p.kind == "cols":
            out = [Launch(mod.ptr[main], p.grid, p.block, [Slot(ys), Slot(xs), ws, p.meta])]
        else:  # rows: the ticket array (bound per stream by _ticket_launch when p.last)
            out = [Launch(mod.ptr[main], p.grid, p.block, [Slot(ys), Slot(xs), ws, p.meta, nul])]
        if p.last:
            pass
        elif p.S > 1 and p.fin:
            out.append(Launch(mod.ptr[fin], (p.M,), (p.fin,), [Slot(ys), Slot("ws"), p.meta]))
        elif p.S > 1:
            out.append(Launch(mod.ptr[fin], (-(-p.M // 8),), (256,), [Slot(ys), Slot("ws"), p.meta]))
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
def acc_numpy(dtype: DType):
    if dtype is DType.F64:
        return np.float64
    if is_float(dtype):
        return np.float32
    return np.int64


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
