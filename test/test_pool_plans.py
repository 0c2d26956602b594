"""The NVIDIA launch plans of the pooling operators, checked on the CPU: the generic kernels'
and the fast paths' index arithmetic run in Python on float64 data (every written element
written once, values equal to the CPU backend's), the plans of the benchmark shapes, the ctypes
mirrors of the kernels' metadata, and the compile list."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from infiniop_py.dtypes import DType
from infiniop_py.pool import cuda as pc
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.tensor import TensorDescriptor
from infiniop_py.testing.pool_cases import out_shape

H100_THREADS = 132 * 2048  # the fake device of the CPU-side planner tests: 132 SMs of 2048 threads
FWD = ("avg_pool", "max_pool")
BWD = ("avg_pool_backward", "max_pool_backward")
POOL_OPS = FWD + BWD


def td(shape, strides=None, dtype=DType.F32):
    return TensorDescriptor(tuple(shape), strides, dtype)


# -- the NVIDIA plan, checked by running the kernels' index arithmetic in Python --------------------
def _geometry(op, case, dtype=DType.F64):
    from infiniop_py.spec import Checker

    spec = get_spec(op)
    tensors = {n: td(*tc.resolved(dtype)[:2], dtype) for n, tc in case.tensors.items()}
    attrs = {a.name: case.attrs.get(a.name, a.default) for a in spec.attrs}
    info = spec.validate(Checker(op, tensors, {k: spec.attr[k].coerce(v, op) for k, v in attrs.items()}, None))
    return info


def _fastdiv(f, n: int) -> int:
    q = (((n * f.m) >> 32) + n) >> f.s
    assert q == n // f.d, (n, f.d)  # the magic numbers are exact over the values used
    return q


class _Emu:
    """The index arithmetic of pool.cu in Python (float64 values; one element at a time), in the
    kernels' order: tiles, work items of V elements, covering windows in ascending order."""

    def __init__(self, plan, bufs):
        self.m = pc.PoolMetaC.from_buffer_copy(plan.meta)
        self.mode = plan.mode
        self.bufs = bufs  # flat float64 arrays: [written, read 1, read 2]
        self.writes = np.zeros(bufs[0].size, np.int64)

    @staticmethod
    def divmod(f, n):
        q = _fastdiv(f, n)
        return q, n - q * f.d

    def tile(self, tile):
        m = self.m
        tile, r2 = self.divmod(m.dn2, tile)
        tile, r1 = self.divmod(m.dn1, tile)
        tile, r0 = self.divmod(m.dn0, tile)
        other, rl = self.divmod(m.dnl, tile)
        a = [r0 * m.T[0], r1 * m.T[1], r2 * m.T[2]]
        lane0 = rl * m.TL
        base = [other * m.str[j][1] + lane0 * m.str[j][0] for j in range(3)]
        return a, lane0, base

    def item(self, a, lane0, e):
        m = self.m
        e, lane = self.divmod(m.dTL, e)
        e, g = self.divmod(m.dG, e)
        t0, t1 = self.divmod(m.dT1, e)
        p0, p1 = a[0] + t0, a[1] + t1
        return lane0 + lane < m.lanes and p0 < m.ext[0] and p1 < m.ext[1], lane, p0, p1, g

    def p2(self, a, g, v):
        m = self.m
        t2 = g + v * m.G
        return a[2] + t2 if t2 < m.T[2] and a[2] + t2 < m.ext[2] else -1

    def cover(self, d, i):
        m = self.m
        num = i + m.p[d] - m.k[d] + 1
        lo = 0 if num <= 0 else _fastdiv(m.ds[d], num + m.s[d] - 1)
        return lo, min(_fastdiv(m.ds[d], i + m.p[d]), m.O[d] - 1)

    def span(self, d, o):
        m = self.m
        st = o * m.s[d] - m.p[d]
        return min(st + m.k[d], m.L[d] + m.p[d]) - st

    def argmax(self, xb, o, slot=2):
        m = self.m
        st = [o[d] * m.s[d] - m.p[d] for d in range(3)]
        b = [max(st[d], 0) for d in range(3)]
        e = [min(st[d] + m.k[d], m.L[d]) for d in range(3)]
        best, arg = -np.inf, ((b[0] - st[0]) * m.k[1] + (b[1] - st[1])) * m.k[2] + (b[2] - st[2])
        for i in itertools.product(*(range(b[d], e[d]) for d in range(3))):
            v = self.bufs[slot][xb + sum(i[d] * m.str[slot][2 + d] for d in range(3))]
            if v > best or v != v:
                best, arg = v, ((i[0] - st[0]) * m.k[1] + (i[1] - st[1])) * m.k[2] + (i[2] - st[2])
        return best, arg

    def write(self, off, value):
        self.bufs[0][off] = value
        self.writes[off] += 1

    def run(self):
        m = self.m
        for tile in range(m.ntiles):
            a, lane0, base = self.tile(tile)
            LO, arg = None, None
            if self.mode == pc.MAX_BWD_TILED:
                LO, arg = self.halo(a, lane0, base)
            for e in range(m.items):
                ok, lane, p0, p1, g = self.item(a, lane0, e)
                if not ok:
                    continue
                if self.mode <= pc.AVG_FWD:
                    for v in range(m.V):
                        p2 = self.p2(a, g, v)
                        if p2 >= 0:
                            self.forward(base, lane, [p0, p1, p2])
                else:
                    self.backward(a, base, lane, p0, p1, g, arg, LO)

    def forward(self, base, lane, o):
        m = self.m
        xb = base[1] + lane * m.str[1][0]
        if self.mode == pc.MAX_FWD:
            r = self.argmax(xb, o, slot=1)[0]
        else:
            st = [o[d] * m.s[d] - m.p[d] for d in range(3)]
            rng = [range(max(st[d], 0), min(st[d] + m.k[d], m.L[d])) for d in range(3)]
            total = sum(self.bufs[1][xb + sum(i[d] * m.str[1][2 + d] for d in range(3))] for i in itertools.product(*rng))
            r = total / (self.span(0, o[0]) * self.span(1, o[1]) * self.span(2, o[2]))
        self.write(base[0] + lane * m.str[0][0] + sum(o[d] * m.str[0][2 + d] for d in range(3)), r)

    def backward(self, a, base, lane, i0, i1, g, arg, lo_):
        m = self.m
        assert m.V == 4
        i2 = [self.p2(a, g, v) for v in range(m.V)]
        c2 = [self.cover(2, i) if i >= 0 else (1, 0) for i in i2]
        (lo0, hi0), (lo1, hi1) = self.cover(0, i0), self.cover(1, i1)
        gb, xb = base[1] + lane * m.str[1][0], base[2] + lane * m.str[2][0]
        acc = [0.0] * m.V
        for o0 in range(lo0, hi0 + 1):
            st0 = o0 * m.s[0] - m.p[0]
            for o1 in range(lo1, hi1 + 1):
                st1 = o1 * m.s[1] - m.p[1]
                g01 = gb + o0 * m.str[1][2] + o1 * m.str[1][3]
                r01 = ((i0 - st0) * m.k[1] + (i1 - st1)) * m.k[2]
                f01 = self.span(0, o0) * self.span(1, o1)
                for v in range(m.V):
                    for o2 in range(c2[v][0], c2[v][1] + 1):
                        gv = self.bufs[1][g01 + o2 * m.str[1][4]]
                        if self.mode == pc.AVG_BWD:
                            acc[v] += gv / (f01 * self.span(2, o2))
                            continue
                        rel = r01 + i2[v] - (o2 * m.s[2] - m.p[2])
                        if self.mode == pc.MAX_BWD_TILED:
                            h = ((((o0 - lo_[0]) * m.H[1] + (o1 - lo_[1])) * m.H[2]) + (o2 - lo_[2])) * m.TL + lane
                            am = arg[h]
                        else:
                            am = self.argmax(xb, (o0, o1, o2))[1]
                        if am == rel:
                            acc[v] += gv
        wb = base[0] + lane * m.str[0][0] + i0 * m.str[0][2] + i1 * m.str[0][3]
        for v in range(m.V):
            if i2[v] >= 0:
                self.write(wb + i2[v] * m.str[0][4], acc[v])

    def halo(self, a, lane0, base):
        m = self.m
        LO, HI = [], []
        for d in range(3):
            LO.append(self.cover(d, a[d])[0])
            HI.append(self.cover(d, min(a[d] + m.T[d] - 1, m.L[d] - 1))[1])
            assert HI[d] - LO[d] + 1 <= m.H[d], "halo box too small"
        arg = {}
        for h in range(m.halo_items):
            r, lane = self.divmod(m.dHL, h)
            r, h2 = self.divmod(m.dH2, r)
            h0, h1 = self.divmod(m.dH1, r)
            o = [LO[0] + h0, LO[1] + h1, LO[2] + h2]
            if lane0 + lane >= m.lanes or any(o[d] > HI[d] for d in range(3)):
                continue
            arg[h] = self.argmax(base[2] + lane * m.str[2][0], o)[1]
        return LO, arg


