"""Our NVIDIA convolution kernels (kernel.cu, then wgrad.cu) as configs: their packed launch
arguments and the launches a problem builds.

A *config* is a named way to run one stage (a forward convolution, a transposed one, a weight
gradient); ``applies(problem)`` says whether it can run that problem, ``build(...)`` returns
its ``Launch`` objects and workspace bytes. Which config runs is the rule tables' business
(configs.py and each operator's ``cuda.py``).
"""

from __future__ import annotations

import ctypes
import math
import struct
from pathlib import Path

from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import ctype
from infiniop_py.dtypes import DType, itemsize
from infiniop_py.spatial import pad3
from infiniop_py.status import Status, error

from .problem import GPU_DTYPES, Conv, WeightGrad, acc_size, data_strides

HERE = Path(__file__).parent
SOURCE = "".join((HERE / name).read_text() for name in ("kernel.cu", "wgrad.cu"))  # one source, in this order
SMEM_LIMIT = 48 * 1024  # dynamic shared memory without the opt-in attribute
NULL = ctypes.c_uint64(0)

IG_META = struct.Struct("<18q39i4x")  # IgMeta (kernel.cu), 304 bytes
DIR_META = struct.Struct("<16q24iqi4x")  # DirMeta, 240 bytes
DW_META = struct.Struct("<12q17i4xqi4x")  # DwMeta, 184 bytes
WG_META = struct.Struct("<15q26i2qi4x")  # WgMeta, 248 bytes
BG_META = struct.Struct("<5q5i4x3qi4x")  # BgMeta, 96 bytes
RED_META = struct.Struct("<5q6iq2iq")  # RedMeta, 88 bytes


# -- launch builders ------------------------------------------------------------------------
def _module(names, device_id: int):
    return get_module(SOURCE, names, device_id)


def _args(slots, b_present: bool) -> list:
    y, x, w, b = slots
    return [Slot(y), Slot(x), Slot(w), Slot(b) if b_present else NULL]


