"""NVIDIA backend of the pooling operators: planning and launches of the kernels in ``pool.cu``.

``plan`` is pure Python (test/test_pooling.py runs its index arithmetic on the CPU): it picks
the lane dim (N or C when the written tensor stores it innermost, so channels-last is coalesced
along C; otherwise C with one lane per tile, coalesced along the last spatial dim), the tile
extents (``choose_tile``), the halo box of the tiled max_pool_backward kernel, and packs
``PoolMeta``. Workspace: 0 (the metadata travels by value
in the launch).
"""

from __future__ import annotations

import ctypes
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from ..cuda.compiler import Launch, Slot, get_module
from ..cuda.kernel import CudaKernel, ctype
from ..dtypes import F
from ..layout import fast_div_params
from ..status import Status, error

SOURCE = (Path(__file__).parent / "pool.cu").read_text()
MAX_BLOCK = 512  # POOL_MAX_BLOCK (__launch_bounds__)
VB = 4  # POOL_VB: elements per work item
LANES = 32  # lanes per tile when N or C is the written tensor's innermost dim
MAX_TILE = 8192  # elements per tile at most
MIN_ROW = 32  # positions per tile row along S2 at least (coalescing) when a tile has one lane
THREADS = 132 * 2048  # resident threads of an H100, for the tile-size model
SMEM_LIMIT = 32 * 1024  # dynamic shared memory of the tiled max backward; larger halos use MODE 4
INT_LIMIT = (1 << 31) - 1

MAX_FWD, AVG_FWD, AVG_BWD, MAX_BWD_TILED, MAX_BWD_GATHER = 0, 1, 2, 3, 4


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


def _pad3(values, fill: int) -> list[int]:
    values = list(values)
    return [fill] * (3 - len(values)) + values


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


def choose_tile(ext, lanes: int, tiles_outside: int, per_item: int, g3: dict | None = None, smem_limit: int = 0):
    """(tile extents, block size) for iteration extents ``ext`` (three spatial dims), or None when
    no tile's halo fits ``smem_limit`` (tiled max backward, ``g3`` given).

    Model of the time: a tile costs its thread slots (``block_for``: items = lanes x
    ceil(T2 / per_item) x T1 x T0, plus, with a halo, its halo items at the cost of one window scan
    each, prod(k) loads against per_item elements per item); the GPU runs THREADS threads at once,
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
        cost = max(ntiles * slots / THREADS, slots / block)
        key = (cost, ntiles, -t2, -t1)
        if best is None or key < best[0]:
            best = (key, T, block)
    return None if best is None else (best[1], best[2])


def plan(geom, written, reads, mode: int, smem_limit: int | None = None) -> Plan:
    """Launch plan for ``mode`` (MAX_FWD, AVG_FWD, AVG_BWD, or MAX_BWD_TILED, which falls back to
    MAX_BWD_GATHER when no tile's halo box fits ``smem_limit`` bytes of shared memory).

    written: descriptor of the output / grad_input; reads: the read tensors in kernel order
    (input; or grad_output, input)."""
    smem_limit = SMEM_LIMIT if smem_limit is None else smem_limit
    g3 = {
        "L": _pad3(geom.L, 1),
        "O": _pad3(geom.O, 1),
        "k": _pad3(geom.k, 1),
        "s": _pad3(geom.s, 1),
        "p": _pad3(geom.p, 0),
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
        choice = choose_tile(ext, TL, outside, V, g3, smem_limit)
        if choice is None:
            mode = MAX_BWD_GATHER
    if choice is None:
        choice = choose_tile(ext, TL, outside, V)
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
        for i, v in enumerate([desc.strides[lane], desc.strides[other], *_pad3(desc.strides[2:], 0)]):
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


class PoolKernel(CudaKernel):
    def __init__(self, info, handle, mode: int, written: str, reads: tuple[str, ...]):
        super().__init__(handle)
        w = info[written]
        self.launch_ = None
        if w.numel == 0:
            return
        p = plan(info.geom, w, [info[r] for r in reads], mode)
        self.plan = p
        name = kernel_name(p.mode, w.dtype)
        mod = get_module(SOURCE, [name], handle.device_id)
        from ..cuda.runtime import properties

        grid = max(1, min(p.ntiles, int(properties(handle.device_id)["sm_count"]) * (2048 // p.block) * 2))
        args = [Slot(0), Slot(1), Slot(2) if len(reads) > 1 else ctypes.c_uint64(0), p.meta]
        if p.mode == MAX_BWD_TILED:
            args = [Slot(0), Slot(1), Slot(2), p.meta]
        self.launch_ = Launch(mod.ptr[name], (grid,), (p.block,), args, p.smem)

    def launch(self, ptrs, ws_ptr, rt, stream):
        if self.launch_ is not None:
            self.launch_(ptrs, ws_ptr, stream)


def nvidia_factory(mode: int, written: str, reads: tuple[str, ...]):
    """The SPEC's ``nvidia`` callable, with ``compile_units()`` listing every kernel its plans
    can select (MAX_BWD_TILED also lists its MAX_BWD_GATHER fallback)."""

    def factory(info, handle):
        return PoolKernel(info, handle, mode, written, reads)

    modes = (MAX_BWD_TILED, MAX_BWD_GATHER) if mode == MAX_BWD_TILED else (mode,)
    factory.compile_units = lambda: [(SOURCE, [kernel_name(m, dt) for m in modes for dt in sorted(F)])]
    return factory
