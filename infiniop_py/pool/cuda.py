"""NVIDIA backend of the pooling operators: planning and launches of the kernels in ``pool.cu``
(generic) and ``pool_fast.cu`` (fast paths of the common 2-d windows).

``fast_plan`` picks a fast path by a short rule table: 2-d, a square window (k, s, p) listed in
``FAST_RULES``, and every tensor storing W innermost ("rows" kernels) or C innermost ("cl"
kernels, channels-last); the kernels take any other strides and alignment. Everything else takes
the generic ``plan``. Both are pure Python (test/test_pooling.py runs their index arithmetic on
the CPU).

``plan`` (generic) picks the lane dim (N or C when the written tensor stores it innermost, so
channels-last is coalesced along C; otherwise C with one lane per tile, coalesced along the last
spatial dim), the tile extents (``choose_tile``), the halo box of the tiled max_pool_backward
kernel, and packs ``PoolMeta``.

Workspace: 0 (the metadata travels by value in the launch), except max_pool_backward on a fast
path: one byte per window (its argmax offset), N * C * OH * OW bytes with rows or pixels rounded
up to whole 16-byte vectors.
"""

from __future__ import annotations

import ctypes
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from ..cuda import runtime
from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..cuda.launch import align_up
from ..dtypes import F, itemsize
from ..layout import fast_div_params
from ..spatial import pad3
from ..status import Status, error

SOURCE = (Path(__file__).parent / "pool.cu").read_text()
FAST_SOURCE = (Path(__file__).parent / "pool_fast.cu").read_text()
MAX_BLOCK = 512  # POOL_MAX_BLOCK (__launch_bounds__)
VB = 4  # POOL_VB: elements per work item
LANES = 32  # lanes per tile when N or C is the written tensor's innermost dim
MAX_TILE = 8192  # elements per tile at most
MIN_ROW = 32  # positions per tile row along S2 at least (coalescing) when a tile has one lane
SMEM_LIMIT = 32 * 1024  # dynamic shared memory of the tiled max backward; larger halos use MODE 4
INT_LIMIT = (1 << 31) - 1

MAX_FWD, AVG_FWD, AVG_BWD, MAX_BWD_TILED, MAX_BWD_GATHER = 0, 1, 2, 3, 4
MODES = {"max_pool": MAX_FWD, "avg_pool": AVG_FWD, "avg_pool_backward": AVG_BWD, "max_pool_backward": MAX_BWD_TILED}


class FastDivC(ctypes.Structure):
    _fields_ = [("d", ctypes.c_uint32), ("m", ctypes.c_uint32), ("s", ctypes.c_uint32)]


def _fd(d: int) -> FastDivC:
    return FastDivC(*fast_div_params(d))


class PoolMetaC(ctypes.Structure):
    """Mirror of ``struct PoolMeta`` in pool.cu (a static_assert there pins its size)."""

    _fields_ = [
        ("str", (ctypes.c_longlong * 5) * 3),
        *((n, ctypes.c_int * 3) for n in ("L", "O", "k", "s", "p", "T", "ext", "H")),
        *((n, ctypes.c_int) for n in ("TL", "lanes", "items", "halo_items", "ntiles", "V", "G", "pad_")),
        *((n, FastDivC) for n in ("dTL", "dG", "dT1", "dn2", "dn1", "dn0", "dnl", "dHL", "dH2", "dH1")),
        ("ds", FastDivC * 3),
    ]


assert ctypes.sizeof(PoolMetaC) == 408 and PoolMetaC.TL.offset == 216 and PoolMetaC.dTL.offset == 248
assert PoolMetaC.ds.offset == 368


