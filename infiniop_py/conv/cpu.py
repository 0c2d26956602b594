"""CPU backend of conv, conv_transpose and conv_backward: NumPy, vectorised, BLAS for the sums.

f32 and the half types are computed in f32 (the f32 BLAS; half results rounded once on store),
f64 in f64, as the NVIDIA backend's default plans and torch accumulate. A pinned plan ending in
``-f64`` (``plan="cpu-im2col-f64"``) computes f32 problems in f64 instead, at about half the
speed: each result is then its exact sum rounded about once.

- Forward (conv, and the input windows of grad_weight): the input is zero-padded once into a
  work-dtype copy; a strided view of it, ``(G, Cg, *k, N, *O)``, is the im2col matrix
  ``(G, Cg·Πk, N·ΠO)``, copied contiguous and multiplied by the weights ``(G, Cout/G, Cg·Πk)``
  in one stacked ``matmul`` (BLAS, one GEMM per group).
- Transposed (conv_transpose, and grad_input): one stacked ``matmul`` gives every kernel
  offset's contribution ``(G, Cout/G, Πk, N·ΠL)``; then, for each kernel offset in a fixed
  order, that slice is added to a strided slice of a zero-padded output (col2im) and the
  padding is cropped. The order of additions is fixed, so results are deterministic.
- Depthwise-like convolutions (one input channel per group) skip im2col: for each kernel offset
  the strided input slice times the per-channel weight is added to the output.
- The batch is processed in chunks so that the im2col matrix stays under ``CHUNK_BYTES``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from infiniop_py.cpu import jit, pool
from infiniop_py.dtypes import DType, acc_numpy
from infiniop_py.halfconv import copy_into, to_f32
from infiniop_py.spatial import pad3

from .geometry import Geometry

CHUNK_BYTES = 64 << 20  # largest im2col / col2im temporary per batch chunk
DIRECT_SPLIT = 1 << 21  # multiply-adds from which the direct convolution's rows go to the pool
WINO_SPLIT = 1 << 18  # transformed input elements from which Winograd's tile transforms go to the pool
DIRECT_BLOCK = 4096  # output positions per block of the unit-stride direct convolution (16 KiB of f32)


EXACT = "-f64"  # a pinned CPU plan ending so accumulates f32 problems in f64 (each result its exact sum rounded about once)


def work_dtype(dtype: DType, pinned: str | None = None):
    if dtype is DType.F32 and pinned is not None and pinned.endswith(EXACT):
        return np.float64
    return acc_numpy(dtype)


def _store(dst: np.ndarray, value: np.ndarray) -> None:
    """Round ``value`` once into ``dst`` (any strides, any float dtype)."""
    np.copyto(dst, value, casting="unsafe")


def _padded(x: np.ndarray, pads, extra, work) -> np.ndarray:
    """x (N, C, *L) as a ``work`` array zero-padded by ``pads`` before and ``pads + extra`` after."""
    shape = x.shape[:2] + tuple(n + 2 * p + e for n, p, e in zip(x.shape[2:], pads, extra))
    xp = np.zeros(shape, work)
    inner = (slice(None), slice(None)) + tuple(slice(p, p + n) for n, p in zip(x.shape[2:], pads))
    np.copyto(xp[inner], x, casting="unsafe")
    return xp


def _windows(xp: np.ndarray, groups: int, k, s, d, out) -> np.ndarray:
    """Read-only view (G, Cg, *k, N, *O) of padded xp (N, C, *Lp): element [g, c, κ, n, o] is
    xp[n, g·Cg + c, o·s + κ·d]."""
    n, c = xp.shape[:2]
    st = xp.strides
    cg = c // groups
    shape = (groups, cg, *k, n, *out)
    strides = (cg * st[1], st[1], *(di * t for di, t in zip(d, st[2:])), st[0], *(si * t for si, t in zip(s, st[2:])))
    return as_strided(xp, shape, strides, writeable=False)


def _chunk(batch: int, per_item: int) -> int:
    """Batch items per chunk so that a temporary of ``per_item`` bytes per item fits CHUNK_BYTES."""
    return max(1, min(batch, CHUNK_BYTES // max(per_item, 1)))


# Channel products (input channels x output channels per group) up to which the compiled
# direct convolution beats im2col + BLAS: the im2col matrix is kvol times the input and the GEMM
# too thin for the BLAS (docs/perf/cpu.md).
DIRECT_CHANNELS = 64


def _direct(g: Geometry, work) -> bool:
    """The compiled direct convolution runs the problem: f32 work, few channels per group."""
    return work == np.float32 and g.cin_g * g.cout_g <= DIRECT_CHANNELS and jit.kernels() is not None


def _winograd(g: Geometry, work) -> bool:
    """Winograd F(2x2, 3x3) runs the problem: f32 work, 2-d 3x3 windows, unit strides and
    dilations, channels past the direct kernels' (its GEMMs are 2.25 times fewer multiply-adds)."""
    return (
        work == np.float32
        and g.nd == 2
        and g.k == (3, 3)
        and g.s == (1, 1)
        and g.d == (1, 1)
        and g.groups == 1
        and g.cin_g * g.cout_g > DIRECT_CHANNELS
        and jit.kernels() is not None
    )


