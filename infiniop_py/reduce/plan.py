"""The reduction planner (sum / max / mean of a strided tensor over any set of axes).

The kept and the reduced dims are collapsed separately (no copies, no permutation of data: only
the index arithmetic is permuted). A *row* plan reads each output's elements along the input's
fastest dim (last-dim and full reductions), a *column* plan walks neighbouring outputs along a
kept fastest dim (middle, outer and multi-axis reductions). Three ordered rule tables
(``infiniop_py.planner``) choose the kernels: ``ROW_RULES`` who reads a row, ``FINISH_RULES``
how the partials of a row split over several blocks are combined, ``COL_RULES`` the column
kernel. docs/perf/reductions.md gives the measurements behind each rule id. Every combine has a
fixed order (no float atomics): results are bitwise identical call to call.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..cuda.kernel import ctype
from ..dtypes import DType, acc_size, itemsize
from ..layout import MAXD, collapse
from ..planner import Rule, always, first_match
from ..status import Status, error

OPS = {"sum": ("SumOp", 0), "max": ("MaxOp", 0), "mean": ("SumOp", 1)}  # Op type and MEAN of each op
HALF = (DType.F16, DType.BF16)  # rows of these on the 16-byte path: raw 32-bit words (R16State)
WARP_DTYPES = (DType.F32, DType.F16, DType.BF16)  # reduce_rows_warp instantiations
RW_NP = (1, 2, 4, 8)  # reduce_rows_warp: 16-byte packs per lane per batch


def pow2ceil(n: int) -> int:
    """The least power of two >= ``n`` (1 for n <= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


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
    """``shape`` and its stride sets, if at most MAXD dims are left after collapsing (else
    NOT_IMPLEMENTED)."""
    if len(shape) > MAXD:
        raise error(Status.NOT_IMPLEMENTED, f"more than {MAXD} non-mergeable dims are not supported")
    return tuple(shape), [tuple(s) for s in strides_list]


# -- row plans ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rows:
    """A row reduction: M outputs of L = Ri * Ro elements each, the Ri of the innermost reduced
    dim read as 16-byte packs of ``vec`` elements (1: scalar loads) on ``sm`` SMs."""

    dtype: DType
    M: int
    L: int
    Ri: int
    Ro: int
    vec: int
    sm: int

    @property
    def packs(self) -> int:
        return -(-self.Ri // self.vec)

    @property
    def half(self) -> bool:  # rows on raw 32-bit words
        return self.dtype in HALF and self.vec > 1


@dataclass(frozen=True)
class WarpRows:
    """``reduce_rows_warp``: a warp per row, ``rows_per_block`` rows per block, no split; each lane
    issues NP 16-byte loads per batch (the fewest of ``RW_NP`` that hold the row at once)."""

    rows_per_block: int = 4


@dataclass(frozen=True)
class Group:
    """``reduce_rows``: a group of G threads per row, ``rows_per_block`` rows
    per block. G is ``threads``, or with ``packs_per_thread`` the power of two that gives each
    thread about that many packs, between ``min_threads`` and 256 (a warp: 4 rows per block)."""

    threads: int = 0
    rows_per_block: int = 1
    packs_per_thread: int = 0
    min_threads: int = 0

    def size(self, p: Rows) -> tuple[int, int]:
        if not self.packs_per_thread:
            return self.threads, self.rows_per_block
        G = min(256, max(self.min_threads, pow2ceil(-(-p.Ri // (p.vec * self.packs_per_thread)))))
        return G, 4 if G == 32 else 1


ROW_RULES = (
    Rule(
        "rows-warp",
        lambda p: p.dtype in WARP_DTYPES and p.vec > 1 and p.Ro == 1 and p.packs <= 32 * RW_NP[-1],
        WarpRows(),
    ),
    Rule(
        "rows16-warp",
        lambda p: p.half and p.Ro == 1 and p.L > 512 and p.Ri >= 2048 and p.M >= 8 * p.sm,
        Group(packs_per_thread=32, min_threads=32),
    ),
    Rule("rows-packed", lambda p: p.vec > 1 and p.Ro == 1 and p.L > 512, Group(packs_per_thread=16, min_threads=64)),
    Rule("rows-short", lambda p: p.L <= 512, Group(32, 8)),
    Rule("rows-mid", lambda p: p.L <= 4096, Group(128)),
    Rule("rows-long", always, Group(256)),
)


@dataclass(frozen=True)
class Split:
    """A row plan's split: S chunks per row; ``sweep``: one contiguous 16-bit row per output (one
    row per block, not split along outer positions), which a 16-bit reduce_rows can read grid-stride."""

    S: int
    M: int
    rows_per_block: int
    sweep: bool


@dataclass(frozen=True)
class Finish:
    """How the S partials of a split row are combined. ``last``: in the same launch by the block
    that finishes last (1: fence + ticket, partials in the workspace; 3: {flag, partial} slots in
    descriptor-owned memory, float accumulators only); ``second``: by a second kernel,
    ``reduce_finish`` with a warp (``"warp"``) or a block (``"block"``) per output.
    ``sweep``: a 16-bit reduce_rows reads the row grid-stride (ILV) instead of a chunk per block."""

    last: int = 0
    sweep: int = 0
    second: str = ""


FINISH_RULES = (
    Rule("one-pass", lambda s: s.S == 1, Finish()),
    Rule("sweep-flagged", lambda s: s.sweep and s.M <= 32, Finish(last=3, sweep=1)),
    Rule("sweep", lambda s: s.sweep, Finish(sweep=1, second="warp")),
    Rule("last-block", lambda s: s.rows_per_block == 1 and s.M <= 32, Finish(last=1)),
    Rule("finish-block", lambda s: s.M <= 32, Finish(second="block")),
    Rule("finish-warp", always, Finish(second="warp")),
)


def split_rows(p: Rows, G: int, rpb: int) -> tuple[int, int, int]:  # noqa: N803
    """(S, chunk, split_outer): with too few threads to fill the GPU, the reduced extent is cut
    into S chunks so that the grid is one wave (packed rows: ~1024 resident threads per SM, U = 8
    packs per thread; scalar rows: 2048) and no chunk is shorter than a thread's share."""
    packed = p.vec > 1
    target = p.sm * (1024 if packed else 2048)
    per = G * p.vec * (8 if packed else 4)
    threads = -(-p.M // rpb) * G * rpb
    if threads >= target or p.L < G * p.vec * 8:
        return 1, 0, 0
    want = min(-(-target // threads), max(1, p.L // per), 65535)
    if want <= 1:
        return 1, 0, 0
    if p.Ri >= want * G * p.vec or p.Ro == 1:
        chunk = -(-p.Ri // want)
        chunk = -(-chunk // p.vec) * p.vec  # whole packs
        return -(-p.Ri // chunk), chunk, 0
    chunk = -(-p.Ro // min(want, p.Ro))
    return -(-p.Ro // chunk), chunk, 1


def row_kernel(dtype: DType, op: str, vec: int, fin: Finish) -> str:
    """The kernel of a grouped row plan (16-bit packed rows: raw 32-bit words, reduce_kernels.cu R16State)."""
    o, mean = OPS[op]
    return f"reduce_rows<{ctype(dtype)}, {o}, {mean}, {vec}, {fin.last}, {fin.sweep}>"


def warp_kernel(dtype: DType, op: str, np_: int) -> str:
    """reduce_rows_warp; DEP (every combine made to depend on all NP loads) for sums only."""
    o, mean = OPS[op]
    return f"reduce_rows_warp<{ctype(dtype)}, {o}, {mean}, {np_}, {int(op != 'max')}>"


# -- column plans ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cols:
    """A column reduction: M outputs along a kept fastest dim, ``cv`` of them per 16-byte pack
    (1: scalar), L reduced elements each; S > 1 when a split would be needed to fill the GPU."""

    dtype: DType
    M: int
    L: int
    cv: int
    S: int
    sm: int


@dataclass(frozen=True)
class Tile:
    """``reduce_cols_tile``: one launch, no workspace: a block owns TX x cv outputs and their whole
    reduced extent, shared by BY thread rows combined by a shared-memory tree. TX: whole 128-byte
    lines per reduced position while that still gives ``wave_pct``% of a block per SM, else narrower
    tiles (at least 32 bytes); BY fills about 1024 resident threads per SM with at least 4
    positions per thread."""

    wave_pct: int = 95
    max_smem: int = 48 * 1024

    def size(self, c: Cols) -> tuple[int, int, int]:
        """(TX, BY, nblocks)."""
        seg = c.cv * itemsize(c.dtype)  # bytes per thread per reduced position
        ncols = -(-c.M // c.cv)
        tx_line, tx_min = max(1, 128 // seg), max(1, 32 // seg)
        if -(-ncols // tx_line) * 100 >= c.sm * self.wave_pct:
            TX = tx_line
        else:
            TX = max(tx_min, 1 << (max(1, ncols // c.sm).bit_length() - 1))
        TX = max(1, min(TX, 32, pow2ceil(ncols)))
        nblocks = -(-ncols // TX)
        tpb = min(1024, max(128, pow2ceil(-(-c.sm * 1024 // nblocks))))
        if nblocks >= c.sm:
            tpb = min(tpb, 512)
        BY = max(1, min(tpb // TX, 1 << (max(1, c.L // 4).bit_length() - 1)))
        while BY > 1 and (BY // 2) * TX * c.cv * acc_size(c.dtype) > self.max_smem:
            BY //= 2
        return TX, BY, nblocks


# "cols": reduce_cols, 32 x 8 threads, threadIdx.x on neighbouring outputs (16-byte packs of them
# where cv > 1), threadIdx.y and the loop over the reduced extent
COL_RULES = (
    Rule("cols-tile", lambda c: c.S > 1, Tile()),
    Rule("cols-vec", lambda c: c.cv > 1, "cols"),
    Rule("cols", always, "cols"),
)


def tile_vec(cv: int, dtype: DType) -> int:
    """Pack width of a tile plan: cv, or scalar where cv 64-bit accumulators (int8 max: 16) do
    not fit the 64 registers of a 1024-thread block."""
    return cv if cv * acc_size(dtype) <= 64 else 1


def tile_kernel(dtype: DType, op: str, cv: int) -> str:
    o, mean = OPS[op]
    return f"reduce_cols_tile<{ctype(dtype)}, {o}, {mean}, {cv}>"


def col_kernel(dtype: DType, op: str, cv: int) -> str:
    o, mean = OPS[op]
    return f"reduce_cols<{ctype(dtype)}, {o}, {mean}, {cv}>"


# -- the plan ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReducePlan:
    """What ``ReduceKernel`` launches: ``kernel`` on (grid, block) with ``meta`` (RedMeta), then,
    for ``finish``, that kernel on (finish_grid, finish_block)."""

    kind: str  # "none" (no outputs), "rows", "cols" or "tile"
    rules: tuple = ()  # ids of the rules that chose it
    kernel: str = ""
    grid: tuple = (1,)
    block: tuple = (1,)
    meta: bytes = b""
    vec: int = 1  # elements per 16-byte pack (cols / tile: the input must be 16-byte aligned)
    S: int = 1  # chunks per row (rows) or per output column (cols)
    M: int = 0
    L: int = 0
    workspace: int = 0
    shmem: int = 0  # dynamic shared memory of the main kernel (tile)
    last: int = 0  # one-launch finish of a split row (Finish.last): needs per-stream tickets
    finish: str = ""
    finish_grid: tuple = ()
    finish_block: tuple = ()


def plan_reduce(
    shape, x_strides, y_strides, axes, dtype: DType, sm_count: int, op: str = "sum", col_vec: bool = True
) -> ReducePlan:
    """Plan ``op`` of ``shape`` over ``axes``; ``y_strides[i]`` is the output stride of kept input
    dim i (ignored for reduced dims). ``col_vec``: a column plan may use 16-byte packs (the caller
    falls back to ``col_vec=False`` when x is not aligned)."""
    ndim = len(shape)
    axes = set(axes)
    kept = [i for i in range(ndim) if i not in axes]
    red = [i for i in range(ndim) if i in axes]
    M = math.prod(shape[i] for i in kept)
    L = math.prod(shape[i] for i in red)
    if M == 0:
        return ReducePlan("none", L=L)
    kshape, (kin, kout) = collapse([shape[i] for i in kept], [[x_strides[i] for i in kept], [y_strides[i] for i in kept]])
    if L == 0:
        rshape, rstr = (), ()
    else:
        rshape, (rstr,) = collapse([shape[i] for i in red], [[x_strides[i] for i in red]])
    kshape, (kin, kout) = fit_dims(kshape, [kin, kout])
    kept_meta = pack_dim_meta(kshape, [kin, kout])
    pack = 16 // itemsize(dtype)
    if not kshape or (rshape and rstr[-1] <= kin[-1]) or L <= 1:
        return _row_plan(dtype, op, sm_count, M, L, kept_meta, rshape, rstr, pack)
    # columns
    rshape, (rstr,) = fit_dims(rshape, [rstr])
    BY = 8
    cv = pack
    aligned = all(st % cv == 0 for st in kin[:-1]) and all(st % cv == 0 for st in rstr)
    if not (col_vec and kin[-1] == 1 and kshape[-1] % cv == 0 and aligned):
        cv = 1
    gx = -(-M // (32 * cv))
    threads = gx * 32 * BY
    target = sm_count * 2048
    S = 1
    if threads < target:
        want = min(-(-target // threads), max(1, L // (BY * 4)), 65535)
        if want > 1:
            chunk = -(-L // want)
            S = -(-L // chunk)
    si = rstr[0] if len(rshape) == 1 else 0
    meta = kept_meta + pack_dim_meta(rshape, [rstr]) + struct.pack("<6qii", M, L, L, si, 1, 0, 1, 0)
    c = Cols(dtype, M, L, cv, S, sm_count)
    rule, cfg = first_match(COL_RULES, c, "reduction columns")
    if isinstance(cfg, Tile):
        tv = tile_vec(cv, dtype)
        c = Cols(dtype, M, L, tv, S, sm_count)
        TX, BY, nblocks = cfg.size(c)
        shmem = max(1, BY // 2) * TX * tv * acc_size(dtype)
        return ReducePlan("tile", (rule,), tile_kernel(dtype, op, tv), (nblocks,), (TX, BY), meta, tv, 1, M, L, shmem=shmem)
    return ReducePlan("cols", (rule,), col_kernel(dtype, op, cv), (gx, 1), (32, BY), meta, cv, 1, M, L)


def _row_plan(dtype, op, sm_count, M, L, kept_meta, rshape, rstr, pack) -> ReducePlan:  # noqa: N803
    Ri = rshape[-1] if rshape else max(L, 0)
    si = rstr[-1] if rshape else 0
    oshape, ostr = (rshape[:-1], rstr[:-1]) if rshape else ((), ())
    oshape, (ostr,) = fit_dims(oshape, [ostr])
    Ro = math.prod(oshape) if L else 1
    if L == 0:
        Ri, Ro = 0, 1
    vec = pack if si == 1 and Ri >= 2 * pack else 1
    red_meta = pack_dim_meta(oshape, [ostr])
    p = Rows(dtype, M, L, Ri, Ro, vec, sm_count)
    rule, cfg = first_match(ROW_RULES, p, "reduction rows")
    if isinstance(cfg, WarpRows):
        np_ = min(RW_NP[-1], pow2ceil(-(-p.packs // 32)))
        rpb = cfg.rows_per_block
        meta = kept_meta + red_meta + struct.pack("<6qii", M, L, Ri, si, Ro, 0, 1, 0)
        return ReducePlan("rows", (rule,), warp_kernel(dtype, op, np_), (-(-M // rpb), 1), (32, rpb), meta, vec, 1, M, L)
    G, rpb = cfg.size(p)
    S, chunk, outer = split_rows(p, G, rpb)
    fin_rule, fin = first_match(FINISH_RULES, Split(S, M, rpb, p.half and rpb == 1 and Ro == 1 and not outer), "finish")
    meta = kept_meta + red_meta + struct.pack("<6qii", M, L, Ri, si, Ro, chunk, S, outer)
    ws = S * M * acc_size(dtype) if S > 1 and fin.last != 3 else 0
    second = {}
    if fin.second == "block":
        second = {"finish_grid": (M,), "finish_block": (min(1024, max(32, pow2ceil(S))),)}
    elif fin.second:
        second = {"finish_grid": (-(-M // 8),), "finish_block": (256,)}
    if fin.second:
        o, mean = OPS[op]
        second["finish"] = f"reduce_finish<{ctype(dtype)}, {o}, {mean}, {int(fin.second == 'block')}>"
    kernel = row_kernel(dtype, op, vec, fin)
    return ReducePlan(
        "rows", (rule, fin_rule), kernel, (-(-M // rpb), S), (G, rpb), meta, vec, S, M, L, ws, last=fin.last, **second
    )


def kernel_names(dtype: DType, op: str) -> list[str]:
    """Every kernel a plan of (dtype, op) can launch: each rule's kernel on the paths it applies
    to (packed and scalar rows, packed and scalar columns)."""
    pack = 16 // itemsize(dtype)
    o, mean = OPS[op]
    k = f"{ctype(dtype)}, {o}, {mean}"
    names = [warp_kernel(dtype, op, n) for n in RW_NP] if dtype in WARP_DTYPES else []
    for vec in (pack, 1):
        for rule in FINISH_RULES:
            if not rule.config.sweep or (dtype in HALF and vec > 1):
                names.append(row_kernel(dtype, op, vec, rule.config))
        names += [col_kernel(dtype, op, vec), tile_kernel(dtype, op, tile_vec(vec, dtype))]
    names += [f"reduce_finish<{k}, {b}>" for b in (0, 1)]
    return list(dict.fromkeys(names))