MODES = pc.MODES


def _buffers(op, case):
    """(names, input data, flat float64 buffers [written (NaN), reads...] laid out with the case's
    strides)."""
    from infiniop_py.testing.data import layout

    rng = np.random.default_rng(3)
    names = [r.name for r in get_spec(op).tensors]
    data, bufs = {}, []
    for n in names:
        shape, strides, _ = case.tensors[n].resolved(DType.F64)
        if n == names[0]:
            flat = np.full(max(1, sum((s - 1) * st for s, st in zip(shape, strides)) + 1), np.nan)
        else:
            v = case.data(rng, n, DType.F64, shape) if case.data else None
            data[n] = rng.uniform(-2, 2, shape) if v is None else v
            flat = layout(data[n], shape, strides, DType.F64)
        bufs.append(flat)
    return names, data, bufs + [bufs[0]] * (3 - len(bufs))


def _emulate(op, case, smem_limit=None, budget=None):
    """Plan ``case`` for the GPU, run the plan's index arithmetic in Python on float64 data laid
    out with the case's strides, and return (emulated written tensor, CPU backend result, plan,
    write counts)."""
    from infiniop_py.testing.data import gather

    spec = get_spec(op)
    info = _geometry(op, case)
    names, data, bufs = _buffers(op, case)
    written, reads = names[0], names[1:]
    plan = pc.plan(info.geom, info[written], [info[r] for r in reads], MODES[op], smem_limit, threads=H100_THREADS)
    emu = _Emu(plan, bufs)
    emu.run()
    shape, strides, _ = case.tensors[written].resolved(DType.F64)
    got = gather(bufs[0], shape, strides)
    expected = np.empty(shape)
    spec.cpu(info)({written: expected, **data}, None, {})
    return got, expected, plan, gather(emu.writes.astype(np.float64), shape, strides)


