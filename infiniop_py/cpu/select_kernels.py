"""Numba kernels of the CPU backend's top-k choices (topksoftmax, topkrouter) and blocked 2-D
copies (imported through :mod:`.kernels`, whose loads, stores and exp they use)."""

from __future__ import annotations

import numba
import numpy as np

from .kernels import F, _jit, _order, _row_top, _rows, exp32, ld

_RANK_NAN = np.int32(-(2**31))  # ranks below every number (NaN last, as a stable descending argsort)


@_rows
def topk_softmax(x, norm, vals, idx, r0, r1):
    """Per row of x: softmax (max-subtracted, float64 sum), then the k = vals.shape[1] largest
    entries, descending, ties -> lower index, -0 ranked with +0, NaN last (ranked on the exact
    inputs by insertion into a sorted list of k); ``norm``: the k values divided by their sum."""
    e = x.shape[1]
    k = vals.shape[1]
    keys = np.empty(k, np.int32)
    where = np.empty(k, np.int32)
    for i in range(r0, r1):
        m = _row_top(x[i])
        s = 0.0
        for j in range(e):
            s += exp32(ld(x[i, j]) - m)
        n = 0
        for j in range(e):
            v = ld(x[i, j]) + F(0.0)  # -0 -> +0
            key = _order(v) if v == v else _RANK_NAN
            if n < k:
                pos = n
                n += 1
            elif key <= keys[k - 1]:
                continue
            else:
                pos = k - 1  # the last one drops out
            while pos > 0 and keys[pos - 1] < key:
                keys[pos] = keys[pos - 1]
                where[pos] = where[pos - 1]
                pos -= 1
            keys[pos] = key
            where[pos] = j
        inv = F(1.0 / s)
        total = F(0.0)
        for t in range(k):
            p = exp32(ld(x[i, where[t]]) - m) * inv
            vals[i, t] = p
            idx[i, t] = where[t]
            total += p
        if norm:
            for t in range(k):
                vals[i, t] = vals[i, t] / total


@numba.njit(inline="always", error_model="numpy")
def _beats(v, w):
    """Whether ``v`` ranks before ``w`` in a descending stable sort that puts NaN last: greater,
    or a number against a NaN (equal values, -0 with +0, keep their order)."""
    return v > w or (w != w and v == v)


@_jit
def router_select(c, groups, keep, idx, r0, r1):
    """The choice of the grouped sigmoid router (ops/topkrouter) for rows r0..r1 of the biased
    scores c (rows, experts) float32: each of ``groups`` equal groups (of two or more) scores the
    sum of its two largest values (NaN if it holds a NaN), the ``keep`` best groups stay (descending, ties
    -> lower group, NaN last), c is +0.0 in the others, and idx (rows, k) gets the indices of
    the k largest (descending, ties -> lower index, NaN last): the ranks of NumPy's stable
    argsorts of the negated values."""
    e = c.shape[1]
    size = e // groups
    k = idx.shape[1]
    score = np.empty(groups, np.float32)
    best = np.empty(keep, np.int64)
    kept = np.empty(groups, np.bool_)
    vals = np.empty(k, np.float32)
    for i in range(r0, r1):
        for g in range(groups):
            m1 = F(-np.inf)
            m2 = F(-np.inf)
            nan = False
            for j in range(g * size, (g + 1) * size):
                v = c[i, j]
                if v != v:
                    nan = True
                elif v > m1:
                    m2 = m1
                    m1 = v
                elif v > m2:
                    m2 = v
            score[g] = F(np.nan) if nan else m1 + m2
        n = 0
        for g in range(groups):
            pos = n
            if n < keep:
                n += 1
            elif not _beats(score[g], score[best[keep - 1]]):
                continue
            else:
                pos = keep - 1
            while pos > 0 and _beats(score[g], score[best[pos - 1]]):
                best[pos] = best[pos - 1]
                pos -= 1
            best[pos] = g
        for g in range(groups):
            kept[g] = False
        for t in range(keep):
            kept[best[t]] = True
        n = 0
        for g in range(groups):
            on = kept[g]
            for j in range(g * size, (g + 1) * size):
                v = c[i, j] + F(0.0) if on else F(0.0)
                pos = n
                if n < k:
                    n += 1
                elif not _beats(v, vals[k - 1]):
                    continue
                else:
                    pos = k - 1
                while pos > 0 and _beats(v, vals[pos - 1]):
                    vals[pos] = vals[pos - 1]
                    idx[i, pos] = idx[i, pos - 1]
                    pos -= 1
                vals[pos] = v
                idx[i, pos] = j


# --- copies ----------------------------------------------------------------------------------
COPY_BLOCK, COPY_TILE = 256, 32


@_jit
def copy_2d(src, dst, r0, r1):
    """``dst[i, j] = src[i, j]`` for rows r0..r1 of 2-D arrays of one dtype, any strides (a
    transpose: dst along rows, src along columns), in blocks of COPY_BLOCK^2 elements walked in
    tiles of COPY_TILE^2: the src lines and pages a block touches stay in cache and in the TLB
    while dst is written in runs along its rows."""
    n1 = dst.shape[1]
    for b0 in range(r0, r1, COPY_BLOCK):
        b1 = min(r1, b0 + COPY_BLOCK)
        for c0 in range(0, n1, COPY_BLOCK):
            c1 = min(n1, c0 + COPY_BLOCK)
            for i0 in range(b0, b1, COPY_TILE):
                i1 = min(b1, i0 + COPY_TILE)
                for j0 in range(c0, c1, COPY_TILE):
                    j1 = min(c1, j0 + COPY_TILE)
                    for i in range(i0, i1):
                        for j in range(j0, j1):
                            dst[i, j] = src[i, j]
