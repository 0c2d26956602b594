"""Numba kernels of the bfloat16 matrix product (imported through :mod:`.kernels`; driven by
:mod:`.matmul`, which decides where they run).

c (f32) = a @ b for bfloat16 a and b through the CPU's bfloat16 dot products (x86
AVX512-BF16 ``vdpbf16ps``: per float32 lane, acc + a0 b0 + a1 b1 over a pair of bfloat16,
products exact, each addition rounded to nearest even, subnormals flushed to zero). a is read
as pairs of bfloat16 along k (rows of int32), b is packed into panels of BF16_NR columns in
which each int32 holds (b[2p, j], b[2p + 1, j]). Only compiled where the CPU has the
instruction (infiniop_py/cpu/matmul.py decides; LLVM cannot select it elsewhere).

Where the CPU has AMX-BF16 (and the kernel grants the process its tile state),
:func:`bf16_gemm_amx` multiplies through the tile unit instead (``tdpbf16ps``: a 16 x 16 float32
tile plus a 16 x 32 bfloat16 tile of a times a 16-pair tile of b, per element the same pair
sums as above), on the same panels of b: a panel row of BF16_NR int32 pairs is the two b tiles
side by side. Each 32 x 32 block of c stays in four tile registers over the whole of k, in one
fixed order per element.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_jit = numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False)

BF16_MR, BF16_NR = 8, 32  # rows x columns of c per tile: 16 float32x16 accumulators
BF16_KC = 256  # pairs of k per pass over a tile (a b panel of 32 KiB)
BF16_MB = 8  # tiles of rows sharing one pass over a b panel


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite has no type object for it)."""

    def _to_string(self):
        return "bfloat"

    def __eq__(self, other):
        return isinstance(other, _BFloat)

    def __hash__(self):
        return hash("bfloat")


@intrinsic
def _bf16_tile(typingctx, a_addr, lda, b_addr, c_addr, ldc, kp, first):
    """The BF16_MR x BF16_NR tile of c at ``c_addr`` (row stride ``ldc`` floats): its sum over
    ``kp`` pairs of k of a's rows (int32 pairs at ``a_addr``, row stride ``lda`` pairs) times
    the b panel at ``b_addr`` (``kp`` rows of BF16_NR int32 pairs), added to c's tile, or
    written over it when ``first``. The accumulators stay in registers over the whole pass."""
    sig = types.void(types.uintp, types.intp, types.uintp, types.uintp, types.intp, types.intp, types.boolean)

    def codegen(context, builder, signature, args):
        a_addr, lda, b_addr, c_addr, ldc, kp, first = args
        f32, i32, i64 = ir.FloatType(), ir.IntType(32), lda.type
        f32x16, i32x16 = ir.VectorType(f32, 16), ir.VectorType(i32, 16)
        pair = ir.VectorType(_BFloat(), 32)
        dot = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(f32x16, [f32x16, pair, pair]), "llvm.x86.avx512bf16.dpbf16ps.512"
        )
        ap = builder.inttoptr(a_addr, i32.as_pointer())
        bp = builder.inttoptr(b_addr, i32x16.as_pointer())
        cp = builder.inttoptr(c_addr, f32.as_pointer())
        halves = BF16_NR // 16
        zero = ir.Constant(f32x16, [0.0] * 16)
        acc = []
        for r in range(BF16_MR):
            row = []
            for h in range(halves):
                at = builder.add(builder.mul(ir.Constant(i64, r), ldc), ir.Constant(i64, 16 * h))
                ptr = builder.bitcast(builder.gep(cp, [at]), f32x16.as_pointer())
                slot = cgutils.alloca_once(builder, f32x16)
                builder.store(builder.select(first, zero, builder.load(ptr, align=4)), slot)
                row.append((slot, ptr))
            acc.append(row)
        undef = ir.Constant(i32x16, ir.Undefined)
        splat = ir.Constant(i32x16, [0] * 16)
        with cgutils.for_range(builder, kp) as loop:
            p = loop.index
            bv = []
            for h in range(halves):
                at = builder.add(builder.mul(p, ir.Constant(i64, halves)), ir.Constant(i64, h))
                bv.append(builder.bitcast(builder.load(builder.gep(bp, [at]), align=4), pair))
            for r in range(BF16_MR):
                av = builder.load(builder.gep(ap, [builder.add(builder.mul(ir.Constant(i64, r), lda), p)]), align=4)
                av = builder.bitcast(
                    builder.shuffle_vector(builder.insert_element(undef, av, ir.Constant(i32, 0)), undef, splat), pair
                )
                for h in range(halves):
                    slot = acc[r][h][0]
                    builder.store(builder.call(dot, [builder.load(slot), av, bv[h]]), slot)
        for row in acc:
            for slot, ptr in row:
                builder.store(builder.load(slot), ptr, align=4)
        return context.get_dummy_value()

    return sig, codegen


