"""Numba kernels of the convolution and pooling families (imported through :mod:`.kernels`).

Spatial problems of 1 to 3 dims reach these kernels as 3-d ones (leading dims of size 1), in
float32, C-contiguous:

- :func:`conv_blocks` (unit strides) and :func:`conv_rows` (any strides): direct convolution
  for few channels per group (depthwise, small channel counts), where an im2col matrix would be
  many times the input and the GEMM too thin for BLAS. Each output element is summed over the
  kernel offsets (c, kd, kh, kw) in that order from the bias in one float32 accumulator, so
  results do not depend on the split into parts.
- :func:`wino_filter`, :func:`wino_in`, :func:`wino_out`: the transforms of Winograd
  F(2x2, 3x3) around the BLAS's stacked GEMMs (infiniop_py/conv/cpu.py), channels last.
- :func:`max_pool_back`: max_pool_backward per (n, c) plane: each window's maximum (the first
  in scan order, the last NaN if any; the first in-bounds element when every one is -inf) gets
  the window's gradient, windows in row-major order, so overlapping windows add up in a fixed
  order.
"""

from __future__ import annotations

import numba
import numpy as np

from .kernels import _jit


@numba.njit(inline="always")
def _split4(r, groups, depth, last):
    """(n, g, od, i) of index r = ((n * groups + g) * depth + od) * last + i."""
    i = r % last
    t = r // last
    od = t % depth
    t = t // depth
    return t // groups, t % groups, od, i


@_jit
def conv_rows(xp, w, bias, y, stride, dil, r0, r1):
    """Rows [r0, r1) of y (N, G, Cog, OD, OH, OW) = w (G, Cog, Cg, KD, KH, KW) applied to the
    zero-padded input xp (N, G, Cg, Dp, Hp, Wp), plus bias (G, Cog); a row is (n, g, od, oh)
    for every co and ow; ``stride``, ``dil``: 3 ints each."""
    G, Cg = xp.shape[1], xp.shape[2]
    Cog, KD, KH, KW = w.shape[1], w.shape[3], w.shape[4], w.shape[5]
    OD, OH, OW = y.shape[3], y.shape[4], y.shape[5]
    sd, sh, sw = stride[0], stride[1], stride[2]
    dd, dh, dw = dil[0], dil[1], dil[2]
    for r in range(r0, r1):
        n, g, od, oh = _split4(r, G, OD, OH)
        for co in range(Cog):
            yr = y[n, g, co, od, oh]
            for o in range(OW):
                yr[o] = bias[g, co]
            for c in range(Cg):
                for kd in range(KD):
                    for kh in range(KH):
                        xr = xp[n, g, c, od * sd + kd * dd, oh * sh + kh * dh]
                        for kw in range(KW):
                            wv = w[g, co, c, kd, kh, kw]
                            if sw == 1:
                                xs = xr[kw * dw : kw * dw + OW]  # unit stride: the loop vectorises
                                for o in range(OW):
                                    yr[o] += wv * xs[o]
                            else:
                                xs = xr[kw * dw :: sw]
                                for o in range(OW):
                                    yr[o] += wv * xs[o]


