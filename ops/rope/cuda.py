"""NVIDIA RoPE for packed pair groups, planned by a rule table over (algorithm, dtype).

Each rule names a config (``CONFIGS``); a config that does not fit the descriptor falls back
along grid -> heads -> units -> rows:

* ``rope_grid`` (kind "grid"): exact grid (head chunks, rows), 32-bit offsets, one pair group
  of U heads per thread, every load first. Needs every offset below 2^31 and nj <= NT.
* ``rope_heads`` (kind "heads", and the fallback of a grid config with the same U): the same
  with 64-bit offsets and grid (rows, head chunks).
* ``rope_units`` (kind "units", and the fallback of the above): one (head, pair group) unit per
  thread over about one resident wave, the next row's position and x loaded ahead.
* ``rope_kernel``: one block per row (pairs packed by P, or scalar for P = 1, the unaligned path).

The measurements behind each rule: docs/perf/pointwise.md, "rope".
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType, F, H, itemsize
from infiniop_py.elementwise.cuda import resident_blocks
from infiniop_py.planner import Rule, always, first_match

SOURCE = (Path(__file__).parent / "kernel.cu").read_text()
POS_KIND = {DType.I8: 0, DType.I16: 1, DType.I32: 2, DType.I64: 3, DType.U8: 4, DType.U16: 5, DType.U32: 6, DType.U64: 7}
MAX_GRID = 2**31 - 1
GRID_ROWS = 65535  # grid.y cap of rope_grid; rows past it go to grid.z
EXACT_THREADS = 128  # about this many threads per block of rope_heads
UNIT_THREADS = 256  # at most this many threads per block of rope_units and rope_kernel


class RopeConfig(NamedTuple):
    """kind "grid": rope_grid with U = ``heads`` heads per thread, at most ``threads`` threads per
    block and ``min_blocks`` blocks per SM asked of ptxas; "heads": rope_heads with U = ``heads``;
    "units": rope_units."""

    kind: str
    heads: int = 0
    threads: int = 0
    min_blocks: int = 0


CONFIGS = {
    "g2": RopeConfig("grid", 2, 128, 8),
    "g4": RopeConfig("grid", 4, 128, 4),
    "g2b": RopeConfig("grid", 2, 256, 4),
    "ex2": RopeConfig("heads", 2),
    "ex4": RopeConfig("heads", 4),
    "pers2": RopeConfig("units"),
}


class RopeProblem(NamedTuple):
    algo: int  # 0 GPT_J, 1 GPT_NEOX
    dtype: DType


RULES = (
    Rule("rope.gptj.f16", lambda p: p.algo == 0 and p.dtype is DType.F16, "g2"),
    Rule("rope.gptj.bf16", lambda p: p.algo == 0 and p.dtype is DType.BF16, "g4"),
    Rule("rope.gptj.f32", lambda p: p.algo == 0 and p.dtype is DType.F32, "g4"),
    Rule("rope.neox.half", lambda p: p.algo == 1 and p.dtype in H, "ex2"),
    Rule("rope.neox.f32", lambda p: p.algo == 1 and p.dtype is DType.F32, "g2b"),
    Rule("rope.f64", always, "pers2"),
)


def config_for(algo: int, dtype: DType) -> RopeConfig:
    return CONFIGS[first_match(RULES, RopeProblem(algo, dtype), "rope planner")[1]]


def max_pairs(algo: int, isz: int) -> int:
    """Widest pair group per thread: GPT_J loads 2P contiguous elements, GPT_NEOX P from each half."""
    return max(1, (8 if algo == 0 else 16) // isz)


def candidates(algo: int, isz: int) -> list[int]:
    out, p = [], 1
    while p <= max_pairs(algo, isz):
        out.append(p)
        p *= 2
    return out


def kernel_name(dtype: DType, algo: int, p: int) -> str:
    return f"rope_kernel<{ctype(dtype)}, {algo}, {p}>"


def units_name(dtype: DType, algo: int, p: int) -> str:
    return f"rope_units<{ctype(dtype)}, {algo}, {p}>"


def heads_name(dtype: DType, algo: int, p: int, u: int) -> str:
    return f"rope_heads<{ctype(dtype)}, {algo}, {p}, {u}>"


def grid_name(dtype: DType, algo: int, p: int, c: RopeConfig) -> str:
    return f"rope_grid<{ctype(dtype)}, {algo}, {p}, {c.heads}, {c.threads}, {c.min_blocks}>"


def packed_names(dtype: DType, algo: int, p: int) -> list[str]:
    """The kernels a descriptor with P = ``p`` > 1 may launch: its config and the fallbacks."""
    c = config_for(algo, dtype)
    names = [grid_name(dtype, algo, p, c)] if c.kind == "grid" else []
    names += [heads_name(dtype, algo, p, c.heads)] if c.kind in ("grid", "heads") else []
    return names + [units_name(dtype, algo, p), kernel_name(dtype, algo, p)]


def compile_units():
    names = []
    for d in sorted(F):
        for a in (0, 1):
            ps = candidates(a, itemsize(d))
            names += [kernel_name(d, a, 1)] + [n for p in ps[1:] for n in packed_names(d, a, p)]
    return [(SOURCE, names)]


def grid_block(nj: int, nhead: int, u: int, nt: int) -> tuple[int, int, int]:
    """(threads x, threads y, head chunks) of rope_grid / rope_heads: hb heads per k, at most nt threads."""
    hb = max(1, min(nt // nj, -(-nhead // u)))
    return nj, hb, -(-nhead // (hb * u))


def fits32(info) -> bool:
    """Every element offset of x, y, pos_ids and the tables below 2^31 (non-negative strides)."""
    lim = 2**31 - 1
    for n in ("x", "y", "pos_ids"):
        t = info[n]
        if any(st < 0 for st in t.strides):
            return False
        if sum((d - 1) * st for d, st in zip(t.shape, t.strides) if d > 0) >= lim:
            return False
    return info.table_len * info.half < lim and info["x"].numel < lim


def wave_rows(fn_ptr: int, threads: int, groups: int, device_id: int) -> int:
    """Row blocks of rope_units: the blocks of ``threads`` resident on the GPU at once, shared by
    the ``groups`` head groups."""
    return max(1, resident_blocks(fn_ptr, device_id, threads) // groups)


def choose_pairs(info) -> int:
    """Largest P whose packed accesses stay aligned for every row, head and pair group."""
    x, y = info["x"], info["y"]
    algo, half = info.attrs["algo"], info.half
    best = 1
    for p in candidates(algo, itemsize(x.dtype))[1:]:
        unit = 2 * p if algo == 0 else p  # elements per x/y vector access
        if half % p:
            continue
        if any(s % unit for s in (*x.strides[:-1], *y.strides[:-1])):
            continue
        best = p
    return best


class RopeKernel(CudaKernel):
    def __init__(self, info, handle):
        super().__init__(handle)
        order = list(info.tensors)
        x, y, pos = info["x"], info["y"], info["pos_ids"]
        algo = info.attrs["algo"]
        self.fast = None
        if x.numel == 0:
            return
        four = x.ndim == 4
        batch, seq, nhead = (x.shape[0], x.shape[1], x.shape[2]) if four else (1, x.shape[0], x.shape[1])
        xs = x.strides if four else (0, *x.strides)
        ys = y.strides if four else (0, *y.strides)
        ps = pos.strides if pos.ndim == 2 else (0, pos.strides[0])
        half = info.half
        isz = itemsize(x.dtype)
        config = config_for(algo, x.dtype)
        p = choose_pairs(info)
        rows = batch * seq
        nj = half // p
        kind = config.kind if p > 1 else "rows"
        if kind == "grid" and not (nj <= config.threads and fits32(info)):
            kind = "heads"  # offsets past 31 bits or a wide row
        if kind == "heads":
            block = grid_block(nj, nhead, config.heads, EXACT_THREADS)
            if not (nj <= UNIT_THREADS and rows <= MAX_GRID and block[2] <= 65535):
                kind = "units"
        if kind == "units" and nj > UNIT_THREADS:
            kind = "rows"
        if kind == "grid":
            first = grid_name(x.dtype, algo, p, config)
        elif kind == "heads":
            first = heads_name(x.dtype, algo, p, config.heads)
        elif kind == "units":
            first = units_name(x.dtype, algo, p)
        else:
            first = kernel_name(x.dtype, algo, p)
        names = [first] + ([kernel_name(x.dtype, algo, 1)] if p > 1 else [])
        mod = get_module(SOURCE, names, handle.device_id)
        slots = [Slot(order.index(n)) for n in ("y", "x", "pos_ids", "sin_table", "cos_table")]

        def meta(pp):
            return struct.pack(
                "<11q4i", rows, seq, info.table_len, xs[0], xs[1], xs[2], ys[0], ys[1], ys[2], ps[0], ps[1],
                nhead, half, half // pp, POS_KIND[pos.dtype],
            )  # fmt: skip

        def launch_rows(name, pp):
            bx = min(half // pp, UNIT_THREADS)
            by = max(1, min(nhead, UNIT_THREADS // bx))
            return Launch(mod.ptr[name], (min(rows, MAX_GRID),), (bx, by), [*slots, meta(pp)])

        if kind == "grid":
            bx, by, groups = grid_block(nj, nhead, config.heads, config.threads)
            m32 = struct.pack(
                "<14i", rows, seq, info.table_len, xs[0], xs[1], xs[2], ys[0], ys[1], ys[2], ps[0], ps[1],
                nhead, half, POS_KIND[pos.dtype],
            )  # fmt: skip
            gy = min(rows, GRID_ROWS)
            self.fast = Launch(mod.ptr[first], (groups, gy, -(-rows // gy)), (bx, by), [*slots, m32])
        elif kind == "heads":
            bx, by, groups = block
            self.fast = Launch(mod.ptr[first], (rows, groups), (bx, by), [*slots, meta(p)])
        elif kind == "units":
            by = max(1, min(nhead, UNIT_THREADS // nj))
            groups = -(-nhead // by)
            gx = min(rows, wave_rows(mod.ptr[first], nj * by, groups, handle.device_id))
            self.fast = Launch(mod.ptr[first], (min(gx, MAX_GRID), groups), (nj, by), [*slots, meta(p)])
        else:
            self.fast = launch_rows(first, p)
        self.shape = kind
        self.slow = launch_rows(names[-1], 1) if p > 1 else self.fast
        vec = (2 * p if algo == 0 else p) * isz
        self.align = [(order.index("x"), vec), (order.index("y"), vec), (order.index("sin_table"), p * isz),
                      (order.index("cos_table"), p * isz)]  # fmt: skip
        self.pairs = p

    def launch(self, ptrs, ws_ptr, rt, stream):
        if self.fast is None:
            return  # empty tensor
        for i, a in self.align:
            if ptrs[i] % a:
                self.slow(ptrs, ws_ptr, stream)
                return
        self.fast(ptrs, ws_ptr, stream)


def factory(info, handle):
    return RopeKernel(info, handle)


factory.compile_units = compile_units