def _balance(ext: int, t: int) -> int:
    """The smallest tile extent giving the same number of tiles as ``t`` (less waste at the edge)."""
    t = max(1, min(t, ext))
    return -(-ext // -(-ext // t))


def _extent_choices(ext: int) -> list[int]:
    """Candidate tile extents along a dim of ``ext``: balanced powers of two and the whole dim."""
    return sorted({_balance(ext, 1 << j) for j in range(ext.bit_length() + 1)} | {ext})


def halo_extents(g3: dict, t) -> list[int]:
    """Windows per dim that can cover a tile of extent t: min(O, (T + k - 2) // s + 1)."""
    return [min(o, (tt + k - 2) // s + 1) for o, tt, k, s in zip(g3["O"], t, g3["k"], g3["s"])]


@dataclass
class Plan:
    mode: int
    meta: bytes
    ntiles: int
    smem: int
    TL: int
    T: list
    H: list
    V: int
    block: int


BLOCKS = tuple(range(128, MAX_BLOCK + 1, 32))  # block sizes a plan may pick


def block_for(items: int, halo: int = 0, window: float = 0.0) -> tuple[int, float]:
    """(block size, thread slots per tile): the block size in BLOCKS wasting the fewest thread
    slots over a tile's items (plus ``window`` x its halo items); ties go to the larger block."""
    best = None
    for b in BLOCKS:
        slots = -(-items // b) * b + window * (-(-halo // b) * b)
        if best is None or (slots, -b) < (best[1], -best[0]):
            best = (b, slots)
    return best


def device_threads(device_id: int) -> tuple[int, int]:
    """(SMs, resident threads per SM) of a device; 2048 threads per SM (sm_80, sm_90) where its
    properties do not say."""
    p = runtime.properties(device_id)
    return int(p["sm_count"]), int(p.get("threads_per_sm") or 2048)


def choose_tile(ext, lanes: int, tiles_outside: int, per_item: int, threads: int, g3: dict | None = None, smem_limit: int = 0):
    """(tile extents, block size) for iteration extents ``ext`` (three spatial dims), or None when
    no tile's halo fits ``smem_limit`` (tiled max backward, ``g3`` given).

    Model of the time: a tile costs its thread slots (``block_for``: items = lanes x
    ceil(T2 / per_item) x T1 x T0, plus, with a halo, its halo items at the cost of one window scan
    each, prod(k) loads against per_item elements per item); the GPU runs ``threads`` threads at once,
    and no schedule beats the longest tile. Ties go to fewer, then wider, tiles."""
    best = None
    window = math.prod(g3["k"]) / per_item if g3 is not None else 0.0
    for t0, t1, t2 in itertools.product(*(_extent_choices(e) for e in ext)):
        T = [t0, t1, t2]
        if lanes * t0 * t1 * t2 > MAX_TILE and T != [1, 1, 1]:
            continue
        if lanes == 1 and t2 < min(ext[2], MIN_ROW):
            continue
        halo = 0
        if g3 is not None:
            halo = lanes * math.prod(halo_extents(g3, T))
            if 4 * halo > smem_limit:
                continue
        block, slots = block_for(lanes * -(-t2 // per_item) * t1 * t0, halo, window)
        ntiles = tiles_outside * math.prod(-(-e // t) for e, t in zip(ext, T))
        cost = max(ntiles * slots / threads, slots / block)
        key = (cost, ntiles, -t2, -t1)
        if best is None or key < best[0]:
            best = (key, T, block)
    return None if best is None else (best[1], best[2])


def plan(geom, written, reads, mode: int, smem_limit: int | None = None, *, threads: int) -> Plan:
    """Launch plan for ``mode`` (MAX_FWD, AVG_FWD, AVG_BWD, or MAX_BWD_TILED, which falls back to
    MAX_BWD_GATHER when no tile's halo box fits ``smem_limit`` bytes of shared memory).

    written: descriptor of the output / grad_input; reads: the read tensors in kernel order
    (input; or grad_output, input); threads: the device's resident threads (SMs x threads per SM,
    ``device_threads``), which the tile-size model fills."""
    smem_limit = SMEM_LIMIT if smem_limit is None else smem_limit
    g3 = {
        "L": pad3(geom.L, 1),
        "O": pad3(geom.O, 1),
        "k": pad3(geom.k, 1),
        "s": pad3(geom.s, 1),
        "p": pad3(geom.p, 0),
    }
    sizes = (geom.N, geom.C, *geom.L, *geom.O)
    if (
        max(sizes) > INT_LIMIT
        or math.prod(geom.k) > INT_LIMIT
        or any(L + 2 * p + k + s > INT_LIMIT for L, p, k, s in zip(g3["L"], g3["p"], g3["k"], g3["s"]))
    ):
        raise error(
            Status.NOT_IMPLEMENTED, f"pooling on NVIDIA: a dim, window or position reaches 2^31 ({list(sizes)}, k {list(geom.k)})"
        )
    # Lane dim: N (0) or C (1) when the written tensor stores it innermost, else C with one lane.
    dims = [d for d in range(written.ndim) if written.shape[d] > 1]
    inner = min(dims, key=lambda d: (written.strides[d], -d)) if dims else written.ndim - 1
    lane = inner if inner < 2 else 1
    other = 1 - lane
    lanes = written.shape[lane]
    TL = min(lanes, LANES) if inner < 2 else 1
    nl = -(-lanes // TL)
    backward = mode >= AVG_BWD
    V = VB
    ext = g3["L"] if backward else g3["O"]
    outside = written.shape[other] * nl
    choice = None
    if mode == MAX_BWD_TILED:
        choice = choose_tile(ext, TL, outside, V, threads, g3, smem_limit)
        if choice is None:
            mode = MAX_BWD_GATHER
    if choice is None:
        choice = choose_tile(ext, TL, outside, V, threads)
    T, block = choice
    H = halo_extents(g3, T) if mode == MAX_BWD_TILED else [1, 1, 1]
    G = -(-T[2] // V)
    ntl = [-(-e // t) for e, t in zip(ext, T)]
    ntiles = outside * math.prod(ntl)
    if ntiles > INT_LIMIT:
        raise error(Status.NOT_IMPLEMENTED, f"pooling on NVIDIA: {ntiles} tiles reach 2^31")
    m = PoolMetaC()
    tensors = [written, *reads] + [written] * (2 - len(reads))
    for j, desc in enumerate(tensors):
        for i, v in enumerate([desc.strides[lane], desc.strides[other], *pad3(desc.strides[2:], 0)]):
            m.str[j][i] = v
    for name in ("L", "O", "k", "s", "p"):
        getattr(m, name)[:] = g3[name]
    m.T[:], m.ext[:], m.H[:] = T, ext, H
    m.TL, m.lanes, m.V, m.G = TL, lanes, V, G
    m.items = TL * G * T[1] * T[0]
    m.halo_items = TL * math.prod(H) if mode == MAX_BWD_TILED else 0
    m.ntiles = ntiles
    m.dTL, m.dG, m.dT1 = _fd(TL), _fd(G), _fd(T[1])
    m.dn2, m.dn1, m.dn0, m.dnl = _fd(ntl[2]), _fd(ntl[1]), _fd(ntl[0]), _fd(nl)
    m.dHL, m.dH2, m.dH1 = _fd(TL), _fd(H[2]), _fd(H[1])
    for d in range(3):
        m.ds[d] = _fd(g3["s"][d])
    smem = 4 * m.halo_items
    return Plan(mode, bytes(m), ntiles, smem, TL, T, H, V, block)


def kernel_name(mode: int, dtype) -> str:
    if mode == MAX_BWD_TILED:
        return f"pool_max_backward_tiled<{ctype(dtype)}>"
    return f"pool_kernel<{ctype(dtype)}, {mode}>"


# -- fast paths (pool_fast.cu) -------------------------------------------------------------------
FAST_RULES = ((2, 2, 0), (3, 2, 1))  # square 2-d windows (k, s, p) with a fast path
FAST_BLOCK = 256  # PF_BLOCK
FAST_FH, FAST_FW = 1, 1  # PF_FH, PF_FW: output rows / columns per thread of the forward kernels
ROWS, CL = "rows", "cl"
# kernel MODE (pool_fast.cu) per stage of each operator: (backward kernel?, MODE)
FAST_STAGES = {
    MAX_FWD: ((False, 0),),
    AVG_FWD: ((False, 1),),
    AVG_BWD: ((True, 1),),
    MAX_BWD_TILED: ((False, 2), (True, 2)),  # argmax bytes into the workspace, then the gather
}


class PoolFastMetaC(ctypes.Structure):
    """Mirror of ``struct PoolFastMeta`` in pool_fast.cu (a static_assert there pins its size)."""

    _fields_ = [
        ("st", (ctypes.c_longlong * 4) * 3),
        *((n, ctypes.c_int) for n in ("H", "W", "OH", "OW", "C", "items")),
        ("d", FastDivC * 3),
        ("pad_", ctypes.c_int),
    ]


assert ctypes.sizeof(PoolFastMetaC) == 160 and PoolFastMetaC.d.offset == 120


@dataclass
class FastStage:
    """One launch: kernel ``pool_fast_<kernel><T, mode, k, s, p>``; tensor slots as in the
    kernel's parameters, ``"ws"`` for the argmax bytes in the workspace."""

    kernel: str
    mode: int
    slots: tuple
    V: int  # elements per thread along the innermost dim (one 16-byte vector)
    dims: tuple  # work item -> (q0, q1, q2, q3): the extents of q0, q1, q2
    items: int
    meta: bytes


@dataclass
class FastPlan:
    layout: str  # ROWS or CL
    rule: tuple  # (k, s, p)
    stages: list
    workspace: int  # bytes: the argmax offsets of max_pool_backward (0 otherwise)
    idx_strides: tuple  # their (N, C, H, W) strides


def fast_layout(written, reads) -> str | None:
    """ROWS when every tensor stores W innermost (stride 1), CL when every one stores C innermost,
    else None; a dim of size 1 fits either. ROWS wins a tie unless the written W is 1."""
    tensors = [written, *reads]
    rows = all(t.strides[3] == 1 or t.shape[3] == 1 for t in tensors)
    cl = all(t.strides[1] == 1 or t.shape[1] == 1 for t in tensors)
    if rows and (written.shape[3] > 1 or not cl):
        return ROWS
    return CL if cl else None


def fast_plan(geom, written, reads, mode: int) -> FastPlan | None:
    """The fast path's launches for ``mode`` (MAX_FWD, AVG_FWD, AVG_BWD or MAX_BWD_TILED), or None
    when no rule applies (2-d, a square window listed in FAST_RULES, a ROWS or CL layout, work
    items within 31 bits). written / reads: the operator's tensors in kernel order.

    max_pool_backward takes two launches: the forward kernel in MODE 2 writes each window's argmax
    offset (a byte) to the workspace, laid out (N, C, OH, OWp) for ROWS and (N, OH, OW, Cp) for CL
    with OWp / Cp rounded up to V (whole vectors per row or pixel); the backward kernel gathers."""
    if geom.n != 2 or len(set(zip(geom.k, geom.s, geom.p))) != 1:
        return None
    rule = (geom.k[0], geom.s[0], geom.p[0])
    layout = fast_layout(written, reads) if rule in FAST_RULES else None
    if layout is None:
        return None
    V = 16 // itemsize(written.dtype)
    k, s, p = rule
    (H, W), (OH, OW), N, C = geom.L, geom.O, geom.N, geom.C
    if V % s or max(N, C, H, W) > INT_LIMIT - 4 * (k + s):
        return None
    if layout == ROWS:
        owp = -(-OW // V) * V
        idx = (C * OH * owp, OH * owp, owp, 1)
    else:
        cp = -(-C // V) * V
        idx = (OH * OW * cp, 1, OW * cp, cp)
    stages = []
    for backward, kmode in FAST_STAGES[mode]:
        if layout == ROWS:
            dims = (-(-W // V), -(-H // s), C) if backward else (-(-OW // V), -(-OH // FAST_FH), C)
        else:
            cv = -(-C // V)
            dims = (cv, -(-W // s), -(-H // s)) if backward else (cv, -(-OW // FAST_FW), -(-OH // FAST_FH))
        items = math.prod(dims) * N
        if items > INT_LIMIT - FAST_BLOCK:
            return None
        if kmode != 2:  # the operator's own tensors
            strides = [written.strides, *(t.strides for t in reads)]
            slots = tuple(range(1 + len(reads)))
        elif backward:  # grad_input | grad_output, argmax bytes
            strides, slots = [written.strides, reads[0].strides, idx], (0, 1, "ws")
        else:  # argmax bytes | input
            strides, slots = [idx, reads[1].strides], ("ws", 2)
        m = PoolFastMetaC()
        for j, st in enumerate(strides):
            m.st[j][:] = st
        m.H, m.W, m.OH, m.OW, m.C, m.items = H, W, OH, OW, C, items
        for j in range(3):
            m.d[j] = _fd(dims[j])
        kernel = layout + ("_backward" if backward else "")
        stages.append(FastStage(kernel, kmode, slots, V, dims, items, bytes(m)))
    ws = align_up(N * idx[0]) if mode == MAX_BWD_TILED else 0
    return FastPlan(layout, rule, stages, ws, idx)


def fast_kernel_name(kernel: str, mode: int, rule, dtype) -> str:
    k, s, p = rule
    return f"pool_fast_{kernel}<{ctype(dtype)}, {mode}, {k}, {s}, {p}>"


class PoolKernel(CudaKernel):
    def __init__(self, info, handle, mode: int, written: str, reads: tuple[str, ...]):
        super().__init__(handle)
        w = info[written]
        self.launches = []
        if w.numel == 0:
            return
        descs = [info[r] for r in reads]
        args = [Slot(0), Slot(1), Slot(2) if len(reads) > 1 else ctypes.c_uint64(0)]
        fp = fast_plan(info.geom, w, descs, mode)
        if fp is not None:
            self.plan, self.workspace_size = fp, fp.workspace
            names = [fast_kernel_name(st.kernel, st.mode, fp.rule, w.dtype) for st in fp.stages]
            mod = get_module(FAST_SOURCE, names, handle.device_id)
            self.name = names[-1]
            self.launches = [
                Launch(mod.ptr[name], (-(-st.items // FAST_BLOCK),), (FAST_BLOCK,), [*map(Slot, st.slots), st.meta])
                for name, st in zip(names, fp.stages)
            ]
            return
        sms, per_sm = device_threads(handle.device_id)
        p = plan(info.geom, w, descs, mode, threads=sms * per_sm)
        self.plan = p
        self.name = name = kernel_name(p.mode, w.dtype)
        mod = get_module(SOURCE, [name], handle.device_id)
        grid = max(1, min(p.ntiles, sms * (per_sm // p.block) * 2))
        if p.mode == MAX_BWD_TILED:
            args = [Slot(0), Slot(1), Slot(2)]
        self.launches = [Launch(mod.ptr[name], (grid,), (p.block,), [*args, p.meta], p.smem)]

    def launch(self, ptrs, ws_ptr, rt, stream):
        for launch in self.launches:
            launch(ptrs, ws_ptr, stream)


def nvidia_factory(mode: int, written: str, reads: tuple[str, ...]):
    """The SPEC's ``nvidia`` callable, with ``compile_units()`` listing every kernel its plans
    can select: the generic kernel (MAX_BWD_TILED also lists its MAX_BWD_GATHER fallback) and the
    fast paths of every rule and layout."""

    def factory(info, handle):
        return PoolKernel(info, handle, mode, written, reads)

    modes = (MAX_BWD_TILED, MAX_BWD_GATHER) if mode == MAX_BWD_TILED else (mode,)
    fast = [
        fast_kernel_name(layout + ("_backward" if backward else ""), kmode, rule, dt)
        for rule in FAST_RULES
        for layout in (ROWS, CL)
        for backward, kmode in FAST_STAGES[mode]
        for dt in sorted(F)
    ]
    factory.compile_units = lambda: [
        (SOURCE, [kernel_name(m, dt) for m in modes for dt in sorted(F)]),
        (FAST_SOURCE, fast),
    ]
    return factory