def _small_cases(op):
    for i, c in enumerate(get_cases(op)):
        if "quick" in c.suites and all(np.prod(t.shape) <= 4000 for t in c.tensors.values()):
            yield pytest.param(op, i, id=f"{op}-{i}")


@pytest.mark.parametrize("op,index", [p for op in POOL_OPS for p in _small_cases(op)])
def test_plan_emulated(op, index):
    """Every element of the written tensor is written exactly once and the values match the CPU
    backend (max_pool: bitwise; sums, whose order differs: to float64 rounding)."""
    case = get_cases(op)[index]
    got, expected, plan, writes = _emulate(op, case)
    assert np.all(writes == 1), f"{case.description}: writes {np.unique(writes)}"
    if op == "max_pool":
        assert np.array_equal(got, expected, equal_nan=True), case.description
    else:
        assert np.allclose(got, expected, rtol=1e-12, atol=1e-12), case.description


@pytest.mark.parametrize("op,index", [p for op in POOL_OPS for p in _small_cases(op)])
def test_plan_emulated_small_tiles(op, index, monkeypatch):
    """The same with tiles of a few elements: many tiles per plane, partial tiles at every edge,
    tiled max backward halos that start inside the tensor or cover no window at all."""
    monkeypatch.setattr(pc, "MAX_TILE", 9)
    monkeypatch.setattr(pc, "MIN_ROW", 1)
    monkeypatch.setattr(pc, "LANES", 3)
    case = get_cases(op)[index]
    got, expected, plan, writes = _emulate(op, case)
    assert np.all(writes == 1), f"{case.description}: writes {np.unique(writes)}"
    assert np.allclose(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True), case.description


