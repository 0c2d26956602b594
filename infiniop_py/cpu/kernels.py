"""Numba kernels of the CPU backend (imported only through :func:`infiniop_py.cpu.jit.kernels`).

Every kernel is a plain loop over 1-D contiguous arrays (or rows of 2-D ones) that LLVM
vectorises; none holds the GIL (``nogil``), so the CPU thread pool runs them side by side on
fixed parts of the data. Elements are loaded and stored through :func:`ld` / :func:`st`, whose
meaning follows the array's dtype: float32 as is, ``uint16`` as the bits of float16, ``int16``
as the bits of bfloat16 (callers pass ``x.view(np.uint16)`` / ``x.view(np.int16)``); all
arithmetic is float32 and a half result is rounded once. The half conversions are the
hardware's (LLVM's ``half`` type: F16C's ``vcvtph2ps``/``vcvtps2ph`` on x86, ``fcvt`` on Arm),
round to nearest even as NumPy does; bfloat16 moves bits and rounds to nearest even as
ml_dtypes does (NaN stays a quiet NaN).

Transcendentals: :func:`exp32` is a float32 exp that vectorises (numba's ``math.exp`` calls
libm one element at a time): Cody-Waite reduction by ln 2, a degree-6 polynomial, and the
scale 2^n applied in two halves so that results down to the subnormals are exact to within
2 ulp (measured maximum relative error 2.4e-7 on 16M normal draws); overflow gives inf,
underflow 0, NaN stays NaN.

The bfloat16 matrix product's kernels are in :mod:`.bf16_kernels`, the top-k choices and
blocked copies in :mod:`.select_kernels`, the convolution and pooling loops in
:mod:`.spatial_kernels`, all imported here so that this module is the one namespace of
compiled kernels.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from .bf16_kernels import AMX_KQ, AMX_M, BF16_MR, BF16_NR, bf16_gemm, bf16_gemm_amx, bf16_pack_b  # noqa: F401 - one namespace for jit.kernels()

# contract: a * b + c may become one fused multiply-add (one rounding instead of two)
_jit = numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, fastmath={"contract"})
F = np.float32


# --- bit-level conversions -------------------------------------------------------------------
@intrinsic
def _half_to_float(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _float_to_half(typingctx, value):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _bf16_to_float(typingctx, bits):
    def codegen(context, builder, signature, args):
        wide = builder.shl(builder.zext(args[0], ir.IntType(32)), ir.Constant(ir.IntType(32), 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(types.int16), codegen


@intrinsic
def _float_to_bf16(typingctx, value):
    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        u = builder.bitcast(args[0], i32)
        hi = builder.lshr(u, ir.Constant(i32, 16))
        odd = builder.and_(hi, ir.Constant(i32, 1))
        rounded = builder.lshr(builder.add(builder.add(u, ir.Constant(i32, 0x7FFF)), odd), ir.Constant(i32, 16))
        quiet = builder.or_(hi, ir.Constant(i32, 0x40))
        isnan = builder.fcmp_unordered("uno", args[0], args[0])
        return builder.trunc(builder.select(isnan, quiet, rounded), ir.IntType(16))

    return types.int16(types.float32), codegen


# Integer work on float bits stays in LLVM's i32 here: numba's own arithmetic widens int32 to
# int64, which holds vectorised loops to half as many lanes.
_I32 = ir.IntType(32)


def _flip(builder, u):
    """``u ^ ((u >> 31) & 0x7FFFFFFF)`` on i32: the bits below the sign inverted where it is set."""
    return builder.xor(u, builder.and_(builder.ashr(u, ir.Constant(_I32, 31)), ir.Constant(_I32, 0x7FFFFFFF)))


@intrinsic
def _order(typingctx, v):
    """int32 key of float32 ``v`` that orders like the floats (NaN of either sign sorts apart):
    an integer max reduction vectorises without fast-math flags."""

    def codegen(context, builder, signature, args):
        return _flip(builder, builder.bitcast(args[0], _I32))

    return types.int32(types.float32), codegen


@intrinsic
def _unorder(typingctx, key):
    """The float32 of an :func:`_order` key."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(_flip(builder, args[0]), ir.FloatType())

    return types.float32(types.int32), codegen


def _exp_scale(second: bool):
    def codegen(context, builder, signature, args):
        n = builder.sub(builder.bitcast(args[0], _I32), ir.Constant(_I32, 0x4B400000))
        h = builder.ashr(n, ir.Constant(_I32, 1))
        e = builder.sub(n, h) if second else h
        return builder.bitcast(builder.shl(builder.add(e, ir.Constant(_I32, 127)), ir.Constant(_I32, 23)), ir.FloatType())

    return codegen


