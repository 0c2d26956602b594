"""Planning and launching the row-wise kernels of ``rowwise.cu`` (softmax family, cross entropy).

A "row" is the line of elements along ``dim``; every other dim enumerates rows. The plan picks
``row_softmax`` when ``dim`` is the input's fastest dim (register-cached rows, 16-byte vectors
when contiguous) and ``col_softmax`` otherwise (one thread per row, coalesced across rows).
f32 / f16 / bf16 softmax / log_softmax rows of at most 512 (f32) / 128 (16-bit) 16-byte packs
(N <= 2051 / 1031) go to ``row_softmax_short`` (``short_plan``: 4-32 lanes per row, several rows
per warp, sizes fixed at compile time); longer 16-bit rows of <= 1024 packs to a warp per row
instead (``warp_packs``: ``row_softmax_warp``; ``pipe_plan``: ``row_softmax_wpipe`` with nc
loads and one-warp blocks at N = 1800-2055, two warps per row for unaligned f16 log_softmax
N = 2057-4103);
rows of 16385-65536 to ``row_softmax_hyb`` (``hyb_plan``).
"""

from __future__ import annotations

import ctypes
import math
import os
import struct
from dataclasses import dataclass

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..dtypes import DType, itemsize
from ..layout import MAXD, collapse
from ..status import Status, error
from . import HERE, REDUCE_CUH, acc_size, env_num, pack_dim_meta

ROWWISE_SOURCE = REDUCE_CUH + (HERE / "rowwise.cu").read_text()

MODES = {"softmax": 0, "log_softmax": 1, "causal": 2, "ce": 3, "ce_loss": 4}


def vec_of(dtype: DType) -> int:
    return 16 // itemsize(dtype)


RAW_MIN_NVEC = 4 * 512  # rows of more 16-byte vectors than a 512-thread f32 cache holds


def _raw_env() -> str:
    return os.environ.get("IOP_ROWWISE_RAW", "")


def raw_cache(dtype: DType, vec: int, mode: str, nvec: int | None = None) -> int:
    """1 when row_softmax caches raw 16-bit packs (8 per thread, 32 registers: twice the loads
    in flight of the f32 cache's 4 packs): half types with 16-byte vectors, rows longer than
    ``RAW_MIN_NVEC`` vectors (``nvec`` None: whether the variant exists at all). Measured on
    the H200: at N = 32000 raw beats the f32 cache (f16 softmax 145 vs 210 us; log_softmax
    139-142 vs 203 us since its spill was removed: an opaque zero xor-ed into the cached words
    before the write pass). On shorter rows it lost or tied: 8 packs (N = 2048-4097, round 4:
    softmax f16 2049 17.2 vs 15.5 us graph-replayed, log_softmax 2048 11.5 vs 11.8), 4 packs
    (2048: 12.9 vs 11.8), mostly empty slots (causal 512: 42 vs 27 us).

    Tuning switches for A/B benchmarks (``IOP_ROWWISE_RAW``): ``0`` disables it, ``nolog``
    keeps the f32 cache for log_softmax (the round-3 rule), ``all`` / ``all8`` use raw for
    every half row with 16-byte vectors (4 / 8 packs per thread up to ``RAW_MIN_NVEC`` vectors,
    see ``maxe``)."""
    env = _raw_env()
    if env == "0" or (env == "nolog" and mode == "log_softmax"):
        return 0
    if nvec is not None and nvec <= RAW_MIN_NVEC and env not in ("all", "all8"):
        return 0
    return int(itemsize(dtype) == 2 and vec > 1)


