"""NVIDIA RoPE for packed pair groups: rope_grid (exact grid (head chunks, rows), 32-bit offsets, one pair group of U heads per thread, every load first; default for GPT_J and f32 GPT_NEOX), rope_heads (the same with 64-bit offsets and grid (rows, head chunks); half-precision GPT_NEOX, and the fallback of rope_grid), rope_units (resident wave, next row prefetched; f64); rope_kernel (one block per row) otherwise."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype
from infiniop_py.dtypes import DType, F, itemsize

SOURCE = (Path(__file__).parent / "kernel.cu").read_text()
POS_KIND = {DType.I8: 0, DType.I16: 1, DType.I32: 2, DType.I64: 3, DType.U8: 4, DType.U16: 5, DType.U32: 6, DType.U64: 7}
MAX_GRID = 2**31 - 1
# Packed-path kernel: "rows" (rope_kernel, one block per row, threads loop over heads), "flat"
# (rope_units, one unit per thread, one block per (row, head group)), "pers" (rope_units over
# one resident wave, next position loaded ahead), "pers2" (also the next row's x). IOP_ROPE
# overrides per descriptor (read at create, for A/B); IOP_ROPE_GRID caps the row blocks (tests).
# "ex1"/"ex2"/"ex4" (rope_heads: exact grid, one block per (row, head chunk), each thread one
# pair group of U = 1/2/4 heads, every load first); "ex2cs" also with streaming cache hints;
# "ex1w"/"ex2w": GPT_J with P doubled (two 16-byte x packs, 16-byte table packs per thread).
SHAPE = "pers2"
SHAPES = ("rows", "flat", "pers", "pers2")
# Default per (algo, itemsize), from the H200 A/Bs (CUDA-graph kernel time, f16 / bf16 / f32
# [4096, 32, 128]). Round 3: GPT_NEOX halves ex2 (19.4 / 20.5 vs pers2 20.6 / 21.2 us), GPT_J ex1
# (20.8 / 21.6 / 37.0 vs 22.0 / 22.1 / 38.6 us). Round 4 (run 2, same process): GPT_J f16 g2
# (19.5 vs ex1 20.3 us; g4 19.8), GPT_J bf16 g4 (20.3 vs ex1 21.0, g2 20.7), GPT_J f32 g4 (35.3
# vs ex1 36.8, g2 35.7), f32 GPT_NEOX g2b (35.3 vs pers2 36.2); GPT_NEOX halves keep ex2 (every
# g shape 0.3-1 us slower); f64 was not measured (pers2). SHAPE_BY_DTYPE overrides per dtype.
SHAPE_BY = {(0, 2): "g2", (0, 4): "g4", (1, 2): "ex2", (1, 4): "g2b"}
SHAPE_BY_DTYPE = {(0, DType.BF16): "g4"}
EXACT = {"ex1": (1, 0), "ex2": (2, 0), "ex4": (4, 0), "ex2cs": (2, 1), "ex1w": (1, 0), "ex2w": (2, 0)}  # (U, CS)
EXACT_THREADS = 128
# Round 4 (rope_grid: rope_heads with 32-bit offsets, grid (head chunks, rows) so the chunks of a
# row run in consecutive blocks): name -> (U heads per thread, NT max threads per block, MB
# blocks per SM the register allocation must allow). Used when every offset fits in 31 bits and
# nj <= NT; otherwise the rope_heads shape of the same U. g2r: g2 held to 32 registers.
GRID = {
    "g1": (1, 128, 8), "g2": (2, 128, 8), "g1b": (1, 256, 4), "g2b": (2, 256, 4), "g1c": (1, 512, 2),
    "g4": (4, 128, 4), "g2s": (2, 64, 16), "g2r": (2, 128, 16),
}  # fmt: skip
GRID_ROWS = 65535  # grid.y cap; rows past it go to grid.z


def max_pairs(algo: int, isz: int, wide: bool = False) -> int:
    """Widest pair group per thread: GPT_J loads 2P contiguous elements, GPT_NEOX P from each half
    (wide GPT_J: 2P elements in two 16-byte packs)."""
    return max(1, (8 if algo == 0 and not wide else 16) // isz)


def candidates(algo: int, isz: int, wide: bool = False) -> list[int]:
    out, p = [], 1
    while p <= max_pairs(algo, isz, wide):
        out.append(p)
        p *= 2
    return out


def kernel_name(dtype: DType, algo: int, p: int) -> str:
    return f"rope_kernel<{ctype(dtype)}, {algo}, {p}>"


def units_name(dtype: DType, algo: int, p: int, pf: int) -> str:
    return f"rope_units<{ctype(dtype)}, {algo}, {p}, {pf}>"


def heads_name(dtype: DType, algo: int, p: int, u: int, cs: int) -> str:
    return f"rope_heads<{ctype(dtype)}, {algo}, {p}, {u}, {cs}>"


def grid_name(dtype: DType, algo: int, p: int, u: int, nt: int, mb: int) -> str:
    return f"rope_grid<{ctype(dtype)}, {algo}, {p}, {u}, {nt}, {mb}>"


def grid_block(nj: int, nhead: int, u: int, nt: int) -> tuple[int, int, int]:
    """(threads x, threads y, head chunks) of rope_grid: hb heads per k, at most nt threads."""
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


def compile_units():
    names = [kernel_name(d, a, p) for d in sorted(F) for a in (0, 1) for p in candidates(a, itemsize(d))]
    names += [units_name(d, a, p, pf) for d in sorted(F) for a in (0, 1) for p in candidates(a, itemsize(d))[1:] for pf in (1, 2)]
    names += [heads_name(d, a, p, u, cs) for d in sorted(F) for a in (0, 1) for p in candidates(a, itemsize(d))[1:]
              for u, cs in set(EXACT.values())]  # fmt: skip
    names += [heads_name(d, 0, max_pairs(0, itemsize(d), True), u, 0) for d in sorted(F) for u in (1, 2)
              if max_pairs(0, itemsize(d), True) > max_pairs(0, itemsize(d))]  # fmt: skip
    names += [grid_name(d, a, p, u, nt, mb) for d in sorted(F) for a in (0, 1) for p in candidates(a, itemsize(d))[1:]
              for u, nt, mb in GRID.values()]  # fmt: skip
    return [(SOURCE, names)]


def exact_block(nj: int, nhead: int, u: int) -> tuple[int, int, int]:
    """(threads x, threads y, head chunks) of rope_heads: hb heads per k, about 128 threads."""
    hb = max(1, min(EXACT_THREADS // nj, -(-nhead // u)))
    return nj, hb, -(-nhead // (hb * u))


def _per_sm(fn_ptr: int, threads: int) -> int:
    try:
        from cupy_backends.cuda.api import driver

        return max(1, int(driver.occupancyMaxActiveBlocksPerMultiprocessor(fn_ptr, threads, 0)))
    except Exception:  # noqa: BLE001 - older CuPy: assume full occupancy
        return max(1, 2048 // threads)


def choose_pairs(info, wide: bool = False) -> int:
    """Largest P whose packed accesses stay aligned for every row, head and pair group."""
    x, y = info["x"], info["y"]
    algo, half = info.attrs["algo"], info.half
    isz = itemsize(x.dtype)
    best = 1
    for p in candidates(algo, isz, wide)[1:]:
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
        shape = os.environ.get("IOP_ROPE") or SHAPE_BY_DTYPE.get((algo, x.dtype)) or SHAPE_BY.get((algo, isz), SHAPE)
        p = choose_pairs(info, wide=shape.endswith("w") and shape in EXACT)
        rows = batch * seq
        nj = half // p
        grid = p > 1 and shape in GRID and nj <= GRID[shape][1] and fits32(info)
        if shape in GRID and not grid:
            shape = f"ex{GRID[shape][0]}"  # offsets past 31 bits or a wide row: rope_heads
        exact = not grid and p > 1 and shape in EXACT and nj <= 256 and rows <= MAX_GRID
        if exact:
            u, cs = EXACT[shape]
            ex_block = exact_block(nj, nhead, u)
            exact = ex_block[2] <= 65535
        units = not grid and not exact and p > 1 and (shape in SHAPES[1:] or shape in EXACT) and nj <= 256
        if units and shape not in SHAPES:
            shape = "pers2"  # an exact shape whose grid does not fit
        pf = 2 if shape == "pers2" else 1
        if grid:
            g_u, g_nt, g_mb = GRID[shape]
            first = grid_name(x.dtype, algo, p, g_u, g_nt, g_mb)
        elif exact:
            first = heads_name(x.dtype, algo, p, u, cs)
        else:
            first = units_name(x.dtype, algo, p, pf) if units else kernel_name(x.dtype, algo, p)
        names = [first] + ([kernel_name(x.dtype, algo, 1)] if p > 1 else [])
        mod = get_module(SOURCE, names, handle.device_id)

        def meta(pp):
            return struct.pack(
                "<11q4i", rows, seq, info.table_len, xs[0], xs[1], xs[2], ys[0], ys[1], ys[2], ps[0], ps[1],
                nhead, half, half // pp, POS_KIND[pos.dtype],
            )  # fmt: skip

        def launch_for(name, pp):
            njp = half // pp
            bx = min(njp, 256)
            by = max(1, min(nhead, 256 // bx))
            args = [Slot(order.index(n)) for n in ("y", "x", "pos_ids", "sin_table", "cos_table")] + [meta(pp)]
            return Launch(mod.ptr[name], (min(rows, MAX_GRID),), (bx, by), args)

        def launch_units(name, pp):
            njp = half // pp
            by = max(1, min(nhead, 256 // njp))
            groups = -(-nhead // by)
            gx = rows
            if shape != "flat":
                from infiniop_py.cuda import runtime

                sm = runtime.properties(handle.device_id)["sm_count"]
                gx = min(rows, max(1, sm * _per_sm(mod.ptr[name], njp * by) // groups))
            cap = os.environ.get("IOP_ROPE_GRID")
            if cap:
                gx = min(gx, max(1, int(cap)))
            args = [Slot(order.index(n)) for n in ("y", "x", "pos_ids", "sin_table", "cos_table")] + [meta(pp)]
            return Launch(mod.ptr[name], (min(gx, MAX_GRID), groups), (njp, by), args)

        if grid:
            bx, by, groups = grid_block(nj, nhead, g_u, g_nt)
            m32 = struct.pack(
                "<14i", rows, seq, info.table_len, xs[0], xs[1], xs[2], ys[0], ys[1], ys[2], ps[0], ps[1],
                nhead, half, POS_KIND[pos.dtype],
            )  # fmt: skip
            args = [Slot(order.index(n)) for n in ("y", "x", "pos_ids", "sin_table", "cos_table")] + [m32]
            gy = min(rows, max(1, int(os.environ.get("IOP_ROPE_GRID") or GRID_ROWS)))  # tests: small cap -> grid.z
            self.fast = Launch(mod.ptr[names[0]], (groups, gy, -(-rows // gy)), (bx, by), args)
        elif exact:
            bx, by, groups = ex_block
            args = [Slot(order.index(n)) for n in ("y", "x", "pos_ids", "sin_table", "cos_table")] + [meta(p)]
            self.fast = Launch(mod.ptr[names[0]], (rows, groups), (bx, by), args)
        else:
            self.fast = launch_units(names[0], p) if units else launch_for(names[0], p)
        self.shape = shape if (units or exact or grid) else "rows"
        self.slow = launch_for(names[-1], 1) if p > 1 else self.fast
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