@intrinsic
def _scale_lo(typingctx, t):
    """2^(n >> 1) for the integer n that :func:`exp32` holds in the low mantissa bits of ``t``."""
    return types.float32(types.float32), _exp_scale(False)


@intrinsic
def _scale_hi(typingctx, t):
    """2^(n - (n >> 1)): with :func:`_scale_lo`, 2^n in two factors that stay normal floats."""
    return types.float32(types.float32), _exp_scale(True)


def ld(v):
    """float32 value of one stored element (see the module docstring)."""


def st(a, i, v):
    """``a[i] = v`` rounded to ``a``'s storage type. Pass a name or arithmetic as ``v``, never a
    conditional expression: numba (0.68) then compiles the inlined store to nothing."""


@overload(ld, inline="always")
def _ld(v):
    if v == types.float32:
        return lambda v: v
    if v == types.uint16:
        return lambda v: _half_to_float(v)
    if v == types.int16:
        return lambda v: _bf16_to_float(v)
    return None


@overload(st, inline="always")
def _st(a, i, v):
    dt = a.dtype
    if dt == types.float32:

        def store(a, i, v):
            a[i] = v

    elif dt == types.uint16:

        def store(a, i, v):
            a[i] = _float_to_half(v)

    elif dt == types.int16:

        def store(a, i, v):
            a[i] = _float_to_bf16(v)

    else:
        return None
    return store


# --- plain conversions -----------------------------------------------------------------------
@_jit
def f16_to_f32(src, dst):
    """``dst[i] = float(src[i])``: src uint16 bits of float16, dst float32."""
    for i in range(src.size):
        dst[i] = _half_to_float(src[i])


@_jit
def f32_to_f16(src, dst):
    """``dst[i] = half(src[i])`` rounded to nearest even: src float32, dst uint16 bits."""
    for i in range(src.size):
        dst[i] = _float_to_half(src[i])


@_jit
def bf16_to_f32(src, dst):
    """src uint16 bits of bfloat16, dst uint32 bits of float32."""
    for i in range(src.size):
        dst[i] = types.uint32(src[i]) << 16


@_jit
def f32_to_bf16(src, dst):
    """src uint32 bits of float32, dst uint16 bits of bfloat16 (nearest even; NaN stays quiet NaN)."""
    for i in range(src.size):
        u = src[i]
        if (u & 0x7FFFFFFF) > 0x7F800000:
            dst[i] = (u >> 16) | 0x40
        else:
            dst[i] = (u + 0x7FFF + ((u >> 16) & 1)) >> 16


# --- math ------------------------------------------------------------------------------------
_LOG2E = F(1.4426950408889634)
_LN2_HI = F(0.693145751953125)
_LN2_LO = F(1.428606765330187e-06)
_ROUND = F(12582912.0)  # 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits


@numba.njit(inline="always", error_model="numpy")
def exp32(x):
    """float32 exp (see the module docstring)."""
    xc = min(max(x, F(-104.0)), F(89.0))
    t = xc * _LOG2E + _ROUND
    s1 = _scale_lo(t)
    s2 = _scale_hi(t)
    t = t - _ROUND
    r = xc - t * _LN2_HI
    r = r - t * _LN2_LO
    p = F(1.3981999e-03)
    p = p * r + F(8.3334519e-03)
    p = p * r + F(4.1665795e-02)
    p = p * r + F(1.6666665e-01)
    p = p * r + F(5.0000001e-01)
    p = p * r * r + r + F(1.0)
    res = p * s1 * s2
    return res if x == x else x


# --- elementwise -----------------------------------------------------------------------------
ADD, SUB, MUL, DIV = 0, 1, 2, 3


@_jit
def binary(op, a, b, out):
    """``out = a (op) b`` elementwise (ADD, SUB, MUL, DIV), loads and stores by dtype."""
    n = out.size
    if op == ADD:
        for i in range(n):
            st(out, i, ld(a[i]) + ld(b[i]))
    elif op == SUB:
        for i in range(n):
            st(out, i, ld(a[i]) - ld(b[i]))
    elif op == MUL:
        for i in range(n):
            st(out, i, ld(a[i]) * ld(b[i]))
    else:
        for i in range(n):
            st(out, i, ld(a[i]) / ld(b[i]))