def _transposed_geometry(c: Conv):
    k, s, d = (pad3(v, 1) for v in (c.k, c.s, c.d))
    gcd = tuple(math.gcd(a, b) for a, b in zip(s, d))
    kst = tuple(a // g for a, g in zip(s, gcd))
    inv = tuple(pow((dd // g) % st, -1, st) if st > 1 else 0 for dd, g, st in zip(d, gcd, kst))
    nt = tuple(-(-kk // st) for kk, st in zip(k, kst))
    return nt, kst, gcd, inv


class IGemm:
    """conv_igemm<T, BM, BN>: implicit GEMM, forward or by stride phases (no workspace)."""

    kernel = "conv_igemm"

    def __init__(self, bm: int, bn: int):
        self.bm, self.bn = bm, bn
        self.name = f"igemm{bm}x{bn}"

    def names(self, dtype: DType) -> list[str]:
        return [f"conv_igemm<{ctype(dtype)}, {self.bm}, {self.bn}>"]

    def kernel_names(self, c: Conv) -> list[str]:
        return self.names(c.dtype)

    def applies_dtype(self, dtype: DType) -> bool:
        """f64 accumulators (f32, f64) need twice the registers: not the 128x128 tile."""
        return dtype in GPU_DTYPES and (acc_size(dtype) == 4 or self.bm * self.bn <= 128 * 64)

    def applies(self, c: Conv) -> bool:
        return self.applies_dtype(c.dtype)

    def grid(self, c: Conv) -> tuple[int, int, int]:
        """(mtiles, phases, column tiles)."""
        s3 = pad3(c.s, 1)
        if c.transposed:
            rows = c.batch * math.prod(-(-o // st) for o, st in zip(pad3(c.O, 1), s3))
            phases = math.prod(s3)
        else:
            rows = c.batch * math.prod(c.O)
            phases = 1
        return max(1, -(-rows // self.bm)), phases, -(-c.ng // self.bn)

    def build(self, c: Conv, device_id: int, ws_base: int = 0):
        mtiles, phases, ntiles = self.grid(c)
        nt, kst, gcd, inv = _transposed_geometry(c) if c.transposed else (pad3(c.k, 1), (1,) * 3, (1,) * 3, (0,) * 3)
        wsn, wsc, gwn, gwc = c.weight_strides
        meta = IG_META.pack(
            *data_strides(c.x), *data_strides(c.y), wsn, wsc, *pad3(c.w.strides[2:], 0),
            c.b.strides[0] if c.b is not None else 0, gwn, gwc,
            *pad3(c.L, 1), *pad3(c.O, 1), *pad3(c.s, 1), *pad3(c.p, 0), *pad3(c.d, 1), *pad3(c.k, 1),
            *nt, *kst, *gcd, *inv,
            c.batch, c.cg, c.ng, c.groups, phases, c.cg * math.prod(nt), mtiles, int(c.transposed), int(c.b is not None),
        )  # fmt: skip
        grid = (mtiles * c.groups * phases, ntiles)
        if grid[0] >= 1 << 31 or grid[1] > 65535:
            raise error(Status.BAD_TENSOR_SHAPE, f"convolution too large for one launch: grid {grid}")
        name = self.kernel_names(c)[0]
        fn = _module([name], device_id).ptr[name]
        return [Launch(fn, grid, (256,), [*_args(c.slots, c.b is not None), meta])], 0


class Direct:
    """conv_direct<T, COB, K>: one output position x COB channels per thread (forward only);
    K = 3, 5, 7 for a 2-d K x K kernel known at compile time, else 0 (any kernel and rank)."""

    kernel = "conv_direct"
    name = "direct"
    COBS = (1, 2, 4, 8)
    KS = (0, 3, 5, 7)
    THREADS_WANTED = 1 << 15  # enough threads to hide load latency; fewer channels per thread below it

    def cob(self, c: Conv) -> int | None:
        want = min(8, 1 << max(0, (c.ng - 1).bit_length()))
        positions = c.batch * math.prod(c.O)
        fits = [v for v in reversed(self.COBS) if v <= want and c.cg * c.kvol * v * acc_size(c.dtype) <= SMEM_LIMIT]
        if not fits:
            return None
        for v in fits:  # the widest that still gives enough threads
            if positions * -(-c.ng // v) >= self.THREADS_WANTED:
                return v
        return fits[-1]

    def k(self, c: Conv) -> int:
        return c.k[0] if c.nd == 2 and c.k[0] == c.k[1] and c.k[0] in self.KS else 0

    def names(self, dtype: DType) -> list[str]:
        return [f"conv_direct<{ctype(dtype)}, {cob}, {k}>" for cob in self.COBS for k in self.KS]

    def kernel_names(self, c: Conv) -> list[str]:
        return [f"conv_direct<{ctype(c.dtype)}, {self.cob(c)}, {self.k(c)}>"]

    def applies(self, c: Conv) -> bool:
        return not c.transposed and c.dtype in GPU_DTYPES and self.cob(c) is not None

    def build(self, c: Conv, device_id: int, ws_base: int = 0):
        cob = self.cob(c)
        chunks = -(-c.ng // cob)
        positions = c.batch * math.prod(c.O)
        meta = DIR_META.pack(
            *data_strides(c.x), *data_strides(c.y), *data_strides(c.w), c.b.strides[0] if c.b is not None else 0,
            *pad3(c.L, 1), *pad3(c.O, 1), *pad3(c.s, 1), *pad3(c.p, 0), *pad3(c.d, 1), *pad3(c.k, 1),
            c.batch, c.cg, c.ng, c.groups, chunks, c.kvol, positions, int(c.b is not None),
        )  # fmt: skip
        grid = (max(1, -(-positions // 128)), c.groups * chunks)
        if grid[1] > 65535:
            raise error(Status.BAD_TENSOR_SHAPE, f"convolution too large for the direct kernel: grid {grid}")
        name = self.kernel_names(c)[0]
        fn = _module([name], device_id).ptr[name]
        shmem = c.cg * c.kvol * cob * acc_size(c.dtype)
        return [Launch(fn, grid, (128,), [*_args(c.slots, c.b is not None), meta], shmem)], 0


class Depthwise:
    """conv_dw2d<T, K, UNIT, 4>: one input channel per group, 1-d or 2-d, a plane tile with halo
    in shared memory; compile-time 3x3/5x5/7x7 kernels (UNIT: stride and dilation 1)."""

    kernel = "conv_dw2d"
    name = "dw2d"
    RY = 4
    KS = (3, 5, 7)

    def variant(self, c: Conv) -> tuple[int, bool]:
        k2, s2, d2 = (pad3(v, 1)[1:] for v in (c.k, c.s, c.d))
        if c.nd == 2 and k2[0] == k2[1] and k2[0] in self.KS:
            return k2[0], s2 == (1, 1) and d2 == (1, 1)
        return 0, False

    def names(self, dtype: DType) -> list[str]:
        t = ctype(dtype)
        return [f"conv_dw2d<{t}, {k}, {str(u).lower()}, {self.RY}>" for k in self.KS for u in (False, True)] + [
            f"conv_dw2d<{t}, 0, false, {self.RY}>"
        ]

    def kernel_names(self, c: Conv) -> list[str]:
        k, unit = self.variant(c)
        return [f"conv_dw2d<{ctype(c.dtype)}, {k}, {str(unit).lower()}, {self.RY}>"]

    def tiles(self, c: Conv):
        oh, ow = pad3(c.O, 1)[1:]
        kh, kw = pad3(c.k, 1)[1:]
        sh, sw = pad3(c.s, 1)[1:]
        dh, dw = pad3(c.d, 1)[1:]
        bx = -(-ow // -(-ow // 32))
        rows = -(-oh // self.RY)
        tiles_h = -(-rows // max(1, 256 // bx))
        by = -(-rows // tiles_h)
        pb = max(1, min(64, 256 // (bx * by)))
        ir = (by * self.RY - 1) * sh + (kh - 1) * dh + 1
        ic = (bx - 1) * sw + (kw - 1) * dw + 1
        k, _ = self.variant(c)
        per_plane = ir * ic + (0 if k else kh * kw)
        while pb > 1 and pb * per_plane * acc_size(c.dtype) > SMEM_LIMIT:
            pb //= 2
        return bx, by, pb, tiles_h, -(-ow // bx), ir, ic, per_plane * pb * acc_size(c.dtype)

    def applies(self, c: Conv) -> bool:
        if c.transposed or c.dtype not in GPU_DTYPES or c.nd > 2 or c.cg != 1:
            return False
        _, _, _, th, tw, _, _, shmem = self.tiles(c)
        return shmem <= SMEM_LIMIT and th * tw <= 65535

    def build(self, c: Conv, device_id: int, ws_base: int = 0):
        bx, by, pb, tiles_h, tiles_w, ir, ic, shmem = self.tiles(c)
        xs, ys = data_strides(c.x), data_strides(c.y)
        ws = data_strides(c.w)
        h, w_ = pad3(c.L, 1)[1:]
        oh, ow = pad3(c.O, 1)[1:]
        k3 = [pad3(v, f)[1:] for v, f in ((c.s, 1), (c.p, 0), (c.d, 1), (c.k, 1))]
        (sh, sw), (ph, pw), (dh, dw), (kh, kw) = k3
        cout = c.groups * c.ng
        planes = c.batch * cout
        meta = DW_META.pack(
            xs[0], xs[1], xs[3], xs[4], ys[0], ys[1], ys[3], ys[4], ws[0], ws[3], ws[4],
            c.b.strides[0] if c.b is not None else 0,
            h, w_, oh, ow, sh, sw, ph, pw, dh, dw, kh, kw, cout, c.ng, tiles_w, ir, ic, planes, int(c.b is not None),
        )  # fmt: skip
        name = self.kernel_names(c)[0]
        fn = _module([name], device_id).ptr[name]
        grid = (-(-planes // pb), tiles_h * tiles_w)
        return [Launch(fn, grid, (bx, by, pb), [*_args(c.slots, c.b is not None), meta], shmem)], 0


class DwReg:
    """conv_dwreg<T, K, RY>: depthwise with stride 1, dilation 1 and a K x K kernel (K = 3, 5,
    7), 1 input channel per group; RY outputs per thread down a column, no shared memory."""

    kernel = "conv_dwreg"
    name = "dwreg"
    RY = {3: 8, 5: 4, 7: 4}

    def names(self, dtype: DType) -> list[str]:
        return [f"conv_dwreg<{ctype(dtype)}, {k}, {ry}>" for k, ry in self.RY.items()]

    def kernel_names(self, c: Conv) -> list[str]:
        k = c.k[-1]
        return [f"conv_dwreg<{ctype(c.dtype)}, {k}, {self.RY[k]}>"]

    def applies(self, c: Conv) -> bool:
        return (
            not c.transposed
            and c.dtype in GPU_DTYPES
            and c.nd == 2
            and c.cg == 1
            and c.k[0] == c.k[1]
            and c.k[0] in self.RY
            and tuple(c.s) == (1, 1)
            and tuple(c.d) == (1, 1)
            and c.batch * c.groups * c.ng * c.O[1] * -(-c.O[0] // self.RY[c.k[0]]) < 1 << 31  # 32-bit thread index
            and all(max(t.shape[2] - 1, 0) * t.strides[2] + max(t.shape[3] - 1, 0) * t.strides[3] < 1 << 31 for t in (c.x, c.y))
        )

    def build(self, c: Conv, device_id: int, ws_base: int = 0):
        k = c.k[0]
        ry = self.RY[k]
        xs, ys, ws = data_strides(c.x), data_strides(c.y), data_strides(c.w)
        (h, w_), (oh, ow) = c.L, c.O
        cout = c.groups * c.ng
        planes = c.batch * cout
        strips = -(-oh // ry)
        meta = DW_META.pack(
            xs[0], xs[1], xs[3], xs[4], ys[0], ys[1], ys[3], ys[4], ws[0], ws[3], ws[4],
            c.b.strides[0] if c.b is not None else 0,
            h, w_, oh, ow, 1, 1, c.p[0], c.p[1], 1, 1, k, k, cout, c.ng, strips, 0, 0, planes, int(c.b is not None),
        )  # fmt: skip
        name = self.kernel_names(c)[0]
        fn = _module([name], device_id).ptr[name]
        threads = planes * ow * strips
        return [Launch(fn, (max(1, -(-threads // 256)),), (256,), [*_args(c.slots, c.b is not None), meta])], 0


class DwVec(DwReg):
    """conv_dwvec<T, K, RY>: DwReg's problems with "same" padding along W on W-contiguous rows
    whose sizes and strides are multiples of 16 bytes of T (VW elements): RY rows x VW columns
    per thread, 16-byte loads and stores; the halo (K - 1) / 2 must fit in one neighbouring
    group (f64 7x7 stays on dwreg)."""

    kernel = "conv_dwvec"
    name = "dwvec"

    @staticmethod
    def ry(dtype: DType) -> int:
        return 8 if itemsize(dtype) == 4 else 4  # 32 accumulators per thread

    def names(self, dtype: DType) -> list[str]:
        return [f"conv_dwvec<{ctype(dtype)}, {k}, {self.ry(dtype)}>" for k in self.RY]

    def kernel_names(self, c: Conv) -> list[str]:
        return [f"conv_dwvec<{ctype(c.dtype)}, {c.k[-1]}, {self.ry(c.dtype)}>"]

    def applies(self, c: Conv) -> bool:
        if not super().applies(c) or c.p[1] != (c.k[1] - 1) // 2:
            return False
        vw = 16 // itemsize(c.dtype)
        return (
            c.p[1] <= vw
            and c.L[1] % vw == 0
            and all(t.strides[3] == 1 and all(st % vw == 0 for st in t.strides[:3]) for t in (c.x, c.y))
        )

    def build(self, c: Conv, device_id: int, ws_base: int = 0):
        k, ry, vw = c.k[0], self.ry(c.dtype), 16 // itemsize(c.dtype)
        xs, ys, ws = data_strides(c.x), data_strides(c.y), data_strides(c.w)
        (h, w_), (oh, ow) = c.L, c.O
        cout = c.groups * c.ng
        planes = c.batch * cout
        strips = -(-oh // ry)
        meta = DW_META.pack(
            xs[0], xs[1], xs[3], xs[4], ys[0], ys[1], ys[3], ys[4], ws[0], ws[3], ws[4],
            c.b.strides[0] if c.b is not None else 0,
            h, w_, oh, ow, 1, 1, c.p[0], c.p[1], 1, 1, k, k, cout, c.ng, strips, 0, 0, planes, int(c.b is not None),
        )  # fmt: skip
        name = self.kernel_names(c)[0]
        fn = _module([name], device_id).ptr[name]
        threads = planes * (ow // vw) * strips
        return [Launch(fn, (max(1, -(-threads // 256)),), (256,), [*_args(c.slots, c.b is not None), meta])], 0


class WGrad:
    """conv_wgrad<T, BN, BK> (+ conv_bias_grad, conv_grad_reduce): deterministic split sums."""

    RM = 16

    def __init__(self, bn: int, bk: int):
        self.bn, self.bk = bn, bk
        self.name = f"wgrad{bn}x{bk}"

    def names(self, dtype: DType) -> list[str]:
        t = ctype(dtype)
        return [f"conv_wgrad<{t}, {self.bn}, {self.bk}>", f"conv_bias_grad<{t}>", f"conv_grad_reduce<{t}>"]

    def applies_dtype(self, dtype: DType) -> bool:
        return dtype in GPU_DTYPES and (acc_size(dtype) == 4 or self.bn * self.bk <= 128 * 64)

    def kernel_names(self, p: WeightGrad) -> list[str]:
        return self.names(p.dtype)

    def applies(self, p: WeightGrad) -> bool:
        return self.applies_dtype(p.dtype)

    def build(self, p: WeightGrad, device_id: int, ws_base: int = 0):
        names = self.names(p.dtype)
        mod = _module(names, device_id)
        K = p.cg * math.prod(p.k)  # noqa: N806
        cout = p.groups * p.ng
        rows = p.go.shape[0] * math.prod(p.go.shape[2:])
        ntiles, ktiles = -(-p.ng // self.bn), -(-K // self.bk)
        tiles = p.groups * ntiles * ktiles
        # Split the row sum until the grid fills the GPU about twice (at least 4 steps per split).
        splits = 1
        steps = -(-rows // self.RM)
        if tiles < 2 * p.sm_count and steps > 8:
            splits = max(1, min(-(-2 * p.sm_count // tiles), steps // 4, 256))
        mchunk = -(-steps // splits) * self.RM
        splits = max(1, -(-rows // mchunk)) if rows else 1
        gw_slot, _, go_slot, x_slot = p.slots
        ws = splits * cout * K * acc_size(p.dtype) if splits > 1 else 0
        meta = WG_META.pack(
            *data_strides(p.x), *data_strides(p.go), *data_strides(p.gw),
            *pad3(p.x.shape[2:], 1), *pad3(p.go.shape[2:], 1), *pad3(p.s, 1), *pad3(p.p, 0), *pad3(p.d, 1), *pad3(p.k, 1),
            p.go.shape[0], p.cg, p.ng, p.groups, K, ntiles, ktiles, splits, rows, mchunk, int(splits == 1),
        )  # fmt: skip
        args = [Slot(gw_slot), Slot("ws", ws_base), Slot(go_slot), Slot(x_slot), meta]
        launches = [Launch(mod.ptr[names[0]], (tiles * splits,), (256,), args)]
        more, end = bias_launches(p, device_id, ws_base + ws, (splits if splits > 1 else 0, ws_base, K))
        return launches + more, end - ws_base


def bias_launches(p: WeightGrad, device_id: int, ws_offset: int, wsplit=(0, 0, 0)):
    """grad_bias (when requested) as per-(channel, chunk) partials in the workspace at
    ``ws_offset``, and the fixed-order reduction of those and of grad_weight's partials
    (``wsplit`` = (splits, workspace offset, K); splits 0: grad_weight needs none).
    Returns (launches, the end offset of the workspace used)."""
    names = [f"conv_bias_grad<{ctype(p.dtype)}>", f"conv_grad_reduce<{ctype(p.dtype)}>"]
    mod = _module(names, device_id)
    gw_slot, gb_slot, go_slot, _ = p.slots
    cout = p.groups * p.ng
    rows = p.go.shape[0] * math.prod(p.go.shape[2:])
    launches, ws = [], ws_offset
    bsplits = 0
    if p.gb is not None and cout:
        bsplits = 1
        if rows > 1 << 14 and cout < 2 * p.sm_count:
            bsplits = min(-(-2 * p.sm_count // cout), -(-rows // 4096), 128)
        chunk = -(-rows // bsplits) if rows else 0
        bsplits = max(1, -(-rows // chunk)) if rows else 1
        meta = BG_META.pack(
            *data_strides(p.go), *pad3(p.go.shape[2:], 1), cout, bsplits, rows, chunk, p.gb.strides[0], int(bsplits == 1)
        )
        if bsplits > 1:
            ws += bsplits * cout * acc_size(p.dtype)
        launches.append(
            Launch(mod.ptr[names[0]], (cout * bsplits,), (256,), [Slot(gb_slot), Slot("ws", ws_offset), Slot(go_slot), meta])
        )
    wsplits, wpart_off, K = wsplit  # noqa: N806
    rsplit = bsplits if bsplits > 1 else 0
    if wsplits or rsplit:
        total = cout * K if wsplits else 0
        rmeta = RED_META.pack(
            *data_strides(p.gw), *pad3(p.k, 1), p.cg, max(K, 1), wsplits, total, cout, rsplit, p.gb.strides[0] if rsplit else 0
        )
        count = total + (cout if rsplit else 0)
        args = [Slot(gw_slot), Slot(gb_slot) if p.gb is not None else NULL, Slot("ws", wpart_off), Slot("ws", ws_offset), rmeta]
        launches.append(Launch(mod.ptr[names[1]], (max(1, -(-count // 256)),), (256,), args))
    return launches, ws