# --- AMX ------------------------------------------------------------------------------------
AMX_M = 32  # rows of c per block (two tiles of 16)
AMX_KQ = 16  # pairs of k per tile step: a's rows must be padded to a multiple of this
_I8, _I64, _VOID = ir.IntType(8), ir.IntType(64), ir.VoidType()
_PTR = _I8.as_pointer()


def _amx_fn(builder, name, args):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VOID, args), name)


@intrinsic
def _amx_config(typingctx, cfg_addr):
    """Load the tile configuration at ``cfg_addr`` (64 bytes, see matmul.AMX_CONFIG) into this thread."""

    def codegen(context, builder, signature, args):
        builder.call(_amx_fn(builder, "llvm.x86.ldtilecfg", [_PTR]), [builder.inttoptr(args[0], _PTR)])
        return context.get_dummy_value()

    return types.void(types.uintp), codegen


@intrinsic
def _amx_release(typingctx):
    def codegen(context, builder, signature, args):
        builder.call(_amx_fn(builder, "llvm.x86.tilerelease", []), [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _amx_block(typingctx, a_addr, lda, b_addr, c_addr, ldc, steps):
    """The AMX_M x BF16_NR block of c at ``c_addr`` (row stride ``ldc`` bytes) = the AMX_M rows
    of a at ``a_addr`` (int32 pairs, row stride ``lda`` bytes) times the b panel at ``b_addr``,
    over ``steps`` steps of AMX_KQ pairs: tiles 0-3 hold c, 4-5 a, 6-7 b."""
    sig = types.void(types.uintp, types.intp, types.uintp, types.uintp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        a_addr, lda, b_addr, c_addr, ldc, steps = args
        load = _amx_fn(builder, "llvm.x86.tileloadd64", [_I8, _PTR, _I64])
        store = _amx_fn(builder, "llvm.x86.tilestored64", [_I8, _PTR, _I64])
        zero = _amx_fn(builder, "llvm.x86.tilezero", [_I8])
        dot = _amx_fn(builder, "llvm.x86.tdpbf16ps", [_I8, _I8, _I8])

        def tile(i):
            return ir.Constant(_I8, i)

        def at(base, offset):
            return builder.inttoptr(builder.add(base, offset), _PTR)

        half = ir.Constant(_I64, 64)  # bytes of 16 int32: one tile's row
        c16 = builder.mul(ldc, ir.Constant(_I64, 16))
        a16 = builder.mul(lda, ir.Constant(_I64, 16))
        bstep = ir.Constant(_I64, AMX_KQ * BF16_NR * 4)
        for i in range(4):
            builder.call(zero, [tile(i)])
        with cgutils.for_range(builder, steps) as loop:
            ao = builder.add(a_addr, builder.mul(loop.index, half))
            bo = builder.add(b_addr, builder.mul(loop.index, bstep))
            builder.call(load, [tile(4), at(ao, ir.Constant(_I64, 0)), lda])
            builder.call(load, [tile(5), at(ao, a16), lda])
            builder.call(load, [tile(6), at(bo, ir.Constant(_I64, 0)), ir.Constant(_I64, BF16_NR * 4)])
            builder.call(load, [tile(7), at(bo, half), ir.Constant(_I64, BF16_NR * 4)])
            builder.call(dot, [tile(0), tile(4), tile(6)])
            builder.call(dot, [tile(1), tile(4), tile(7)])
            builder.call(dot, [tile(2), tile(5), tile(6)])
            builder.call(dot, [tile(3), tile(5), tile(7)])
        for i, off in enumerate((ir.Constant(_I64, 0), half, c16, builder.add(c16, half))):
            builder.call(store, [tile(i), at(c_addr, off), ldc])
        return context.get_dummy_value()

    return sig, codegen


@_jit
def bf16_gemm_amx(a, bp, c, cfg, j0, j1):
    """Column panels ``j0`` to ``j1`` of c (rows, panels * BF16_NR) float32 = a @ b on the AMX
    tiles: a (rows, pairs) uint32 as for :func:`bf16_gemm` with rows a multiple of AMX_M and
    pairs of AMX_KQ (zero-padded), bp from :func:`bf16_pack_b` with as many pairs, ``cfg`` the
    tile configuration (matmul.AMX_CONFIG)."""
    kp = a.shape[1]
    lda = a.strides[0]
    ldc = c.strides[0]
    abase = a.ctypes.data
    bbase = bp.ctypes.data
    cbase = c.ctypes.data
    _amx_config(cfg.ctypes.data)
    for j in range(j0, j1):
        for i in range(0, a.shape[0], AMX_M):
            _amx_block(abase + i * lda, lda, bbase + j * kp * BF16_NR * 4, cbase + i * ldc + j * BF16_NR * 4, ldc, kp // AMX_KQ)
    _amx_release()


@_jit
def bf16_pack_b(b, out, j0, j1):
    """Panels ``j0`` to ``j1`` of ``out`` (panels, pairs, BF16_NR) uint32 from b (k, n) uint16
    bits of bfloat16, any strides: ``out[j, p, t] = b[2p, jNR + t] | b[2p + 1, jNR + t] << 16``,
    zero beyond b's edges (also for pairs past k when ``out`` has more than k / 2)."""
    k, n = b.shape
    for j in range(j0, j1):
        c0 = j * BF16_NR
        w = min(BF16_NR, n - c0)
        for p in range(out.shape[1]):
            k0 = 2 * p
            if w == BF16_NR and k0 + 1 < k:
                for t in range(BF16_NR):
                    out[j, p, t] = types.uint32(b[k0, c0 + t]) | (types.uint32(b[k0 + 1, c0 + t]) << 16)
                continue
            for t in range(BF16_NR):
                out[j, p, t] = 0
            if k0 >= k:  # pairs past k (padding to the AMX tile depth)
                continue
            for t in range(w):
                out[j, p, t] = b[k0, c0 + t]
            if k0 + 1 < k:
                for t in range(w):
                    out[j, p, t] |= types.uint32(b[k0 + 1, c0 + t]) << 16


@_jit
def bf16_gemm(a, bp, c, j0, j1):
    """Columns panels ``j0`` to ``j1`` of c (rows, panels * BF16_NR) float32 = a @ b: a (rows,
    pairs) uint32 pairs of bfloat16 along k (rows a multiple of BF16_MR, unit stride along k),
    bp from :func:`bf16_pack_b`. Each element is one fixed sequence of dot products over k,
    whatever the panels a call gets."""
    kp = a.shape[1]
    tiles = a.shape[0] // BF16_MR
    lda = a.strides[0] // 4
    ldc = c.strides[0] // 4
    abase = a.ctypes.data
    bbase = bp.ctypes.data
    cbase = c.ctypes.data
    for p0 in range(0, kp, BF16_KC):
        kk = min(BF16_KC, kp - p0)
        for i0 in range(0, tiles, BF16_MB):
            for j in range(j0, j1):
                for i in range(i0, min(i0 + BF16_MB, tiles)):
                    _bf16_tile(
                        abase + (i * BF16_MR * lda + p0) * 4,
                        lda,
                        bbase + (j * kp + p0) * BF16_NR * 4,
                        cbase + (i * BF16_MR * ldc + j * BF16_NR) * 4,
                        ldc,
                        kk,
                        p0 == 0,
                    )