@_jit
def sigmoid(x, out):
    """``out = 1 / (1 + exp(-x))``."""
    for i in range(out.size):
        st(out, i, F(1.0) / (F(1.0) + exp32(-ld(x[i]))))


@_jit
def exp(x, out):
    """``out = exp(x)`` through :func:`exp32`."""
    for i in range(out.size):
        st(out, i, exp32(ld(x[i])))


# --- rows ------------------------------------------------------------------------------------
# Row kernels take 2-D C-contiguous (rows, D) arrays and a row range [r0, r1): the thread pool
# gives each thread fixed ranges. Sums accumulate in float64 (the products of two float32 are
# exact there); ``reassoc`` lets LLVM vectorise those sums (the order is fixed by the compiled
# code, so results repeat bitwise). Weight gradients (column sums over rows) go to one float64
# partial row per row range, added up afterwards in range order.
_rows = numba.njit(nogil=True, cache=True, error_model="numpy", boundscheck=False, fastmath={"reassoc", "contract"})


@_rows
def layer_norm(x, w, b, eps, y, xh, sd, r0, r1):
    """Per row: mean, sd = sqrt(var + eps) (biased; sums as :func:`_row_sum`, the var from
    deviations from the float32 mean), xh = (x - mean) / sd, y = xh * w + b."""
    d = x.shape[1]
    for i in range(r0, r1):
        m = F(_row_sum(x[i]) / d)
        sdev = np.sqrt(_row_sum_dev2(x[i], m) / d + eps)
        st(sd, i, F(sdev))
        inv = F(1.0 / sdev)
        for j in range(d):
            h = (ld(x[i, j]) - m) * inv
            st(xh, (i, j), h)
            st(y, (i, j), h * w[j] + b[j])


@_rows
def layer_norm_backward(dy, w, xh, sd, gx, gw, gb, bounds, p0, p1):
    """gx = (g - mean(g) - xh mean(g xh)) / sd with g = dy w; for row range p (rows bounds[p] to
    bounds[p + 1]) of p0..p1: gw[p] += dy xh, gb[p] += dy (float64 partial rows)."""
    d = dy.shape[1]
    for p in range(p0, p1):
        pw = gw[p]
        pb = gb[p]
        for i in range(bounds[p], bounds[p + 1]):
            sg = 0.0
            sgh = 0.0
            for j in range(d):
                g = ld(dy[i, j]) * w[j]
                h = ld(xh[i, j])
                sg += g
                sgh += g * h
                pw[j] += ld(dy[i, j]) * h
                pb[j] += ld(dy[i, j])
            mg = F(sg / d)
            mgh = F(sgh / d)
            inv = F(1.0) / ld(sd[i])
            for j in range(d):
                st(gx, (i, j), (ld(dy[i, j]) * w[j] - mg - ld(xh[i, j]) * mgh) * inv)


@_rows
def rms_norm(x, w, eps, y, r0, r1):
    """y = x w / sqrt(mean(x^2) + eps) per row (the sum as :func:`_row_sum`)."""
    d = x.shape[1]
    for i in range(r0, r1):
        rinv = F(1.0 / np.sqrt(_row_sum_dev2(x[i], F(0.0)) / d + eps))
        for j in range(d):
            st(y, (i, j), ld(x[i, j]) * rinv * w[j])


@_rows
def rms_norm_backward(x, dy, w, eps, gx, gw, bounds, p0, p1):
    """xh = x rinv; gx = (w dy - xh mean(w dy xh)) rinv; gw[p] += dy xh over the rows of range p
    (float64 partial rows, see layer_norm_backward)."""
    d = x.shape[1]
    for p in range(p0, p1):
        pw = gw[p]
        for i in range(bounds[p], bounds[p + 1]):
            s = 0.0
            for j in range(d):
                t = ld(x[i, j])
                s += t * t
            rinv = F(1.0 / np.sqrt(s / d + eps))
            c = 0.0
            for j in range(d):
                xh = ld(x[i, j]) * rinv
                c += w[j] * ld(dy[i, j]) * xh
                pw[j] += ld(dy[i, j]) * xh
            cm = F(c / d)
            for j in range(d):
                st(gx, (i, j), (w[j] * ld(dy[i, j]) - ld(x[i, j]) * rinv * cm) * rinv)


@numba.njit(inline="always", error_model="numpy")
def _row_top(row):
    """The largest value of a 1-D row as the softmax shift (an integer max of :func:`_order`
    keys, vectorised; a NaN in the row gives a NaN sum afterwards whatever this returns)."""
    k = _order(ld(row[0]))
    for j in range(1, row.size):
        k = max(k, _order(ld(row[j])))
    return _unorder(k)