@_jit
def conv_blocks(xp, w, bias, y, geo, rows, ow_len, q0, q1):
    """Unit-stride convolution by blocks of ``rows`` output rows (R): parts [q0, q1) of (n, g,
    od, block); ``ow_len``: the output row length OW.
    xp (N, G, Cg*Dp*Hp*Wp) is the zero-padded input, planes flattened, y (N, G, Cog, OD,
    OH*Wp) the output at the padded row width Wp = OW + (KW-1)*dw (columns from OW on are
    not results: the caller drops them), w (G, Cog, Cg*KD*KH*KW), bias (G, Cog); ``geo`` = (dd, dh, dw, Dp,
    Hp, KD, KH, KW): the dilations, the padded depth and height, the kernel. Within a block the
    output is one run of positions and kernel offset (c, kd, kh, kw) adds the input run that
    starts (c*Dp + od + kd*dd)*Hp*Wp + (h0 + kh*dh)*Wp + kw*dw: long loops that vectorise,
    four offsets per pass over the output (a fixed order of additions)."""
    G = xp.shape[1]
    Cog, T = w.shape[1], w.shape[2]
    OD = y.shape[3]
    dd, dh, dw, Dp, Hp, KD, KH, KW = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    R, OW = rows, ow_len
    Wp = OW + (KW - 1) * dw
    OH = y.shape[4] // Wp
    nb = (OH + R - 1) // R
    starts = np.empty(T, np.int64)
    for q in range(q0, q1):
        n, g, od, blk = _split4(q, G, OD, nb)
        h0 = blk * R
        h1 = min(OH, h0 + R)
        L = (h1 - h0 - 1) * Wp + OW  # through the last result of the block's last row
        i = 0
        for c in range(T // (KD * KH * KW)):
            for kd in range(KD):
                for kh in range(KH):
                    for kw in range(KW):
                        starts[i] = ((c * Dp + od + kd * dd) * Hp + h0 + kh * dh) * Wp + kw * dw
                        i += 1
        xg = xp[n, g]
        co = 0
        while co + 2 <= Cog:  # two output channels per pass: each input run loaded once for both
            ya = y[n, g, co, od, h0 * Wp : h0 * Wp + L]
            yb = y[n, g, co + 1, od, h0 * Wp : h0 * Wp + L]
            wa, wb = w[g, co], w[g, co + 1]
            ba, bb = bias[g, co], bias[g, co + 1]
            for o in range(L):
                ya[o] = ba
                yb[o] = bb
            j = 0
            while j + 4 <= T:
                a0, a1, a2, a3 = wa[j], wa[j + 1], wa[j + 2], wa[j + 3]
                b0, b1, b2, b3 = wb[j], wb[j + 1], wb[j + 2], wb[j + 3]
                x0 = xg[starts[j] : starts[j] + L]
                x1 = xg[starts[j + 1] : starts[j + 1] + L]
                x2 = xg[starts[j + 2] : starts[j + 2] + L]
                x3 = xg[starts[j + 3] : starts[j + 3] + L]
                for o in range(L):
                    v0, v1, v2, v3 = x0[o], x1[o], x2[o], x3[o]
                    ya[o] += (a0 * v0 + a1 * v1) + (a2 * v2 + a3 * v3)
                    yb[o] += (b0 * v0 + b1 * v1) + (b2 * v2 + b3 * v3)
                j += 4
            while j < T:
                a0, b0 = wa[j], wb[j]
                x0 = xg[starts[j] : starts[j] + L]
                for o in range(L):
                    ya[o] += a0 * x0[o]
                    yb[o] += b0 * x0[o]
                j += 1
            co += 2
        if co < Cog:
            yf = y[n, g, co, od, h0 * Wp : h0 * Wp + L]
            wr = w[g, co]
            for o in range(L):
                yf[o] = bias[g, co]
            j = 0
            while j + 4 <= T:
                w0, w1, w2, w3 = wr[j], wr[j + 1], wr[j + 2], wr[j + 3]
                x0 = xg[starts[j] : starts[j] + L]
                x1 = xg[starts[j + 1] : starts[j + 1] + L]
                x2 = xg[starts[j + 2] : starts[j + 2] + L]
                x3 = xg[starts[j + 3] : starts[j + 3] + L]
                for o in range(L):
                    yf[o] += (w0 * x0[o] + w1 * x1[o]) + (w2 * x2[o] + w3 * x3[o])
                j += 4
            while j < T:
                w0 = wr[j]
                x0 = xg[starts[j] : starts[j] + L]
                for o in range(L):
                    yf[o] += w0 * x0[o]
                j += 1


@_jit
def max_pool_back(x, go, gi, k, s, p, q0, q1):
    """Planes [q0, q1) of gi (P, D*H*W), overwritten: the gradient go (P, OD, OH, OW) of max
    pooling x (P, D, H, W) with window k, stride s and padding p (3 ints each). Per output row,
    the kernel offsets in scan order update every window's best value and place at once (loops
    over the row's windows, in-bounds ranges computed, not tested); then the row's gradients
    are added at those places, windows in order."""
    D, H, W = x.shape[1], x.shape[2], x.shape[3]
    OD, OH, OW = go.shape[1], go.shape[2], go.shape[3]
    s2, p2 = s[2], p[2]
    best = np.empty(OW, np.float32)
    place = np.empty(OW, np.int64)
    for q in range(q0, q1):
        xq = x[q]
        gq = gi[q]
        for i in range(gq.shape[0]):
            gq[i] = 0.0
        for od in range(OD):
            for oh in range(OH):
                for o in range(OW):
                    best[o] = -np.inf
                    place[o] = -1
                for kd in range(k[0]):
                    i = od * s[0] - p[0] + kd
                    if i < 0 or i >= D:
                        continue
                    for kh in range(k[1]):
                        j = oh * s[1] - p[1] + kh
                        if j < 0 or j >= H:
                            continue
                        xr = xq[i, j]
                        for kw in range(k[2]):
                            lo = max(0, -((kw - p2) // s2))  # first window with ow*s - p + kw >= 0
                            hi = min(OW, (W - 1 + p2 - kw) // s2 + 1) if W - 1 + p2 - kw >= 0 else 0
                            if hi <= lo:
                                continue
                            off = lo * s2 - p2 + kw
                            xs = xr[off::s2]
                            base = (i * H + j) * W + off
                            for o in range(hi - lo):
                                v = xs[o]
                                b = best[lo + o]
                                take = (place[lo + o] < 0) | (v > b) | (v != v)
                                best[lo + o] = v if take else b
                                place[lo + o] = base + o * s2 if take else place[lo + o]
                for o in range(OW):
                    gq[place[o]] += go[q, od, oh, o]


@_jit
def wino_filter(w, u):
    """Winograd F(2x2, 3x3) filter transform: u[a*4 + b, c, co] = (G g G^T)[a, b] for the 3x3
    filter g = w[co, c] (float64 inside, rounded once), G = [[1,0,0], [.5,.5,.5], [.5,-.5,.5],
    [0,0,1]]; loops over co, along u's rows, inside."""
    cout, cin = w.shape[0], w.shape[1]
    g = np.empty((3, 3, cout))
    t = np.empty((4, 3, cout))
    for c in range(cin):
        for i in range(3):
            for j in range(3):
                for co in range(cout):
                    g[i, j, co] = w[co, c, i, j]
        for j in range(3):
            for co in range(cout):
                g0, g1, g2 = g[0, j, co], g[1, j, co], g[2, j, co]
                t[0, j, co] = g0
                t[1, j, co] = 0.5 * (g0 + g1 + g2)
                t[2, j, co] = 0.5 * (g0 - g1 + g2)
                t[3, j, co] = g2
        for a in range(4):
            u0, u1, u2, u3 = u[4 * a, c], u[4 * a + 1, c], u[4 * a + 2, c], u[4 * a + 3, c]
            for co in range(cout):
                h0, h1, h2 = t[a, 0, co], t[a, 1, co], t[a, 2, co]
                u0[co] = h0
                u1[co] = 0.5 * (h0 + h1 + h2)
                u2[co] = 0.5 * (h0 - h1 + h2)
                u3[co] = h2


@_jit
def wino_in(xc, v, r0, r1):
    """Winograd F(2x2, 3x3) input transform of tile rows [r0, r1) (row (n, t)): v[a*4 + b,
    (n*TH + t)*TW + s, :] = (B^T d B)[a, b] over the channels, for the 4x4 tile d =
    xc[n, 2t : 2t+4, 2s : 2s+4, :] of the zero-padded channels-last input xc (N, 2*TH + 2,
    2*TW + 2, C); B^T = [[1,0,-1,0], [0,1,1,0], [0,-1,1,0], [0,1,0,-1]]. Loops over the
    channels, contiguous, are the inner ones."""
    TH = (xc.shape[1] - 2) // 2
    TW = (xc.shape[2] - 2) // 2
    C = xc.shape[3]
    r = np.empty((4, 4, C), np.float32)
    for row in range(r0, r1):
        n = row // TH
        t = row % TH
        for s in range(TW):
            for i in range(4):
                x0, x1, x2, x3 = (
                    xc[n, 2 * t + i, 2 * s],
                    xc[n, 2 * t + i, 2 * s + 1],
                    xc[n, 2 * t + i, 2 * s + 2],
                    xc[n, 2 * t + i, 2 * s + 3],
                )
                for c in range(C):
                    r[i, 0, c] = x0[c] - x2[c]
                    r[i, 1, c] = x1[c] + x2[c]
                    r[i, 2, c] = x2[c] - x1[c]
                    r[i, 3, c] = x1[c] - x3[c]
            p = row * TW + s
            for b in range(4):
                v0, v1, v2, v3 = v[b, p], v[4 + b, p], v[8 + b, p], v[12 + b, p]
                for c in range(C):
                    v0[c] = r[0, b, c] - r[2, b, c]
                    v1[c] = r[1, b, c] + r[2, b, c]
                    v2[c] = r[2, b, c] - r[1, b, c]
                    v3[c] = r[1, b, c] - r[3, b, c]


@_jit
def wino_out(m, bias, y, r0, r1):
    """Winograd F(2x2, 3x3) output transform of tile rows [r0, r1): y[n, 2t + a, 2s + b, :] =
    (A^T M A)[a, b] + bias over the output channels, for M = m[:, tile, :] (tiles as in
    :func:`wino_in`), A^T = [[1,1,1,0], [0,1,-1,-1]]; y (N, H, W, Cout) channels-last with
    H <= 2*TH and W <= 2*TW takes the rows and columns that exist."""
    H, W, CO = y.shape[1], y.shape[2], y.shape[3]
    TH = (H + 1) // 2
    TW = (W + 1) // 2
    q = np.empty((2, 4, CO), np.float32)
    for row in range(r0, r1):
        n = row // TH
        t = row % TH
        for s in range(TW):
            p = row * TW + s
            for j in range(4):
                m0, m1, m2, m3 = m[j, p], m[4 + j, p], m[8 + j, p], m[12 + j, p]
                for c in range(CO):
                    q[0, j, c] = m0[c] + m1[c] + m2[c]
                    q[1, j, c] = m1[c] - m2[c] - m3[c]
            for a in range(2):
                h = 2 * t + a
                if h >= H:
                    continue
                ya = y[n, h, 2 * s]
                for c in range(CO):
                    ya[c] = q[a, 0, c] + q[a, 1, c] + q[a, 2, c] + bias[c]
                if 2 * s + 1 < W:
                    yb = y[n, h, 2 * s + 1]
                    for c in range(CO):
                        yb[c] = q[a, 1, c] - q[a, 2, c] - q[a, 3, c] + bias[c]