@pytest.mark.parametrize("index", [i for i, c in enumerate(get_cases("max_pool_backward")) if "quick" in c.suites][:12])
def test_plan_emulated_gather_fallback(index):
    """With no shared memory the tiled max backward falls back to the per-element gather (MODE
    4), with the same results."""
    case = get_cases("max_pool_backward")[index]
    if any(np.prod(t.shape) > 4000 for t in case.tensors.values()):
        pytest.skip("large")
    got, expected, plan, writes = _emulate("max_pool_backward", case, smem_limit=0)
    assert plan.mode == pc.MAX_BWD_GATHER
    assert np.all(writes == 1) and np.allclose(got, expected, rtol=1e-12, atol=1e-12)


# -- the fast paths (pool_fast.cu), checked the same way -------------------------------------------
class _FastEmu:
    """The index arithmetic of pool_fast.cu in Python (float64 values, one work item at a time,
    the loops in the kernels' order), stage by stage: work item split, x tiles with their fill
    outside the input, window scans (MODE 2: argmax offsets into the workspace), the backward
    gather over covering windows, and the stores. The rows kernels address W with stride 1 and
    the cl kernels C with stride 1, as the kernels do."""

    def __init__(self, fp, bufs, ws):
        self.fp, self.bufs, self.ws = fp, bufs, ws
        self.k, self.s, self.p = fp.rule
        self.writes = {id(b): np.zeros(b.size, np.int64) for b in (bufs[0], ws)}

    def run(self):
        for st in self.fp.stages:
            self.st, self.mode = st, st.mode
            self.m = pc.PoolFastMetaC.from_buffer_copy(st.meta)
            self.t = [self.ws if slot == "ws" else self.bufs[slot] for slot in st.slots]
            assert self.m.items == np.prod(st.dims) * (self.m.items // np.prod(st.dims)) and self.m.items < 2**31
            kernel = getattr(self, st.kernel)
            for e in range(self.m.items):
                kernel(*self.split(e))

    def split(self, e):
        q = []
        for j in range(3):
            t = _fastdiv(self.m.d[j], e)
            q.append(e - t * self.m.d[j].d)
            e = t
        return (*q, e)

    def cover(self, b):
        """PfCover<K, S, P, B>: (OLO, NWIN, XLO)."""
        k, s, p = self.k, self.s, self.p
        olo = -((k - 1 - p) // s)
        return olo, (b - 1 + p) // s - olo + 1, s * olo - p

    def span(self, o, L):  # noqa: N803
        st = o * self.s - self.p
        return min(st + self.k, L + self.p) - st

    def tile(self, xb, sh, sw, oh0, ow0, nh, nw, col0):
        """Windows (oh0 + wh, ow0 + ww) of tensor 1 from offset xb: (results, argmax offsets);
        col0 is the kernel's first tile column (base + XOFF)."""
        m, k, s, p = self.m, self.k, self.s, self.p
        assert col0 == s * ow0 - p
        fill = 0.0 if self.mode == 1 else -np.inf
        r = [[fill] * nw for _ in range(nh)]
        arg = [[max(0, p - s * (oh0 + wh)) * k + max(0, p - s * (ow0 + ww)) for ww in range(nw)] for wh in range(nh)]
        for xr in range(s * (nh - 1) + k):
            i = s * oh0 - p + xr
            if not 0 <= i < m.H:
                continue
            for xc in range(s * (nw - 1) + k):
                j = col0 + xc
                v = self.t[1][xb + i * sh + j * sw] if 0 <= j < m.W else fill
                for wh, ww in itertools.product(range(nh), range(nw)):
                    rr, cc = xr - s * wh, xc - s * ww
                    if not (0 <= rr < k and 0 <= cc < k):
                        continue
                    if self.mode == 1:
                        r[wh][ww] += v
                    elif v > r[wh][ww] or v != v:
                        r[wh][ww], arg[wh][ww] = v, rr * k + cc
        return r, arg

    def write(self, off, value):
        self.t[0][off] = value
        self.writes[id(self.t[0])][off] += 1

    def result(self, oh, ow, r, arg):
        """What the forward kernels store for window (oh, ow)."""
        if self.mode == 2:
            assert 0 <= arg < self.k * self.k
            return arg
        return r / (self.span(oh, self.m.H) * self.span(ow, self.m.W)) if self.mode == 1 else r

    def rows(self, q0, q1, c, n):
        m, s, p, V = self.m, self.s, self.p, self.st.V
        st, sx = m.st[0], m.st[1]
        ow0, oh0 = q0 * V, q1 * pc.FAST_FH
        r, arg = self.tile(n * sx[0] + c * sx[1], sx[2], 1, oh0, ow0, pc.FAST_FH, V, s * ow0 - p)
        for wh in range(pc.FAST_FH):
            oh = oh0 + wh
            if oh >= m.OH:
                break
            for v in range(V):
                if ow0 + v < m.OW:
                    self.write(n * st[0] + c * st[1] + oh * st[2] + ow0 + v, self.result(oh, ow0 + v, r[wh][v], arg[wh][v]))

    def cl(self, cv, cb, rb, n):
        m, s, p, V = self.m, self.s, self.p, self.st.V
        st, sx = m.st[0], m.st[1]
        c0, oh0, ow0 = cv * V, rb * pc.FAST_FH, cb * pc.FAST_FW
        for t in range(min(V, m.C - c0)):
            r, arg = self.tile(n * sx[0] + c0 + t, sx[2], sx[3], oh0, ow0, pc.FAST_FH, pc.FAST_FW, s * ow0 - p)
            for wh, ww in itertools.product(range(pc.FAST_FH), range(pc.FAST_FW)):
                oh, ow = oh0 + wh, ow0 + ww
                if oh < m.OH and ow < m.OW:
                    self.write(n * st[0] + oh * st[2] + ow * st[3] + c0 + t, self.result(oh, ow, r[wh][ww], arg[wh][ww]))

    def gather(self, gb, ib, gs, is_, oh0, ow0, nw, block, xlo_w):
        """Per element (ri, ci) of a block: the sum over its covering windows, ascending; grad_output
        from offset gb of tensor 1, argmax offsets (MODE 2) from offset ib of tensor 2."""
        m, k, s = self.m, self.k, self.s
        _, nh, xlo = self.cover(s)
        acc = {}
        for ri, ci in itertools.product(range(s), range(block)):
            total = 0.0
            for wh, ww in itertools.product(range(nh), range(nw)):
                oh, ow = oh0 + wh, ow0 + ww
                rr, cc = ri - xlo - s * wh, ci - xlo_w - s * ww
                if not (0 <= oh < m.OH and 0 <= ow < m.OW and 0 <= rr < k and 0 <= cc < k):
                    continue
                g = self.t[1][gb + oh * gs[0] + ow * gs[1]]
                if self.mode == 1:
                    total += g / (self.span(oh, m.H) * self.span(ow, m.W))
                elif self.t[2][ib + oh * is_[0] + ow * is_[1]] == rr * k + cc:
                    total += g
            acc[ri, ci] = total
        return acc

    def rows_backward(self, q0, q1, c, n):
        m, s, V = self.m, self.s, self.st.V
        st, sg, si = m.st
        olo_h = self.cover(s)[0]
        olo_w, nw, xlo_w = self.cover(V)
        w0, i0 = q0 * V, q1 * s
        acc = self.gather(
            n * sg[0] + c * sg[1], n * si[0] + c * si[1], (sg[2], 1), (si[2], 1), q1 + olo_h, w0 // s + olo_w, nw, V, xlo_w
        )
        for (ri, ci), total in acc.items():
            if i0 + ri < m.H and w0 + ci < m.W:
                self.write(n * st[0] + c * st[1] + (i0 + ri) * st[2] + w0 + ci, total)

    def cl_backward(self, cv, cb, rb, n):
        m, s, V = self.m, self.s, self.st.V
        st, sg, si = m.st
        olo, nw, xlo = self.cover(s)
        c0, i0, j0 = cv * V, rb * s, cb * s
        for t in range(min(V, m.C - c0)):
            acc = self.gather(
                n * sg[0] + c0 + t, n * si[0] + c0 + t, (sg[2], sg[3]), (si[2], si[3]), rb + olo, cb + olo, nw, s, xlo
            )
            for (ri, ci), total in acc.items():
                if i0 + ri < m.H and j0 + ci < m.W:
                    self.write(n * st[0] + (i0 + ri) * st[2] + (j0 + ci) * st[3] + c0 + t, total)


def _emulate_fast(op, case, dtype):
    """As ``_emulate`` for the fast path that ``case`` takes with ``dtype`` (its V), with the
    generic plan's emulated result added: (fast result, generic result, CPU result, plan, write
    counts of the written tensor and of the workspace's argmax bytes); None when no fast rule
    applies."""
    from infiniop_py.testing.data import gather

    spec = get_spec(op)
    info = _geometry(op, case, dtype)
    names = [r.name for r in spec.tensors]
    fp = pc.fast_plan(info.geom, info[names[0]], [info[r] for r in names[1:]], MODES[op])
    if fp is None:
        return None
    shape, strides, _ = case.tensors[names[0]].resolved(dtype)
    results = []
    for fast in (True, False):
        _, data, bufs = _buffers(op, case)
        if fast:
            emu = _FastEmu(fp, bufs, np.full(max(fp.workspace, 1), np.nan))
            emu.run()
            results.append(gather(emu.writes[id(bufs[0])].astype(np.float64), shape, strides))
            ws_writes = emu.writes[id(emu.ws)]
        else:
            _Emu(pc.plan(info.geom, info[names[0]], [info[r] for r in names[1:]], MODES[op], threads=H100_THREADS), bufs).run()
        results.append(gather(bufs[0], shape, strides))
    expected = np.empty(shape)
    spec.cpu(_geometry(op, case))({names[0]: expected, **data}, None, {})
    return results[1], results[2], expected, fp, results[0], ws_writes


def _fast_problems():
    """Problems for every fast rule and layout: odd sizes (partial column chunks, partial row
    blocks), ceil_mode windows past L, rows not 16-byte aligned (padded rows), channel counts not
    a multiple of V, ties, NaN and -inf windows."""
    from infiniop_py.testing.pool_cases import infs, nans, ties

    out = []
    for k, s, p in pc.FAST_RULES:
        for shape, kind, ceil, data in (
            ((2, 3, 9, 11), "contiguous", False, None),
            ((1, 2, 10, 12), "contiguous", True, None),
            ((1, 2, 7, 37), "padded", False, ties),
            ((2, 2, 6, 5), "contiguous", True, nans),
            ((2, 24, 5, 7), "channels_last", False, None),
            ((1, 20, 6, 5), "channels_last", True, nans),
            ((1, 12, 7, 6), "channels_last", False, infs),
            ((1, 5, 9, 10), "channels_last", False, ties),
            ((1, 2, 9, 17), "contiguous", False, infs),
        ):
            out.append(pytest.param((k, s, p), shape, kind, ceil, data, id=f"k{k}s{s}p{p}-{kind}-{'x'.join(map(str, shape))}"))
    return out


@pytest.mark.parametrize("rule,shape,kind,ceil,data", _fast_problems())
@pytest.mark.parametrize("dtype", [DType.F16, DType.F32, DType.F64], ids=lambda d: d.name)
@pytest.mark.parametrize("op", POOL_OPS)
def test_fast_path_emulated(op, dtype, rule, shape, kind, ceil, data):
    """The fast path takes these problems; every written element is written exactly once, the
    values match the CPU backend and are bitwise those of the generic kernels' arithmetic;
    max_pool_backward writes each window's argmax byte exactly once (and only those bytes of its
    workspace)."""
    from infiniop_py.testing.cases import Case
    from infiniop_py.testing.pool_cases import A, tensors

    k, s, p = rule
    attrs = A([k], [s], [p], ceil=ceil)
    if data is not None and not op.startswith("max"):
        data = None
    case = Case(tensors(op, shape, attrs, kind), (dtype,), attrs=attrs, data=data)
    res = _emulate_fast(op, case, dtype)
    assert res is not None, "no fast path"
    got, generic, expected, fp, writes, ws_writes = res
    assert fp.layout == ("cl" if kind == "channels_last" else "rows")
    assert {st.V for st in fp.stages} == {16 // (2 if dtype is DType.F16 else 4 if dtype is DType.F32 else 8)}
    assert np.all(writes == 1), np.unique(writes)
    assert np.array_equal(got.view(np.uint64), generic.view(np.uint64))
    assert np.allclose(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    if op == "max_pool_backward":
        n_, c_, oh, ow = out_shape(shape, attrs)
        V = fp.stages[0].V
        assert fp.workspace >= n_ * fp.idx_strides[0] and fp.idx_strides[3 if fp.layout == "rows" else 1] == 1
        assert fp.idx_strides[2 if fp.layout == "rows" else 3] % V == 0
        assert ws_writes.sum() == n_ * c_ * oh * ow and ws_writes.max() == 1
    else:
        assert fp.workspace == 0 and len(fp.stages) == 1


@pytest.mark.parametrize("op", POOL_OPS)
def test_fast_rules(op):
    """Which problems take a fast path: 2-d, a listed square window, every tensor W-innermost or
    every one C-innermost."""
    k3 = {"kernel_size": [3], "stride": [2], "padding": [1]}
    f32 = DType.F32

    def fast(shape, attrs, kind="contiguous"):
        return _plan_for(op, shape, attrs, kind, f32, fast=True)

    assert fast((2, 3, 8, 8), k3).layout == "rows" and fast((2, 3, 8, 8), k3, "channels_last").layout == "cl"
    assert fast((2, 3, 8, 8), k3, "padded").layout == "rows"
    assert fast((2, 3, 8, 8), {"kernel_size": [2]}).rule == (2, 2, 0)
    assert fast((2, 3, 8, 8), {"kernel_size": [3], "stride": [2], "padding": [0]}) is None
    assert fast((2, 3, 8, 8), {"kernel_size": [3, 2], "stride": [2], "padding": [1, 0]}) is None
    assert fast((2, 3, 8), k3) is None and fast((2, 3, 8, 8, 8), k3) is None
    assert fast((2, 3, 8, 8), k3, "mixed") is None and fast((2, 3, 8, 8), k3, "permuted") is None
    assert fast((2, 3, 8, 1), {"kernel_size": [1]}) is None
    # W of size 1 with C innermost: channels-last
    assert fast((2, 3, 8, 2), {"kernel_size": [2]}, "channels_last").layout == "cl"


def _plan_for(op, shape, attrs, kind="contiguous", dtype=DType.F32, fast=False):
    from infiniop_py.testing.cases import Case
    from infiniop_py.testing.pool_cases import tensors

    info = _geometry(op, Case(tensors(op, shape, attrs, kind), (dtype,), attrs=attrs), dtype)
    names = [r.name for r in get_spec(op).tensors]
    if fast:
        return pc.fast_plan(info.geom, info[names[0]], [info[n] for n in names[1:]], MODES[op])
    return pc.plan(info.geom, info[names[0]], [info[n] for n in names[1:]], MODES[op], threads=H100_THREADS)


def test_plan_target_shapes():
    """The benchmark shapes: NCHW iterates along W with one lane per tile; channels-last takes
    32 channels per tile; the tiled max backward's halo fits; little waste in every plan."""
    k3 = {"kernel_size": [3], "stride": [2], "padding": [1]}
    k2 = {"kernel_size": [2], "stride": [2]}
    for op, attrs in (("max_pool", k3), ("max_pool_backward", k3), ("avg_pool", k2), ("avg_pool_backward", k2)):
        for kind in ("contiguous", "channels_last"):
            p = _plan_for(op, (32, 64, 112, 112), attrs, kind)
            assert p.TL == (32 if kind == "channels_last" else 1), (op, kind)
            assert p.mode == MODES[op] and p.smem <= pc.SMEM_LIMIT
            m = pc.PoolMetaC.from_buffer_copy(p.meta)
            ext = 112 if op in BWD else 56
            useful = 32 * 64 * ext * ext / p.V
            assert p.ntiles * -(-m.items // p.block) * p.block <= 1.08 * useful, (op, kind, p.T, p.block)
            if kind == "contiguous":
                assert p.T[2] >= pc.MIN_ROW


def test_plan_large_halo_falls_back():
    p = _plan_for("max_pool_backward", (1, 2, 40, 40, 40), {"kernel_size": [40], "stride": [1], "padding": [20]})
    assert p.mode == pc.MAX_BWD_GATHER and p.smem == 0


def test_choose_tile_prefers_parallelism_for_small_problems():
    """A problem too small to fill the GPU gets tiles that one block pass finishes, and many of
    them, rather than a few long tiles."""
    p = _plan_for("max_pool", (1, 1, 1024, 1024), {"kernel_size": [2]})
    m = pc.PoolMetaC.from_buffer_copy(p.meta)
    assert m.items <= p.block and p.ntiles >= 128
    assert pc._extent_choices(112) == [1, 2, 4, 8, 16, 28, 56, 112]
    assert pc.block_for(784) == (160, 800) and pc.block_for(2048) == (512, 2048)


def test_meta_layout_matches_the_kernel():
    """pool.cu and pool_fast.cu pin sizeof(PoolMeta) / sizeof(PoolFastMeta) with static_asserts
    (checked by the NVRTC compile check); the ctypes mirrors must agree, field offsets included
    (natural alignment, as in C)."""
    import ctypes

    assert "sizeof(PoolMeta) == 408" in pc.SOURCE and ctypes.sizeof(pc.PoolMetaC) == 408
    for field, off in (("L", 120), ("TL", 216), ("dTL", 248), ("ds", 368)):
        assert getattr(pc.PoolMetaC, field).offset == off
    assert "sizeof(PoolFastMeta) == 160" in pc.FAST_SOURCE and ctypes.sizeof(pc.PoolFastMetaC) == 160
    for field, off in (("H", 96), ("items", 116), ("d", 120), ("pad_", 156)):
        assert getattr(pc.PoolFastMetaC, field).offset == off
    for name, value in (("PF_BLOCK", pc.FAST_BLOCK), ("PF_FH", pc.FAST_FH), ("PF_FW", pc.FAST_FW)):
        assert f"#define {name} {value} " in pc.FAST_SOURCE


def test_compile_units_list_every_plannable_kernel():
    for op in POOL_OPS:
        units = get_spec(op).nvidia.compile_units()
        assert [src for src, _ in units] == [pc.SOURCE, pc.FAST_SOURCE]
        modes = (pc.MAX_BWD_TILED, pc.MAX_BWD_GATHER) if op == "max_pool_backward" else (MODES[op],)
        assert set(units[0][1]) == {pc.kernel_name(m, dt) for m in modes for dt in get_spec(op).dtypes}
        stages = {
            "max_pool": ((0, 0),),
            "avg_pool": ((0, 1),),
            "avg_pool_backward": ((1, 1),),
            "max_pool_backward": ((0, 2), (1, 2)),
        }
        fast = {
            pc.fast_kernel_name(lay + ("_backward" if bwd else ""), mode, rule, dt)
            for rule in pc.FAST_RULES
            for lay in (pc.ROWS, pc.CL)
            for bwd, mode in stages[op]
            for dt in get_spec(op).dtypes
        }
        assert set(units[1][1]) == fast and len(units[1][1]) == len(fast)