def maxe(dtype: DType, vec: int, raw: int = 0, nvec: int | None = None) -> int:
    """Cached vectors per thread: 32 registers of values (32 f32 values, or 8 raw 16-bit packs;
    4 vectors for f64, whose exp is a call); ``IOP_ROWWISE_RAW=all`` keeps 4 raw packs on rows
    of at most ``RAW_MIN_NVEC`` vectors."""
    if dtype is DType.F64:
        return 4
    if raw:
        return 4 if nvec is not None and nvec <= RAW_MIN_NVEC and _raw_env() == "all" else 8
    return max(1, 32 // vec)


WARP_PACKS = (4, 8, 16, 32)  # packs per lane of row_softmax_warp instantiations
WARP_MINB = {4: 12, 8: 8, 16: 5, 32: 3}  # blocks of 128 threads per SM in __launch_bounds__ (register cap)
WARP_MAX_NV = 32 * 16  # default rule: rows of at most this many whole 16-byte packs ...
WARP_MIN_NV32 = 896  # ... or of 897-1024 (32 packs per lane, at least 7/8 of the slots filled)


def warp_packs(dtype: DType, mode: str, n: int) -> int:
    """Packs per lane of ``row_softmax_warp`` (one warp per row, no block barriers) for a
    16-bit softmax / log_softmax row of N elements on the 16-byte path; 0: not used.

    Default (H200, CUDA-graph replay, 4096 rows, warp vs block kernel): rows of at most
    ``WARP_MAX_NV`` packs, N <= 4103 (f16 softmax 2048 11.28 vs 11.85 us, 2049 11.86 vs 15.56,
    4096 20.12 vs 20.97, 4097 21.61 vs 25.44; log_softmax and bf16 alike; log_softmax 1000 6.52
    vs 6.87, but softmax 1000 lost, 7.18 / 7.10 vs 6.89 / 6.87: softmax keeps the block kernel
    up to 128 packs), and rows of ``WARP_MIN_NV32`` + 1 ... 1024 packs, N = 7176-8199, with 32
    packs per lane (only 8192 measured: f16 softmax 40.73 vs 40.77 us, log_softmax 37.88 vs
    40.18, bf16 38.59 vs 41.30 / 36.08 vs 40.60).

    Rows that ``short_plan`` takes (16-bit N <= 1031 by default) never get here.

    ``IOP_ROWWISE_WARP`` (tuning switch for A/B): ``0`` never, ``all`` every row that fits 32
    packs per lane; ``IOP_ROWWISE_WARP_MINB`` overrides the blocks-per-SM launch bound."""
    env = os.environ.get("IOP_ROWWISE_WARP", "")
    if env == "0" or mode not in ("softmax", "log_softmax") or itemsize(dtype) != 2:
        return 0
    nv = n // 8  # whole packs at the best alignment (the kernel's slots cover any alignment)
    if nv > 32 * WARP_PACKS[-1] or (env != "all" and WARP_MAX_NV < nv <= WARP_MIN_NV32):
        return 0
    if env != "all" and mode == "softmax" and nv <= 128:  # softmax 1000: block kernel measured faster
        return 0
    return next(q for q in WARP_PACKS if 32 * q >= nv)


SHORT_LANES = (4, 8, 16, 32)  # lanes per row of row_softmax_short instantiations
SHORT_PACKS = (1, 2, 4, 8, 16)  # packs per lane (8 and 16 only with 32 lanes, 16 only for f32)
SHORT_PPL = {4: 2, 2: 1}  # default packs per lane the lane count aims at, by element size
SHORT_MAX_NV = {4: 512, 2: 128}  # default rule: rows of at most this many whole 16-byte packs
SHORT_HINTS = (0, 1)  # H instantiated: 0 plain loads, 1 ld.global.nc.L1::no_allocate


def short_names(dtype: DType, mode: str) -> list[tuple[int, int]]:
    """(L, P) pairs instantiated for ``row_softmax_short``."""
    return [(q, p) for q in SHORT_LANES for p in SHORT_PACKS if (p < 8 or q == 32) and (p < 16 or itemsize(dtype) == 4)]


def short_plan(dtype: DType, mode: str, n: int) -> tuple[int, int, int, int] | None:
    """(L, P, warps per block, H) of ``row_softmax_short`` (L lanes per row, 32 / L rows per
    warp, P 16-byte packs per lane, every size a template constant) for an f32 / f16 / bf16
    softmax / log_softmax row of N elements on the 16-byte path; None: not used.

    L is the power of two (4-32) at or above ceil(packs / ``SHORT_PPL``), P the fewest
    instantiated packs per lane that cover the row's whole packs (N // (16 / size)).

    Default (H200, CUDA-graph replay, 4096 rows, against the earlier kernels: the block kernel
    with a runtime-sized cache, or row_softmax_warp; docs/perf/reductions.md, round 9C): every
    row of at most ``SHORT_MAX_NV`` packs (f32 N <= 1027, 16-bit N <= 1031). f32 softmax 128
    6.62 -> 2.47 us (torch 2.55), log_softmax 6.76 -> 2.49; f16 5.04 -> 2.19 / 3.65 -> 2.14;
    faster at every N measured (17, 64, 128, 256, 512, 1000). Two packs per lane for f32, one
    for 16-bit rows (the neighbours measured within 0.1 us; four packs per lane lost).

    f32 rows of 257-512 packs (N = 1028-2051) take a warp each with 16 packs per lane (64
    registers of values, 95-96 in all) and **one warp per block** (2026-11-22, third session;
    two runs, against the block kernel ``row_softmax``): (4096, 2048) softmax 18.92 / 18.95 ->
    18.61 / 18.61 us, log_softmax 19.34 / 19.32 -> 18.68 / 18.67; 2049 20.36 / 20.37 -> 18.96 /
    18.93 and 20.27 / 20.33 -> 18.86 / 18.86; 1536 15.46 -> 14.65, 1100 13.48 -> 11.61 (log_softmax
    13.48 -> 11.79, torch 12.75). Four warps per block measured 0.1-0.3 us slower, nc loads
    0.3-0.6 us slower. These rows start their packs at a 128-byte boundary (H = 8, a scalar
    head of up to 31 elements; 2026-11-22, fourth session, two runs): (4096, 2049) softmax
    18.88 / 18.95 -> 18.64 / 18.69 us, log_softmax 18.88 / 18.98 -> 18.69 / 18.74; 2048 and
    1100 (rows already at 16-byte multiples of 128 bytes, or not) unchanged.

    Tuning switches (read at descriptor create): ``IOP_ROWWISE_SHORT`` ``0`` never (the earlier
    kernels), ``all`` every row that fits 32 lanes x 8 packs; ``IOP_ROWWISE_SHORT_L`` lanes per
    row, ``IOP_ROWWISE_SHORT_P`` packs per lane the lane count aims at, ``IOP_ROWWISE_SHORT_W``
    warps per 128-thread-max block (1, 2 or 4), ``IOP_ROWWISE_SHORT_H`` load hint (1: nc)."""
    env = os.environ.get("IOP_ROWWISE_SHORT", "")
    if env == "0" or mode not in ("softmax", "log_softmax") or dtype not in (DType.F32, DType.F16, DType.BF16):
        return None
    size = itemsize(dtype)
    nv = n // vec_of(dtype)  # whole packs at the best alignment (head / tail slots cover the rest)
    if nv < 1 or nv > 32 * SHORT_PACKS[-1] or (env != "all" and nv > SHORT_MAX_NV[size]):
        return None
    ppl = env_num("IOP_ROWWISE_SHORT_P", SHORT_PPL[size])
    L = env_num("IOP_ROWWISE_SHORT_L", min(32, max(4, _pow2ceil(-(-nv // max(1, ppl))))))
    P = next((q for q in SHORT_PACKS if L * q >= nv and (L, q) in short_names(dtype, mode)), 0)
    if not P:
        return None
    w = env_num("IOP_ROWWISE_SHORT_W", 1 if P == 16 else 4)
    h = env_num("IOP_ROWWISE_SHORT_H", 8 if (L, P) == (32, 16) else 0)
    return L, P, max(1, min(4, w)), h if h in SHORT_HINTS or (h == 8 and L == 32) else 0


def short_kernel_name(dtype: DType, mode: str, lanes: int, p: int, h: int = 0) -> str:
    return f"row_softmax_short<{ctype(dtype)}, {MODES[mode]}, {lanes}, {p}, {h}>"


PIPE_RPW = 2  # row_softmax_wpipe: rows per warp (slot) by default
PIPE_MINB = {4: 8, 8: 6, 16: 4, 32: 2}  # its launch bound when looping (0 spill: 64 / 80 / 125 registers)
PIPE_S2_MIN_NV = 256  # the nc rule's upper end (rows of more packs: 16 per lane)
PIPE_NC_MIN_NV = 224  # default: rows of more packs than this, at most PIPE_S2_MIN_NV (8 packs per lane, >= 7/8 used) ...
PIPE_NC_DEFAULT = (8, 8, 1, 9, 1.0, 1)  # ... a warp per row, ld.global.nc.L1::no_allocate, one warp per block


WARP_WPB = {16: 1}  # row_softmax_warp's warps per block by packs per lane (others: 4)


def warps_per_block(s: int = 1, default: int = 4) -> int:
    """Warps per 128-thread-max block of the warp kernels (``IOP_ROWWISE_WARPS``: 1, 2 or 4;
    else ``default``); at least the S warps of one row. row_softmax_warp's default is
    ``WARP_WPB``: one warp per block at 16 packs per lane (N = 2056-4103; H200, CUDA-graph
    replay, two runs, (4096, 4096) f16 / bf16 softmax 18.90-18.92 / 18.91-18.93 us vs
    19.07-19.08 / 19.03-19.04 with four, log_softmax 18.66-18.72 / 18.64-18.65 vs 18.78-18.81 /
    18.70)."""
    w = env_num("IOP_ROWWISE_WARPS", default)
    return max(s, min(4, w))


def pipe_plan(dtype: DType, mode: str, n: int) -> tuple[int, int, int, int, float, int] | None:
    """(P, MINB, S, H, RPW, warps per block) of ``row_softmax_wpipe`` (a warp loops over rows, loading the next
    row during the write pass of the current one) for a row where ``warp_packs`` applies; None:
    the one-row-per-warp ``row_softmax_warp`` is used.

    Tuning switches (read at descriptor create): ``IOP_ROWWISE_PIPE`` ``1`` use it wherever the
    warp kernel would run (``0`` / unset: never); ``IOP_ROWWISE_PIPE_S`` warps per row (1 or 2),
    ``IOP_ROWWISE_PIPE_RPW`` rows per warp (a float: the grid is ceil(R / RPW) row slots),
    ``IOP_ROWWISE_PIPE_H`` bits (1 nc + L1::no_allocate loads, 2 + L2 evict_first, 4
    st.global.cs stores, 8 no loop: one row per slot),
    ``IOP_ROWWISE_PIPE_MINB`` the launch bound.

    Default (unset; H200, CUDA-graph replay, two runs, against row_softmax_warp with 4 warps
    per block; docs/perf/reductions.md, round 8B):

    - rows of 225-256 whole packs (N = 1800-2055; 8 packs per lane, at least 7/8 of the slots
      used; only 2048 / 2049 measured, shorter rows keep the old kernel): one row per warp, loads
      ``ld.global.nc.L1::no_allocate``, **one warp per block** (H = 9, no loop): (4096, 2048)
      softmax f16 10.88 vs 11.38 us, log_softmax 10.12 vs 10.68, bf16 11.03 vs 11.30 / 10.22
      vs 10.70; (4096, 2049) 11.51 vs 11.88, 11.15 vs 11.04, 11.83 vs 12.25, 10.95 vs 11.12.
    - unaligned f16 log_softmax rows (N not a multiple of 8) of 257-512 packs: **two warps per
      row**, no loop (S = 2, H = 8: 8 packs per lane, 64 registers, 32 warps per SM). Round 8B
      measured it against row_softmax_warp with four warps per block at (4096, 4097): softmax f16
      20.53 vs 21.53 us, log_softmax 19.41 vs 20.76, bf16 20.49 vs 21.61 / 19.52 vs 20.75. At
      4096 it tied or lost (softmax f16 20.32 vs 19.91), so aligned rows keep row_softmax_warp.
      Since the branch-free write pass (``st16_if``, 2026-11-22, third session; two runs)
      row_softmax_warp with one warp per block wins at 4097 except for f16 log_softmax: softmax
      f16 19.31 / 19.24 vs 19.77 / 19.80 us, bf16 19.27 / 19.30 vs 19.78 / 19.78, log_softmax
      bf16 18.87 / 18.88 vs 19.00 / 19.02, but log_softmax f16 19.27 / 19.26 vs 18.96 / 18.93.
      Since the packs start at a 128-byte boundary (``warp_align``; 2026-11-22, fourth session)
      row_softmax_warp wins there too (18.75 vs 19.14 us), so no row takes two warps by default.

    Looping over rows (RPW > 1) lost everywhere, as did one pair of warps per block."""
    env = os.environ.get("IOP_ROWWISE_PIPE", "")
    if env == "0" or not warp_packs(dtype, mode, n):
        return None
    if env not in ("1", "all"):
        nv = n // 8
        if PIPE_NC_MIN_NV < nv <= PIPE_S2_MIN_NV:
            return PIPE_NC_DEFAULT
        return None
    S = env_num("IOP_ROWWISE_PIPE_S", 1)
    nv = n // 8
    P = next((q for q in WARP_PACKS if 32 * S * q >= nv), 0)
    if not P:
        return None
    H = env_num("IOP_ROWWISE_PIPE_H", 0)
    minb = env_num("IOP_ROWWISE_PIPE_MINB", (WARP_MINB if H & 8 else PIPE_MINB)[P])
    rpw = 1.0 if H & 8 else env_num("IOP_ROWWISE_PIPE_RPW", PIPE_RPW, float)
    return P, minb, S, H, max(1.0, rpw), 4


def pipe_kernel_name(dtype: DType, mode: str, p: int, minb: int, s: int, h: int) -> str:
    return f"row_softmax_wpipe<{ctype(dtype)}, {MODES[mode]}, {p}, {minb}, {s}, {h}>"


HYB_P = 8  # register packs per thread of row_softmax_hyb
HYB_G = {4: 256, 2: 192}  # threads per row by element size (N = 32000: f32 2 rows per SM, 16-bit 5)
HYB_MAX_SMEM = 200 * 1024  # dynamic shared memory of one block at most
HYB_MIN_N = 16385  # default rule: rows of HYB_MIN_N ... HYB_MAX_N elements (the range measured faster:
HYB_MAX_N = 65536  # N = 20000, 24576, 32000, 65536, f32 / f16 / bf16; longer rows keep the loop mode, unmeasured)


def hyb_plan(dtype: DType, mode: str, n: int) -> tuple[int, int, int, int] | None:
    """(P, G, S, CS) of ``row_softmax_hyb`` (the row cached half in registers, half in shared
    memory) for a softmax / log_softmax row of N elements on the 16-byte path; None: not used.

    Default: rows of 16385-65536 with G = 256 threads (f32) / 192 (16-bit): H200, device time
    per call, against the register-only block kernel: (4096, 32000) f32 softmax 268.4 vs 298.1
    us (93% of copy BW), log_softmax 268.2 vs 298.9; f16 138.4 vs 144.9 / 136.4 vs 141.4; bf16
    139.1 vs 146.8 / 136.9 vs 144.4; also faster at N = 20000, 24576 and 65536 (f32 65536:
    652 vs 2226 us, the old plan's loop mode).

    Tuning switches (read at descriptor create): ``IOP_ROWWISE_HYB`` ``0`` never, ``all`` every
    row that fits; ``IOP_ROWWISE_HYB_G`` threads per row, ``IOP_ROWWISE_HYB_P`` register packs
    (4 or 8), ``IOP_ROWWISE_HYB_CS=1`` streaming stores."""
    env = os.environ.get("IOP_ROWWISE_HYB", "")
    size = itemsize(dtype)
    if env == "0" or mode not in ("softmax", "log_softmax") or size not in (2, 4):
        return None
    if env != "all" and not HYB_MIN_N <= n <= HYB_MAX_N:
        return None
    P = env_num("IOP_ROWWISE_HYB_P", HYB_P)
    G = env_num("IOP_ROWWISE_HYB_G", HYB_G[size])
    cs = env_num("IOP_ROWWISE_HYB_CS", 0)
    nv = n // (16 // size)  # whole packs at the best alignment
    need = -(-nv // P)  # threads that hold the row in registers alone
    G = min(G, max(32, -(-need // 32) * 32))  # no more threads than the packs need
    S = max(0, -(-nv // G) - P)
    if S * G * 16 > HYB_MAX_SMEM:
        G = 1024
        S = max(0, -(-nv // G) - P)
        if S * G * 16 > HYB_MAX_SMEM:
            return None
    return P, G, S, cs


def hyb_kernel_name(dtype: DType, mode: str, p: int, cs: int) -> str:
    return f"row_softmax_hyb<{ctype(dtype)}, {MODES[mode]}, {p}, {cs}>"


LSE_U = (2, 4, 8)  # packs per batch of row_lse instantiations
LSE_DEFAULT_U = 4
LSE_MAX_G = 256  # threads per row at most (one block)
LSE_WARPS = 4096  # a warp per row from this many rows on (H200: 132 SMs x 32 resident warps)
LSE_MIN_NV = 256  # rows of at least this many 16-byte packs (shorter ones: the cached kernel was faster)


def lse_plan(dtype: DType, mode: str, n: int, rows: int = 1 << 30) -> tuple[int, int] | None:
    """(G, U) of ``row_lse`` (cross entropy streamed once, online max / sum, G threads per row,
    batches of U packs) for ``rows`` contiguous cross-entropy rows of N elements; None: the
    cached ``row_softmax`` is used.

    G is a warp per row while there are enough rows to fill the GPU (``LSE_WARPS`` warps),
    else the power of two that makes about that many warps, at most ``LSE_MAX_G`` and no more
    than the packs need (U per thread). Rows of fewer than ``LSE_MIN_NV`` packs keep the cached
    kernel. Tuning switches (read at descriptor create): ``IOP_ROWWISE_LSE`` ``0`` never,
    ``all`` at any row length; ``IOP_ROWWISE_LSE_G`` threads per row (a power of two,
    32-256), ``IOP_ROWWISE_LSE_U`` packs per batch (2, 4, 8)."""
    env = os.environ.get("IOP_ROWWISE_LSE", "")
    nv = max(1, n // vec_of(dtype))
    if env == "0" or mode not in ("ce", "ce_loss") or (env != "all" and nv < LSE_MIN_NV):
        return None
    U = env_num("IOP_ROWWISE_LSE_U", LSE_DEFAULT_U)
    U = U if U in LSE_U else LSE_DEFAULT_U
    G = 32 * max(1, min(LSE_MAX_G // 32, LSE_WARPS // max(1, rows)))
    G = min(G, max(32, _pow2ceil(-(-nv // U))))
    G = env_num("IOP_ROWWISE_LSE_G", G)
    return max(32, min(LSE_MAX_G, 1 << (max(1, G).bit_length() - 1))), U


def lse_kernel_name(dtype: DType, mode: str, ti: str, u: int) -> str:
    return f"row_lse<{ctype(dtype)}, {MODES[mode]}, {ti}, {u}>"


def _allow_smem(fn, nbytes: int) -> None:
    """Opt the kernel in to ``nbytes`` of dynamic shared memory, largest carveout."""
    fn.max_dynamic_shared_size_bytes = int(nbytes)
    try:
        fn.preferred_shared_memory_carveout = 100
    except Exception:  # noqa: BLE001 - an older CuPy: the driver picks the carveout
        pass


def warp_minb(p: int) -> int:
    return env_num("IOP_ROWWISE_WARP_MINB", WARP_MINB[p])


def warp_align(p: int) -> int:
    """1: ``row_softmax_warp`` at 16 packs per lane starts the packs at a 128-byte boundary (a
    scalar head of up to 63 elements, two per lane), so each warp-wide pack access covers whole
    128-byte lines on unaligned rows (``IOP_ROWWISE_WARP_AL``: 0 / 1). Default 1 (H200,
    CUDA-graph replay, 2026-11-22 fourth session, docs/perf/reductions.md): (4096, 4097) f16
    softmax 19.39 -> 19.04 us, bf16 19.30 -> 18.99, log_softmax bf16 18.91 -> 18.68, f16 18.75
    against 19.14 for the two-warps-per-row kernel it replaces; aligned 4096 within 0.15 us
    (18.98 -> 18.84 f16 softmax)."""
    return env_num("IOP_ROWWISE_WARP_AL", 1) if p == 16 else 0


def warp_shift(mode: str, p: int) -> int:
    """1: ``row_softmax_warp`` takes its exponentials as one FFMA and one ex2 per element
    (``ShiftExp`` in reduce.cuh: 2^(v log2 e - hi), hi + lo = m log2 e) instead of a subtraction,
    a multiply and the ex2; softmax's write pass then divides by the shifted sum directly
    (``IOP_ROWWISE_WARP_SH``: 0 / 1). Default: softmax at every P, log_softmax at 32 packs per
    lane. H200, CUDA-graph replay, two runs (2026-11-22, fifth session; docs/perf/reductions.md):
    softmax (4096, 4096) f16 18.97 / 18.96 -> 18.74 / 18.74 us, bf16 18.96 -> 18.85, (4096, 4097)
    f16 18.99 / 18.96 -> 18.88 / 18.86, bf16 19.11 / 19.06 -> 18.89 / 18.92, (4096, 8192) f16
    37.50 / 37.47 -> 35.82 / 35.81, bf16 36.57 / 36.51 -> 35.71 / 35.69; log_softmax 8192 35.41 ->
    35.13 (f16), 35.20 -> 35.01 (bf16), but 4096 / 4097 0.02-0.07 us slower in both runs (its
    write pass has no exponential), so it keeps exp_ftz there."""
    return env_num("IOP_ROWWISE_WARP_SH", int(mode == "softmax" or p == 32))


def warp_kernel_name(
    dtype: DType, mode: str, p: int, minb: int | None = None, al: int | None = None, sh: int | None = None
) -> str:
    al = warp_align(p) if al is None else al
    sh = warp_shift(mode, p) if sh is None else sh
    tail = f", {al}, 1" if sh else ", 1" if al else ""
    return f"row_softmax_warp<{ctype(dtype)}, {MODES[mode]}, {p}, {warp_minb(p) if minb is None else minb}{tail}>"


def row_kernel_name(dtype: DType, mode: str, vec: int, ti: str = "int", raw: int = 0, nvec: int | None = None) -> str:
    return f"row_softmax<{ctype(dtype)}, {MODES[mode]}, {vec}, {maxe(dtype, vec, raw, nvec)}, {ti}, {raw}>"


def col_kernel_name(dtype: DType, mode: str, ti: str = "int") -> str:
    return f"col_softmax<{ctype(dtype)}, {MODES[mode]}, {ti}>"


def all_names(dtype: DType, mode: str, ti: str = "int") -> list[str]:
    names = [
        row_kernel_name(dtype, mode, vec_of(dtype), ti),
        row_kernel_name(dtype, mode, 1, ti),
        col_kernel_name(dtype, mode, ti),
    ]
    if raw_cache(dtype, vec_of(dtype), mode):  # the raw-cache variant for long rows
        names.insert(1, row_kernel_name(dtype, mode, vec_of(dtype), ti, 1))
    if mode in ("softmax", "log_softmax") and itemsize(dtype) == 2:
        names += [
            warp_kernel_name(dtype, mode, q, WARP_MINB[q], al, sh)
            for q in WARP_PACKS
            for al in ((0, 1) if q == 16 else (0,))
            for sh in (0, 1)
        ]
        names += [pipe_kernel_name(dtype, mode, q, PIPE_MINB[q], s, 0) for q in (4, 8, 16) for s in (1, 2)]
        names += [pipe_kernel_name(dtype, mode, q, WARP_MINB[q], s, h) for q in (4, 8, 16) for s, h in ((1, 9), (1, 12), (2, 8))]
    if mode in ("softmax", "log_softmax") and dtype in (DType.F32, DType.F16, DType.BF16):
        names += [short_kernel_name(dtype, mode, q, p, h) for q, p in short_names(dtype, mode) for h in SHORT_HINTS]
        names += [short_kernel_name(dtype, mode, 32, p, 8) for q, p in short_names(dtype, mode) if q == 32]
    if mode in ("softmax", "log_softmax") and itemsize(dtype) in (2, 4):
        names += [hyb_kernel_name(dtype, mode, q, cs) for q in (4, 8) for cs in (0, 1)]
    if mode in ("ce", "ce_loss"):
        names += [lse_kernel_name(dtype, mode, ti, u) for u in LSE_U]
    if mode == "ce_loss":
        names.append(f"ce_loss_finish<{ctype(dtype)}>")
    return names


def default_names(dtype: DType, mode: str, ti: str = "int") -> list[str]:
    """The part of ``all_names`` that plans can select with the tuning switches as set (unset:
    the defaults): every kernel the plan functions return at some row length, so the compile
    check covers each kernel a descriptor can launch. ``all_names`` adds the instantiations of
    other switch settings (compiled on demand; ``tools/compile_check.py --all``)."""
    vec = vec_of(dtype)
    names = [col_kernel_name(dtype, mode, ti), row_kernel_name(dtype, mode, 1, ti)]
    # the plans depend on the row length only through its whole 16-byte packs (hyb_plan: N in
    # its range); past 1025 packs only the row kernel and hyb_plan are left
    lengths = [q * vec for q in range(1, 32 * WARP_PACKS[-1] + 2)]
    lengths += [RAW_MIN_NVEC * vec, (RAW_MIN_NVEC + 1) * vec, HYB_MIN_N, HYB_MAX_N, HYB_MAX_N + vec]
    for n in lengths:
        nvec = -(-n // vec)
        raw = raw_cache(dtype, vec, mode, nvec)
        names.append(row_kernel_name(dtype, mode, vec, ti, raw, nvec))
        lp = lse_plan(dtype, mode, n)
        if lp:
            names.append(lse_kernel_name(dtype, mode, ti, lp[1]))
        hp = hyb_plan(dtype, mode, n)
        if hp:
            names.append(hyb_kernel_name(dtype, mode, hp[0], hp[3]))
        sp = short_plan(dtype, mode, n)
        if sp:
            names.append(short_kernel_name(dtype, mode, sp[0], sp[1], sp[3]))
        pp = pipe_plan(dtype, mode, n)
        if pp:
            names.append(pipe_kernel_name(dtype, mode, *pp[:4]))
        wp = warp_packs(dtype, mode, n)
        if wp:
            names.append(warp_kernel_name(dtype, mode, wp))
    if mode == "ce_loss":
        names.append(f"ce_loss_finish<{ctype(dtype)}>")
    return list(dict.fromkeys(names))


def set_compile_units(factory, mode: str, dtypes, tis=("int",)) -> None:
    """The compile check's lists for a row-wise NVIDIA factory: ``compile_units`` the kernels
    plans select (``default_names``), ``tuning_units`` the rest of ``all_names``."""

    def pairs():
        return [(dt, ti) for dt in sorted(dtypes) for ti in tis]

    def units():
        return [(ROWWISE_SOURCE, [n for dt, ti in pairs() for n in default_names(dt, mode, ti)])]

    def tuning():
        names = []
        for dt, ti in pairs():
            chosen = set(default_names(dt, mode, ti))
            names += [n for n in all_names(dt, mode, ti) if n not in chosen]
        return [(ROWWISE_SOURCE, names)] if names else []

    factory.compile_units = units
    factory.tuning_units = tuning


def _pow2ceil(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _group(nvec: int, me: int) -> int:
    """Threads per row: the fewest multiple of 32 that caches ``nvec`` vectors at ``me`` per thread.

    ``IOP_ROWWISE_PLAN=pow2`` (a tuning switch for A/B benchmarks) restores the earlier rule:
    a power of two near nvec / 4."""
    if os.environ.get("IOP_ROWWISE_PLAN") == "pow2":
        G = min(1024, max(32, _pow2ceil(-(-nvec // 4))))
        return G if -(-nvec // G) <= me else 1024 if -(-nvec // 1024) <= me else 2048
    per = -(-nvec // me)
    return max(32, -(-per // 32) * 32)


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
    """softmax-like work on rows of ``x``.

    slots: pointer positions (y, x, target) in calculate's order (None: absent, passes 0).
    y_vec: whether y is written along the dim (softmax modes) so its alignment matters.
    """

    def __init__(self, handle, lay: RowLayout, dtype: DType, mode: str, slots, ti: str = "int", loss_slot=None):
        super().__init__(handle)
        self.launches = []
        self.workspace_size = 0
        R = math.prod(lay.row_shape)
        if R == 0 or (lay.N == 0 and mode not in ("ce", "ce_loss")):
            self.launch_all = []
            return
        if lay.collapse_rows:
            rshape, rstr = collapse(lay.row_shape, lay.row_strides)
        else:
            rshape, rstr = tuple(d for d in lay.row_shape), [tuple(s) for s in lay.row_strides]
        if len(rshape) > MAXD:
            raise error(Status.NOT_IMPLEMENTED, f"more than {MAXD} non-mergeable row dims")
        xs = [s for d, s in zip(rshape, rstr[0]) if d > 1]
        row_path = lay.N <= 1 or not xs or lay.sx <= min(xs)
        softmax_like = MODES[mode] <= 2
        N = lay.N
        vec = vec_of(dtype)
        can_vec = (
            row_path
            and lay.sx == 1
            and N >= 2 * vec
            and (not softmax_like or (lay.sy == 1 and all((a - b) % vec == 0 for a, b in zip(rstr[0], rstr[1]))))
        )
        meta_rows = pack_dim_meta(rshape, rstr)
        ys, xs_slot, ts = slots
        tslot = Slot(ts) if ts is not None else ctypes.c_void_p(0)
        ws_slot = Slot("ws") if mode == "ce_loss" else ctypes.c_void_p(0)
        if mode == "ce_loss":
            self.workspace_size = 2 * R * acc_size(dtype)
        names = []
        configs = []
        smem = {}
        if row_path:
            for v in [vec, 1] if can_vec else [1]:
                nvec = -(-max(N, 1) // v)
                lp = lse_plan(dtype, mode, N, R) if v > 1 else None
                if lp:  # cross entropy: streamed once, nothing cached
                    G, U = lp
                    meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, 0)
                    name = lse_kernel_name(dtype, mode, ti, U)
                    names.append(name)
                    rpb = LSE_MAX_G // G if G == 32 else 1
                    configs.append((name, (-(-R // rpb),), (G, rpb), meta))
                    continue
                hp = hyb_plan(dtype, mode, N) if v > 1 else None
                if hp:  # one block per row, cache in registers + shared memory
                    P, G, S, cs = hp
                    meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, S)
                    name = hyb_kernel_name(dtype, mode, P, cs)
                    names.append(name)
                    smem[len(configs)] = S * G * 16
                    configs.append((name, (R,), (G,), meta))
                    continue
                sp = short_plan(dtype, mode, N) if v > 1 else None
                if sp:  # L lanes per row, 32 / L rows per warp, sizes fixed at compile time
                    L, P, wpb, h = sp
                    meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, 1)
                    name = short_kernel_name(dtype, mode, L, P, h)
                    names.append(name)
                    rpb = wpb * (32 // L)
                    configs.append((name, (-(-R // rpb),), (32, wpb), meta))
                    continue
                pp = pipe_plan(dtype, mode, N) if v > 1 else None
                if pp:  # a warp (or two) per row, looping over rows, next row loaded while writing
                    P, minb, S, H, rpw, wdef = pp
                    meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, 1)
                    name = pipe_kernel_name(dtype, mode, P, minb, S, H)
                    names.append(name)
                    slots = math.ceil(R / rpw)  # rows in flight per step (a warp or pair each)
                    wpb = warps_per_block(S, wdef)
                    configs.append((name, (-(-slots // (wpb // S)),), (32, wpb), meta))
                    continue
                wp = warp_packs(dtype, mode, N) if v > 1 else 0
                if wp:  # one warp per row, WARP_WPB (else 4) rows per block, exact grid
                    meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, 1)
                    name = warp_kernel_name(dtype, mode, wp)
                    names.append(name)
                    wpb = warps_per_block(1, WARP_WPB.get(wp, 4))
                    configs.append((name, (-(-R // wpb),), (32, wpb), meta))
                    continue
                raw = raw_cache(dtype, v, mode, nvec)
                me = maxe(dtype, v, raw, nvec)
                # as few threads per row as keep every thread's cache full (MAXE vectors): many
                # independent 16-byte loads in flight per thread is what reaches the bandwidth;
                # groups are any multiple of 32 (block_reduce allows it), so no power-of-two
                # rounding leaves threads with a fraction of their cache in use
                G = _group(nvec, me)
                ne = -(-nvec // G) if G <= 1024 else 0  # 0: loop mode
                G = min(G, 1024)
                rpb = 4 if G == 32 else 1
                meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, ne)
                name = row_kernel_name(dtype, mode, v, ti, raw, nvec)
                names.append(name)
                configs.append((name, (-(-R // rpb),), (G, rpb), meta))
        else:
            meta = meta_rows + struct.pack("<7q", N, lay.sx, lay.sy, R, lay.seq, lay.shift, 0)
            name = col_kernel_name(dtype, mode, ti)
            names.append(name)
            configs.append((name, (-(-R // 256),), (256,), meta))
        if mode == "ce_loss":
            names.append(f"ce_loss_finish<{ctype(dtype)}>")
        mod = get_module(ROWWISE_SOURCE, names, handle.device_id)
        ysl = Slot(ys) if ys is not None else ctypes.c_void_p(0)
        for i, nb in smem.items():
            _allow_smem(mod.kernels[configs[i][0]], nb)
        self.main = [
            Launch(mod.ptr[n], g, b, [ysl, Slot(xs_slot), tslot, ws_slot, m], smem.get(i, 0))
            for i, (n, g, b, m) in enumerate(configs)
        ]
        self.vec_ok = can_vec
        self.xy = (xs_slot, ys if softmax_like else None)
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
            esz = 16
            if yi is not None and (ptrs[xi] - ptrs[yi]) % esz:
                main = self.main[1]
        main(ptrs, ws_ptr, stream)
        if self.finish is not None:
            self.finish(ptrs, ws_ptr, stream)