@_rows
def softmax(x, y, log, tmp, r0, r1):
    """Max-subtracted softmax (``log``: log-softmax) along each row; ``tmp``: a float32 row of
    scratch. A NaN in a row makes the row's sum, and so the whole row, NaN."""
    d = x.shape[1]
    for i in range(r0, r1):
        m = _row_top(x[i])
        s = _row_exp_sum(x[i], m, tmp)
        if log:
            ls = F(np.log(s))
            for j in range(d):
                st(y, (i, j), (ld(x[i, j]) - m) - ls)
        else:
            inv = F(1.0 / s)
            for j in range(d):
                st(y, (i, j), tmp[j] * inv)


SUM_BLOCK = 128  # float32 partial sums over this many elements, added up in float64


@numba.njit(inline="always", error_model="numpy", fastmath={"reassoc", "contract"})
def _row_sum(row):
    """Sum of a 1-D row: a float32 sum per block of SUM_BLOCK elements (vectorised: each vector
    lane adds a few terms), the block sums added in float64. At least as accurate as a pairwise
    sum, at the speed of a float32 loop (docs/perf/cpu.md)."""
    s = 0.0
    for j in range(0, row.size, SUM_BLOCK):
        seg = row[j : j + SUM_BLOCK]
        b = F(0.0)
        for t in range(seg.size):
            b += ld(seg[t])
        s += b
    return s


@numba.njit(inline="always", error_model="numpy", fastmath={"reassoc", "contract"})
def _row_sum_dev2(row, m):
    """Sum of (row - m)^2, blocked as :func:`_row_sum`."""
    s = 0.0
    for j in range(0, row.size, SUM_BLOCK):
        seg = row[j : j + SUM_BLOCK]
        b = F(0.0)
        for t in range(seg.size):
            d = ld(seg[t]) - m
            b += d * d
        s += b
    return s


@numba.njit(inline="always", error_model="numpy", fastmath={"reassoc", "contract"})
def _row_exp_sum(row, m, e):
    """Sum of e[j] = exp(row[j] - m) (:func:`exp32`, stored in the float32 row ``e``), blocked
    as :func:`_row_sum`: the float32 block sums let the exponentials vectorise at full width
    (a float64 sum of every term would hold them to half)."""
    s = 0.0
    for j in range(0, row.size, SUM_BLOCK):
        seg = row[j : j + SUM_BLOCK]
        out = e[j : j + SUM_BLOCK]
        b = F(0.0)
        for t in range(seg.size):
            v = exp32(ld(seg[t]) - m)
            out[t] = v
            b += v
        s += b
    return s


@_rows
def row_sums(x, out, scale, r0, r1):
    """out[i] = scale * sum of row i (stored by out's dtype)."""
    for i in range(r0, r1):
        r = F(_row_sum(x[i]) * scale)
        st(out, i, r)


# --- channels (batch norm on (B, C, L)) -------------------------------------------------------
@_rows
def batch_norm(x, w, b, eps, y, mean, var, c0, c1):
    """Per channel c in [c0, c1): mean and biased var over (B, L) (float32 block sums added in
    float64, :func:`_row_sum`; the var from deviations from the float32 mean), then
    y = (x - mean) w rstd + b."""
    nb, _, nl = x.shape
    n = nb * nl
    for c in range(c0, c1):
        s = 0.0
        for i in range(nb):
            s += _row_sum(x[i, c])
        mu = s / n
        m = F(mu)
        v = 0.0
        for i in range(nb):
            v += _row_sum_dev2(x[i, c], m)
        v /= n
        mean[c] = mu
        var[c] = v
        a = F(w[c] / np.sqrt(v + eps))
        for i in range(nb):
            for j in range(nl):
                st(y, (i, c, j), (ld(x[i, c, j]) - m) * a + b[c])