def _conv_winograd(g: Geometry, y, x, w, b) -> None:
    """conv_forward by Winograd F(2x2, 3x3), channels last: each 3x3 filter and each 4x4 tile
    of the zero-padded input transformed (compiled ``wino_filter``, ``wino_in``), 16 stacked
    GEMMs (tiles x Cin) @ (Cin x Cout) through the BLAS (2.25 times fewer multiply-adds than
    the direct sums), each 4x4 product transformed back to a 2x2 output tile with the bias
    (``wino_out``); the tile transforms split over rows of tiles on the pool, the batch in
    chunks whose transformed tiles stay under CHUNK_BYTES."""
    th, tw = -(-g.O[0] // 2), -(-g.O[1] // 2)
    step = _chunk(g.batch, 16 * th * tw * (g.cin + g.cout) * 4)
    if step < g.batch:
        for n0 in range(0, g.batch, step):
            n1 = min(g.batch, n0 + step)
            _conv_winograd(dataclasses.replace(g, batch=n1 - n0), y[n0:n1], x[n0:n1], w, b)
        return
    k = jit.kernels()
    oh, ow = g.O
    (ph, pw), (lh, lw) = g.p, g.L
    # per-thread scratch (pool.scratch): fresh blocks of this size would be page-faulted in anew
    xc = pool.scratch("wino.x", (g.batch, 2 * th + 2, 2 * tw + 2, g.cin), np.float32)
    xc[...] = 0
    copy_into(xc[:, ph : ph + lh, pw : pw + lw], np.moveaxis(x, 1, -1))
    u = pool.scratch("wino.u", (16, g.cin, g.cout), np.float32)
    k.wino_filter(np.ascontiguousarray(to_f32(w)), u)
    rows = g.batch * th
    v = pool.scratch("wino.v", (16, rows * tw, g.cin), np.float32)
    parts = pool.bounds(rows, pool.PARTS_PER_THREAD * pool.THREADS if v.size >= WINO_SPLIT else 1)
    pool.run_all(lambda r0, r1: k.wino_in(xc, v, r0, r1), parts)
    m = np.matmul(v, u, out=pool.scratch("wino.m", (16, rows * tw, g.cout), np.float32))  # (16, tiles, Cout)
    bias = np.zeros(g.cout, np.float32) if b is None else np.ascontiguousarray(to_f32(b)).reshape(-1)
    out = pool.scratch("wino.y", (g.batch, oh, ow, g.cout), np.float32)
    pool.run_all(lambda r0, r1: k.wino_out(m, bias, out, r0, r1), parts)
    # back to channels first by the blocked transpose (a strided NumPy copy is 3x slower)
    direct = y.dtype == np.float32 and y.flags.c_contiguous
    dst = y if direct else pool.scratch("wino.t", y.shape, np.float32)
    hw = oh * ow
    src = out.reshape(g.batch, hw, g.cout)
    pool.run_all(lambda n: k.copy_2d(src[n].T, dst[n].reshape(g.cout, hw), 0, g.cout), [(n,) for n in range(g.batch)])
    if not direct:
        copy_into(y, dst)


def _depthwise(g: Geometry) -> bool:
    """One input channel per group: per-offset products beat a stack of one-row GEMMs."""
    return g.cin_g == 1 and g.cout_g <= 4


_ALGORITHMS = ("cpu-direct", "cpu-winograd", "cpu-im2col", "cpu-depthwise", "cpu-col2im", "cpu-im2col-col2im")
PLAN_NAMES = _ALGORITHMS + tuple(n + EXACT for n in _ALGORITHMS)


def algorithm(kind: str, g: Geometry, work) -> str:
    """The CPU plan's rule table, first match: the name of the algorithm that runs the problem
    (the only place that chooses it; a pinned name only chooses the accumulation)."""
    if kind != "conv":
        return {"transpose": "cpu-col2im", "backward": "cpu-im2col-col2im"}[kind]
    if _direct(g, work):
        return "cpu-direct"
    if _winograd(g, work):
        return "cpu-winograd"
    if _depthwise(g):
        return "cpu-depthwise"
    return "cpu-im2col"


def plan_name(kind: str, g: Geometry, work, exact: bool = False) -> str:
    """:func:`algorithm`, with EXACT appended where f32 accumulates in f64."""
    name = algorithm(kind, g, work)
    return name + EXACT if exact else name


# -- forward ----------------------------------------------------------------------------------
def conv_forward(g: Geometry, y, x, w, b, work) -> None:
    """y (N, Cout, *O) = conv(x (N, Cin, *L), w (Cout, Cin/G, *k)) + b."""
    if y.size == 0:
        return
    name = algorithm("conv", g, work)
    if name == "cpu-direct":
        _conv_direct(g, y, x, w, b)
        return
    if name == "cpu-winograd":
        _conv_winograd(g, y, x, w, b)
        return
    G, cg, co = g.groups, g.cin_g, g.cout_g  # noqa: N806
    P = math.prod(g.O)  # noqa: N806
    wk = w.astype(work)
    bias = None if b is None else b.astype(work).reshape((1, g.cout) + (1,) * g.nd)
    depthwise = name == "cpu-depthwise"
    step = _chunk(g.batch, g.cin * g.kvol * P * np.dtype(work).itemsize)
    for n0 in range(0, g.batch, step):
        n1 = min(g.batch, n0 + step)
        nb = n1 - n0
        xp = _padded(x[n0:n1], g.p, (0,) * g.nd, work)
        win = _windows(xp, G, g.k, g.s, g.d, g.O)  # (G, Cg, *k, nb, *O)
        if depthwise:  # Cg == 1: for each kernel offset, out[n, g, j] += x_slice[g, n] · w[g·co + j, κ]
            acc = np.zeros((G, co, nb) + g.O, work)
            w3 = wk.reshape(G, co, g.kvol)
            shp = (G, co) + (1,) * (1 + g.nd)
            for kappa, idx in enumerate(np.ndindex(*g.k)):
                acc += win[(slice(None), 0) + idx][:, None] * w3[:, :, kappa].reshape(shp)
        else:
            cols = np.ascontiguousarray(win).reshape(G, cg * g.kvol, nb * P)
            acc = np.matmul(wk.reshape(G, co, cg * g.kvol), cols)  # (G, co, nb·P)
        out = np.moveaxis(acc.reshape(g.cout, nb, *g.O), 1, 0)  # (nb, Cout, *O)
        if bias is not None:
            out = out + bias
        _store(y[n0:n1], out)


def _conv_direct(g: Geometry, y, x, w, b) -> None:
    """conv_forward through the compiled kernels (f32): ``conv_blocks`` for unit strides,
    ``conv_rows`` otherwise, parts over the pool."""
    k = jit.kernels()
    G, cg, cog = g.groups, g.cin_g, g.cout_g  # noqa: N806
    xp = _padded(x, g.p, (0,) * g.nd, np.float32)
    lp = pad3(xp.shape[2:], 1)
    k3, o3 = pad3(g.k, 1), pad3(g.O, 1)
    wk = np.ascontiguousarray(to_f32(w))
    bias = np.zeros((G, cog), np.float32) if b is None else np.ascontiguousarray(to_f32(b)).reshape(G, cog)
    work = y.size * cg * g.kvol
    pieces = pool.PARTS_PER_THREAD * pool.THREADS if work >= DIRECT_SPLIT else 1
    d3 = pad3(g.d, 1)
    if all(si == 1 for si in g.s):
        wp = lp[2]
        rows = max(1, DIRECT_BLOCK // wp)
        parts = g.batch * G * o3[0] * -(-o3[1] // rows)
        acc = np.empty((g.batch, G, cog, o3[0], o3[1] * wp), np.float32)
        geo = np.array((*d3, lp[0], lp[1], *k3), np.int64)
        x3 = xp.reshape(g.batch, G, -1)
        w3 = wk.reshape(G, cog, -1)
        pool.run_all(lambda q0, q1: k.conv_blocks(x3, w3, bias, acc, geo, rows, o3[2], q0, q1), pool.bounds(parts, pieces))
        out = acc.reshape(g.batch, g.cout, o3[0], o3[1], wp)[..., : o3[2]].reshape(y.shape)
    else:
        x6 = xp.reshape((g.batch, G, cg) + lp)
        w6 = wk.reshape((G, cog, cg) + k3)
        acc = np.empty((g.batch, G, cog) + o3, np.float32)
        stride = np.array(pad3(g.s, 1), np.int64)
        dil = np.array(d3, np.int64)
        rows = g.batch * G * o3[0] * o3[1]
        pool.run_all(lambda r0, r1: k.conv_rows(x6, w6, bias, acc, stride, dil, r0, r1), pool.bounds(rows, pieces))
        out = acc.reshape(y.shape)
    copy_into(y, out)


# -- transposed -------------------------------------------------------------------------------
def conv_transposed(g: Geometry, out_len, y, x, w, b, work) -> None:
    """y (N, Cy, *out_len) = transposed conv of x (N, Cx, *Lx) with w (Cx, Cy/G, *k): every
    x[n, c, i]·w[c, j, κ] lands at position i·s - p + κ·d of channel g·(Cy/G) + j.

    ``g`` describes the forward direction (Cx = g.cout side for conv_backward, g.cin side for
    conv_transpose): only groups, k, s, p, d are read from it.

    By stride phase: kernel offset κ lands on phase r = (κ·d) mod s of each dim, at phase index
    i + q with q = (κ·d) // s. x is zero-padded at the end of each dim by the largest q, so one
    GEMM gives, per κ, a contribution with the shape of a phase's plane; each phase is then the
    sum of its offsets' contributions, each shifted by its q -- one contiguous addition over
    every plane at once, as the padding's zeros are all that crosses a plane's edge (kernel
    offsets in row-major order; with a non-finite weight, whose products with the padding are
    NaN, the real positions alone, dim by dim) -- and is stored into the strided positions of
    that phase."""
    if y.size == 0:
        return
    G = g.groups  # noqa: N806
    nbatch, cx = x.shape[:2]
    cy = y.shape[1]
    cxg, cyg = cx // G, cy // G
    lx = x.shape[2:]
    nd = g.nd
    full = tuple(
        max((li - 1) * si + di * (ki - 1) + 1, pi + oi) for li, si, di, ki, pi, oi in zip(lx, g.s, g.d, g.k, g.p, out_len)
    )
    qmax = tuple((ki - 1) * di // si for ki, di, si in zip(g.k, g.d, g.s))
    ph = tuple(li + qi for li, qi in zip(lx, qmax))  # a phase's plane
    pstride = [math.prod(ph[i + 1 :]) for i in range(nd)]
    # (G, Πk·cyg, cxg): rows in kernel-offset-major order, so a κ's contribution is contiguous
    wk = w.astype(work).reshape((G, cxg, cyg, g.kvol)).transpose(0, 3, 2, 1).reshape(G, g.kvol * cyg, cxg)
    bias = None if b is None else b.astype(work).reshape((1, cy) + (1,) * nd)
    item = np.dtype(work).itemsize
    step = _chunk(nbatch, (cy * g.kvol * math.prod(ph) + 2 * cy * math.prod(full)) * item)
    crop = (slice(None), slice(None), slice(None)) + tuple(slice(pi, pi + oi) for pi, oi in zip(g.p, out_len))
    finite = bool(np.isfinite(wk).all())
    for n0 in range(0, nbatch, step):
        n1 = min(nbatch, n0 + step)
        nb = n1 - n0
        xs = np.zeros((cx, nb) + ph, work)
        np.copyto(
            xs[(slice(None), slice(None)) + tuple(slice(0, li) for li in lx)], np.moveaxis(x[n0:n1], 1, 0), casting="unsafe"
        )
        m = cyg * nb * math.prod(ph)
        cols = np.matmul(wk, xs.reshape(G, cxg, nb * math.prod(ph))).reshape(G, g.kvol, m)
        phases: dict = {}
        for kappa, idx in enumerate(np.ndindex(*g.k)):
            r = tuple(ki * di % si for ki, di, si in zip(idx, g.d, g.s))
            if r not in phases:
                phases[r] = np.zeros((G, m), work)
            if finite:
                shift = sum(ki * di // si * st for ki, di, si, st in zip(idx, g.d, g.s, pstride))
                phases[r][:, shift:] += cols[:, kappa, : m - shift]
            else:  # inf·0 in the padding would be NaN: only the real positions, dim by dim
                lead = (slice(None),) * 3
                q = tuple(ki * di // si for ki, di, si in zip(idx, g.d, g.s))
                dst = phases[r].reshape((G, cyg, nb) + ph)[lead + tuple(slice(qi, qi + li) for qi, li in zip(q, lx))]
                dst += cols[:, kappa].reshape((G, cyg, nb) + ph)[lead + tuple(slice(0, li) for li in lx)]
        buf = np.zeros((G, cyg, nb) + full, work)
        for r, part in phases.items():
            dst = buf[(slice(None),) * 3 + tuple(slice(ri, None, si) for ri, si in zip(r, g.s))]
            src = part.reshape((G, cyg, nb) + ph)
            fit = tuple(min(a, c) for a, c in zip(dst.shape[3:], ph))
            dst[(slice(None),) * 3 + tuple(slice(0, f) for f in fit)] = src[(slice(None),) * 3 + tuple(slice(0, f) for f in fit)]
        res = np.moveaxis(buf[crop].reshape((cy, nb) + tuple(out_len)), 1, 0)
        if bias is not None:
            res = res + bias
        _store(y[n0:n1], res)


def flipped_forward(g: Geometry) -> Geometry | None:
    """conv_backward's grad_input as a forward convolution, where strides and dilations are 1
    and p <= k - 1: grad_output (the forward's y) convolved with the flipped weights
    (:func:`flip_weight`) under padding k - 1 - p gives grad_input; else None."""
    if any(si != 1 for si in g.s) or any(di != 1 for di in g.d) or any(pi > ki - 1 for pi, ki in zip(g.p, g.k)):
        return None
    pads = tuple(ki - 1 - pi for ki, pi in zip(g.k, g.p))
    return dataclasses.replace(g, cin=g.cout, cout=g.cin, L=g.O, O=g.L, p=pads)


def flip_weight(g: Geometry, w: np.ndarray) -> np.ndarray:
    """w (Cout, Cin/G, *k) as the weights (Cin, Cout/G, *k) of :func:`flipped_forward`: per
    group, input and output channels swapped and every spatial dim reversed."""
    nd = g.nd
    wg = w.reshape((g.groups, g.cout_g, g.cin_g) + g.k)[(slice(None),) * 3 + (slice(None, None, -1),) * nd]
    return np.ascontiguousarray(np.swapaxes(wg, 1, 2)).reshape((g.cin, g.cout_g) + g.k)


# -- weight gradient --------------------------------------------------------------------------
def conv_weight_grad(g: Geometry, gw, gb, go, x, work) -> None:
    """gw[co, ci', κ] = Σ_n,o go[n, co, o]·x[n, ci, o·s - p + κ·d]; gb[co] = Σ_n,o go[n, co, o]."""
    G, cg, co = g.groups, g.cin_g, g.cout_g  # noqa: N806
    P = math.prod(g.O)  # noqa: N806
    acc = np.zeros((G, cg * g.kvol, co), work)  # transposed: cols @ go^T is the faster GEMM for the BLAS
    if gw.size and g.batch:
        step = _chunk(g.batch, g.cin * g.kvol * P * np.dtype(work).itemsize)
        for n0 in range(0, g.batch, step):
            n1 = min(g.batch, n0 + step)
            nb = n1 - n0
            xp = _padded(x[n0:n1], g.p, (0,) * g.nd, work)
            cols = np.ascontiguousarray(_windows(xp, G, g.k, g.s, g.d, g.O)).reshape(G, cg * g.kvol, nb * P)
            gos = np.moveaxis(go[n0:n1].astype(work, copy=False), 1, 0).reshape(G, co, nb * P)
            acc += np.matmul(cols, gos.transpose(0, 2, 1))
    if gw.size:
        _store(gw, acc.transpose(0, 2, 1).reshape(gw.shape))
    if gb is not None and gb.size:
        axes = (0,) + tuple(range(2, go.ndim))
        _store(gb, go.astype(work, copy=False).sum(axis=axes))