@_rows
def batch_norm_backward(x, dy, w, eps, gx, gw, gb, c0, c1):
    """Per channel: statistics and sums in float64; gx = a dy - a sum(dy)/n - k (x - mean)."""
    nb, _, nl = x.shape
    n = nb * nl
    for c in range(c0, c1):
        s = 0.0
        for i in range(nb):
            for j in range(nl):
                s += ld(x[i, c, j])
        mu = s / n
        v = 0.0
        sdy = 0.0
        pdx = 0.0
        for i in range(nb):
            for j in range(nl):
                t = ld(x[i, c, j]) - mu
                g = ld(dy[i, c, j])
                v += t * t
                sdy += g
                pdx += g * t
        rstd = 1.0 / np.sqrt(v / n + eps)
        a = w[c] * rstd
        k = a * rstd * rstd * pdx / n
        gb[c] = sdy
        gw[c] = rstd * pdx
        a32 = F(a)
        off = F(a * sdy / n)
        k32 = F(k)
        m32 = F(mu)
        for i in range(nb):
            for j in range(nl):
                st(gx, (i, c, j), a32 * ld(dy[i, c, j]) - off - k32 * (ld(x[i, c, j]) - m32))


@_jit
def gelu_erf(x, q, a, out):
    """``out = x Phi(x)`` with the cancellation-free erfc form of ops/gelu/phi.py: t = 1/(1 + a|x|),
    h = t Q(t) exp(-x^2/2) (``q``: Q's 9 coefficients times 1/2, highest degree first, a tuple;
    Horner's rule written out, as a loop over the tuple would keep the loop over x from
    vectorising), Phi = h for x < 0 (and -0), 1 - h otherwise (as step - copysign(h, x)); NaN
    stays NaN."""
    q0, q1, q2, q3, q4, q5, q6, q7, q8 = q
    for i in range(out.size):
        v = ld(x[i])
        t = F(1.0) / (F(1.0) + a * abs(v))
        c = ((((((((q0 * t + q1) * t + q2) * t + q3) * t + q4) * t + q5) * t + q6) * t + q7) * t) + q8
        h = c * t * exp32(v * v * F(-0.5))
        st(out, i, v * ((F(0.5) + math.copysign(F(0.5), v)) - math.copysign(h, v)))


@_jit
def relu(x, out):
    """``out = max(x, 0)``; NaN stays NaN (NaN < 0 is false)."""
    for i in range(out.size):
        v = ld(x[i])
        r = F(0.0) if v < F(0.0) else v  # not inline in st(): see st
        st(out, i, r)


@_rows
def row_max(x, out, r0, r1):
    """out[i] = max of row i; a NaN anywhere in the row gives NaN."""
    d = x.shape[1]
    for i in range(r0, r1):
        k = _order(ld(x[i, 0]))
        nan = 0
        for j in range(d):
            v = ld(x[i, j])
            k = max(k, _order(v))
            nan |= v != v
        r = F(np.nan) if nan else _unorder(k)
        st(out, i, r)


@_jit
def rope(x, pos, sin, cos, neox, y, r0, r1):
    """Rotary embedding of rows r0..r1 of x (batch, seq, nhead, dhead) (row = batch * seq + s):
    for p = pos[b, s] and i < dhead/2, (x0, x1) = (x[i], x[i + dhead/2]) (``neox``) or
    (x[2i], x[2i+1]) -> (x0 c - x1 s, x0 s + x1 c) with c, s = cos[p, i], sin[p, i] (float32
    tables); a position outside the tables writes zeros."""
    _, ns, nh, dh = x.shape
    half = dh // 2
    n = sin.shape[0]
    zero = F(0.0)
    for r in range(r0, r1):
        b = r // ns
        t = r - b * ns
        p = pos[b, t]
        if p < 0 or p >= n:
            for h in range(nh):
                for j in range(dh):
                    st(y, (b, t, h, j), zero)
            continue
        for h in range(nh):
            if neox:
                for i in range(half):
                    x0 = ld(x[b, t, h, i])
                    x1 = ld(x[b, t, h, i + half])
                    st(y, (b, t, h, i), x0 * cos[p, i] - x1 * sin[p, i])
                    st(y, (b, t, h, i + half), x0 * sin[p, i] + x1 * cos[p, i])
            else:
                for i in range(half):
                    x0 = ld(x[b, t, h, 2 * i])
                    x1 = ld(x[b, t, h, 2 * i + 1])
                    st(y, (b, t, h, 2 * i), x0 * cos[p, i] - x1 * sin[p, i])
                    st(y, (b, t, h, 2 * i + 1), x0 * sin[p, i] + x1 * cos[p, i])


from .select_kernels import COPY_BLOCK, COPY_TILE, copy_2d, router_select, topk_softmax  # noqa: E402, F401 - one namespace for jit.kernels()
from .spatial_kernels import conv_blocks, conv_rows, max_pool_back, wino_filter, wino_in, wino_out  # noqa: E402, F401 - one namespace for jit.kernels()
