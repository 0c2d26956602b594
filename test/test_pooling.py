"""Pooling operators (avg_pool, avg_pool_backward, max_pool, max_pool_backward; ops.md §6.4-6.8):
create-time validation, the NVIDIA launch plan (checked on the CPU by running the kernels'
index arithmetic in Python), upstream-style GGUF files, and GPU-only checks (determinism, the
gather fallback, layouts). The case tables themselves run in test_ops.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import requires_gpu

import infiniop_py as iop
from infiniop_py.descriptor import create_descriptor
from infiniop_py.dtypes import DType
from infiniop_py.pool import cuda as pc
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.status import InfiniopError, Status
from infiniop_py.tensor import TensorDescriptor
from infiniop_py.testing.pool_cases import out_shape, strides_for

H100_THREADS = 132 * 2048  # the fake device of the CPU-side planner tests: 132 SMs of 2048 threads
FWD = ("avg_pool", "max_pool")
BWD = ("avg_pool_backward", "max_pool_backward")
POOL_OPS = FWD + BWD


def td(shape, strides=None, dtype=DType.F32):
    return TensorDescriptor(tuple(shape), strides, dtype)


def descs(op, shape, attrs, dtype=DType.F32, out=None):
    """Tensor descriptors for ``op`` on an input of ``shape`` (contiguous); ``out`` overrides the
    output / grad_output shape."""
    o = out if out is not None else out_shape(shape, {"padding": 0, **attrs})
    if op in FWD:
        return {"output": td(o, dtype=dtype), "input": td(shape, dtype=dtype)}
    return {"grad_input": td(shape, dtype=dtype), "grad_output": td(o, dtype=dtype), "input": td(shape, dtype=dtype)}


def create(op, tensors, device="cpu", **attrs):
    return create_descriptor(op, iop.create_handle(device), **tensors, **attrs)


# -- validation -------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize(
    "attrs,status,word",
    [
        ({"kernel_size": [0]}, Status.BAD_PARAM, "kernel_size"),
        ({"kernel_size": [2, 2, 2]}, Status.BAD_PARAM, "kernel_size"),
        ({"kernel_size": [2], "stride": [0]}, Status.BAD_PARAM, "stride"),
        ({"kernel_size": [2], "stride": [1, 1, 1]}, Status.BAD_PARAM, "stride"),
        ({"kernel_size": [2], "padding": [-1]}, Status.BAD_PARAM, "padding"),
        ({"kernel_size": [3], "padding": [2]}, Status.BAD_PARAM, "padding"),
        ({"kernel_size": [3], "padding": [1, 1, 1]}, Status.BAD_PARAM, "padding"),
        ({"kernel_size": "3"}, Status.BAD_PARAM, "kernel_size"),
        ({"kernel_size": [3], "ceil_mode": 2}, Status.BAD_PARAM, "ceil_mode"),
    ],
)
def test_bad_attributes(op, attrs, status, word):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}), **attrs)
    assert e.value.status == status and word in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
def test_kernel_size_required(op):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}))
    assert e.value.status == Status.BAD_PARAM and "kernel_size" in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("shape", [(3, 8), (1, 2, 3, 4, 5, 6), (8,)])
def test_rank_outside_3_to_5(op, shape):
    t = (
        {n: td(shape) for n in ("output", "input")}
        if op in FWD
        else {n: td(shape) for n in ("grad_input", "grad_output", "input")}
    )
    with pytest.raises(InfiniopError) as e:
        create(op, t, kernel_size=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE


@pytest.mark.parametrize("op", POOL_OPS)
def test_kernel_larger_than_padded_input(op):
    """Output size < 1 (ops.md §6.4: the shape cannot match): BAD_TENSOR_SHAPE."""
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 4, 4), {}, out=(2, 3, 1, 1)), kernel_size=[7], padding=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE and "larger than the padded input" in str(e.value)
    # the same window fits once the padding makes room: L + 2p = 4 + 2*3 >= 7
    create(op, descs(op, (2, 3, 4, 4), {}, out=(2, 3, 4, 4)), kernel_size=[7], stride=[1], padding=[3]).destroy()


@pytest.mark.parametrize("op", POOL_OPS)
def test_empty_spatial_dim(op):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 0, 4), {}, out=(2, 3, 1, 2)), kernel_size=[2], padding=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE and "empty" in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("delta", [(0, 0, 1, 0), (0, 0, 0, -1), (0, 1, 0, 0), (1, 0, 0, 0)])
def test_output_shape_mismatch(op, delta):
    good = out_shape((2, 3, 9, 9), {"kernel_size": [3], "stride": [2], "padding": [1]})
    bad = tuple(a + b for a, b in zip(good, delta))
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 9, 9), {}, out=bad), kernel_size=[3], stride=[2], padding=[1])
    assert e.value.status == Status.BAD_TENSOR_SHAPE


@pytest.mark.parametrize("op", BWD)
def test_grad_input_shape_mismatch(op):
    t = descs(op, (2, 3, 8, 8), {"kernel_size": [2]})
    t["grad_input"] = td((2, 3, 8, 9))
    with pytest.raises(InfiniopError) as e:
        create(op, t, kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_SHAPE and "grad_input" in str(e.value)


@pytest.mark.parametrize("op", POOL_OPS)
def test_ceil_mode_changes_the_required_shape(op):
    # L=5, k2 s2 p1: floor -> 3; ceil -> 4 - 1 (the 4th window would start in the right padding) = 3
    # L=6, k2 s2 p0: floor -> 3; ceil -> 3; L=7 k2 s2: floor 3, ceil 4
    create(op, descs(op, (1, 1, 7), {}, out=(1, 1, 4)), kernel_size=[2], ceil_mode=True).destroy()
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (1, 1, 7), {}, out=(1, 1, 4)), kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_SHAPE
    create(op, descs(op, (1, 1, 5), {}, out=(1, 1, 3)), kernel_size=[2], padding=[1], ceil_mode=True).destroy()


@pytest.mark.parametrize("op", POOL_OPS)
def test_mixed_dtypes(op):
    for name in descs(op, (2, 3, 8, 8), {"kernel_size": [2]}):
        t = descs(op, (2, 3, 8, 8), {"kernel_size": [2]})
        t[name] = td(t[name].shape, dtype=DType.F16)
        with pytest.raises(InfiniopError) as e:
            create(op, t, kernel_size=[2])
        assert e.value.status == Status.BAD_TENSOR_DTYPE, name


@pytest.mark.parametrize("op", POOL_OPS)
def test_integer_dtype_refused(op):
    with pytest.raises(InfiniopError) as e:
        create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}, DType.I32), kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_DTYPE


@pytest.mark.parametrize("op", POOL_OPS)
def test_output_not_writable(op):
    t = descs(op, (2, 3, 8, 8), {"kernel_size": [2]})
    name = "output" if op in FWD else "grad_input"
    shape = t[name].shape
    t[name] = td(shape, (0,) + tuple(strides_for(shape, range(4))[1:]))
    with pytest.raises(InfiniopError) as e:
        create(op, t, kernel_size=[2])
    assert e.value.status == Status.BAD_TENSOR_STRIDES


@pytest.mark.parametrize("op", POOL_OPS)
def test_stride_none_or_empty_is_kernel_size(op):
    for stride in (None, [], ()):
        d = create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}), kernel_size=[2], stride=stride)
        d.destroy()


@pytest.mark.parametrize("op", FWD)
def test_failed_calculate_writes_nothing(op):
    """A buffer too small for its descriptor fails before anything is written."""
    d = create(op, descs(op, (2, 3, 8, 8), {"kernel_size": [2]}), kernel_size=[2])
    out = np.full((2, 3, 4, 4), 7.0, np.float32)
    with pytest.raises(InfiniopError) as e:
        d.calculate(None, out, np.zeros(10, np.float32))
    assert e.value.status == Status.BAD_PARAM and np.all(out == 7.0)
    d.destroy()


def test_cstyle_names_and_upstream_order():
    """infiniopCreateAvgPoolDescriptor(handle, desc, output, input, kernel_size, strides, pads, ceil_mode)."""
    h = iop.create_handle("cpu")
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)
    y = np.zeros((2, 3, 3, 3), np.float32)
    d = iop.infiniopCreateAvgPoolDescriptor(h, td(y.shape), td(x.shape), [2, 2], [2, 2], [0, 0], False)
    assert iop.infiniopGetAvgPoolWorkspaceSize(d) == 0
    iop.infiniopAvgPool(d, None, 0, y, x, None)
    iop.infiniopDestroyAvgPoolDescriptor(d)
    assert np.allclose(y, x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)))
    for stem in ("AvgPoolBackward", "MaxPool", "MaxPoolBackward"):
        assert callable(getattr(iop, f"infiniopCreate{stem}Descriptor"))


def test_iop_ops_infers_the_output():
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 10)).astype(np.float32)
    y = iop.ops.max_pool(x, kernel_size=(3,), stride=(2,), padding=(1,))
    import torch

    assert np.array_equal(y, torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())
    g = iop.ops.max_pool_backward(np.ones_like(y), x, kernel_size=(3,), stride=(2,), padding=(1,))
    assert g.shape == x.shape and g.sum() == y.size


@pytest.mark.parametrize("op", POOL_OPS)
def test_cpu_backward_is_deterministic_and_overwrites(op):
    """Two calls into outputs full of different junk give the same bits."""
    rng = np.random.default_rng(1)
    t = descs(op, (2, 3, 9, 9), {"kernel_size": [3], "stride": [2], "padding": [1]})
    d = create(op, t, kernel_size=[3], stride=[2], padding=[1])
    ins = {n: rng.standard_normal(t[n].shape).astype(np.float32) for n in t if not get_spec(op).role[n].is_output}
    results = []
    for fill in (np.nan, 5.0):
        outs = {r.name: np.full(t[r.name].shape, fill, np.float32) for r in get_spec(op).outputs}
        d.calculate(None, *(outs.get(r.name, ins.get(r.name)) for r in get_spec(op).tensors))
        results.append(next(iter(outs.values())))
    assert np.array_equal(results[0], results[1], equal_nan=False)
    d.destroy()


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


MODES = {"max_pool": pc.MAX_FWD, "avg_pool": pc.AVG_FWD, "avg_pool_backward": pc.AVG_BWD, "max_pool_backward": pc.MAX_BWD_TILED}


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


# -- GPU ----------------------------------------------------------------------------------------------
def _gpu_run(op, case, dtype, seed=0):
    from infiniop_py.testing.run import run_case

    result = run_case(op, case, dtype, "nvidia", seed=seed)
    assert result.ok, "; ".join(result.messages)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [DType.F32, DType.F16], ids=lambda d: d.name)
def test_gpu_gather_fallback_matches_tiled(monkeypatch, dtype):
    """MODE 4 (no shared memory) and MODE 3 give the same bits."""
    import cupy as cp

    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (2, 5, 9, 11)).astype(np.float32)
    go = rng.standard_normal((2, 5, 5, 6)).astype(np.float32)
    npd = np.float16 if dtype is DType.F16 else np.float32
    outs = []
    monkeypatch.setattr(pc, "FAST_RULES", ())
    for limit in (pc.SMEM_LIMIT, 0):
        monkeypatch.setattr(pc, "SMEM_LIMIT", limit)
        t = {"grad_input": td(x.shape, dtype=dtype), "grad_output": td(go.shape, dtype=dtype), "input": td(x.shape, dtype=dtype)}
        d = create("max_pool_backward", t, "nvidia", kernel_size=[3], stride=[2], padding=[1])
        assert d._kernel.plan.mode == (pc.MAX_BWD_TILED if limit else pc.MAX_BWD_GATHER)
        gi = cp.full(x.shape, np.nan, npd)
        d.calculate(None, gi, cp.asarray(go.astype(npd)), cp.asarray(x.astype(npd)))
        outs.append(cp.asnumpy(gi))
        d.destroy()
    bits = np.uint16 if dtype is DType.F16 else np.uint32
    assert np.array_equal(outs[0].view(bits), outs[1].view(bits))


def _gpu_fast_and_generic(op, shape, attrs, kind, odd, dtype, data, monkeypatch):
    """(fast path result, generic result) on the GPU for one problem, as raw bits; ``odd`` puts
    every tensor one element past a 16-byte boundary."""
    import cupy as cp

    from infiniop_py.dtypes import to_numpy
    from infiniop_py.testing.pool_cases import tensors as pool_tensors

    names = [r.name for r in get_spec(op).tensors]
    tensors = {n: td(*tc.resolved(dtype)[:2], dtype) for n, tc in pool_tensors(op, shape, attrs, kind).items()}
    bits = f"u{np.dtype(to_numpy(dtype)).itemsize}"
    bufs = {}
    for n, t in tensors.items():
        size = sum((d - 1) * st for d, st in zip(t.shape, t.strides)) + 2
        flat = cp.asarray(data(n, size).astype(to_numpy(dtype)).view(bits))
        bufs[n] = flat[1:] if odd else flat
    outs = []
    for rules in (pc.FAST_RULES, ()):
        monkeypatch.setattr(pc, "FAST_RULES", rules)
        d = create(op, tensors, "nvidia", **attrs)
        assert isinstance(d._kernel.plan, pc.FastPlan) == bool(rules), (op, shape, kind)
        bufs[names[0]].fill(0x7FFF)
        ws = cp.empty(d.workspace_size, np.uint8) if d.workspace_size else None
        d.calculate(ws, *(bufs[n] for n in names))
        outs.append(cp.asnumpy(bufs[names[0]]))
        d.destroy()
    return outs


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("dtype", [DType.F32, DType.F16, DType.BF16, DType.F64], ids=lambda d: d.name)
def test_gpu_fast_path_matches_generic(op, dtype, monkeypatch):
    """The fast kernels give the generic kernels' bits on every rule and layout: odd sizes, ceil
    mode, rows and pixels not 16-byte aligned (padded rows, a base one element off), channel
    counts not a multiple of V, ties, NaN and -inf."""
    rng = np.random.default_rng(5)

    def data(name, size):
        x = rng.integers(-3, 4, size).astype(np.float64) if name == "input" else rng.standard_normal(size)
        u = rng.random(size)
        if name == "input" and op.startswith("max"):
            x[u < 0.05] = np.nan
            x[(u >= 0.05) & (u < 0.15)] = -np.inf
        return x

    for k, s, p in pc.FAST_RULES:
        for shape, kind, odd, ceil in (
            ((2, 3, 33, 50), "contiguous", False, False),
            ((2, 3, 31, 47), "contiguous", False, True),
            ((2, 3, 20, 41), "padded", False, False),
            ((2, 3, 20, 64), "contiguous", True, False),
            ((2, 40, 9, 11), "channels_last", False, True),
            ((2, 36, 8, 10), "channels_last", True, False),
        ):
            attrs = {"kernel_size": [k], "stride": [s], "padding": [p], "ceil_mode": ceil}
            fast, generic = _gpu_fast_and_generic(op, shape, attrs, kind, odd, dtype, data, monkeypatch)
            assert np.array_equal(fast, generic), (k, s, p, shape, kind, odd, ceil)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", POOL_OPS)
def test_gpu_bitwise_deterministic(op):
    """Two calls with the same inputs give the same bits (overlapping windows, ties)."""
    import cupy as cp

    rng = np.random.default_rng(2)
    t = descs(op, (4, 16, 33, 35), {"kernel_size": [3], "stride": [1], "padding": [1]})
    d = create(op, t, "nvidia", kernel_size=[3], stride=[1], padding=[1])
    ins = {
        n: cp.asarray(rng.integers(-3, 4, t[n].shape).astype(np.float32) * 0.37) for n in t if not get_spec(op).role[n].is_output
    }
    res = []
    for _ in range(2):
        outs = {r.name: cp.full(t[r.name].shape, np.nan, np.float32) for r in get_spec(op).outputs}
        ws = cp.empty(d.workspace_size, np.uint8) if d.workspace_size else None
        d.calculate(ws, *(outs.get(r.name, ins.get(r.name)) for r in get_spec(op).tensors))
        res.append(cp.asnumpy(next(iter(outs.values()))))
    assert np.array_equal(res[0].view(np.uint32), res[1].view(np.uint32))
    d.destroy()


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", POOL_OPS)
@pytest.mark.parametrize("kind", ["contiguous", "channels_last"])
def test_gpu_target_shape_layouts(op, kind):
    """The benchmark problem at batch 2 (k3 s2 p1 for max, k2 s2 for avg), NCHW and channels-last."""
    from infiniop_py.testing.cases import Case
    from infiniop_py.testing.pool_cases import tensors as pool_tensors

    attrs = {"kernel_size": [3], "stride": [2], "padding": [1]} if op.startswith("max") else {"kernel_size": [2], "stride": [2]}
    tensors = pool_tensors(op, (2, 64, 112, 112), attrs, kind)
    for dtype in (DType.F32, DType.BF16):
        _gpu_run(op, Case(tensors, (dtype,), attrs=attrs), dtype)


# -- upstream-style GGUF files ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["averagepool", "averagepool_backward", "maxpool", "maxpool_backward"])
def test_upstream_pool_files(tmp_path, name):
    """Files laid out as upstream's pooling generators write them (test/upstream_fixtures.py) bind
    in the named-output style (stride absent -> None, dtype from the primary input, length-1
    attribute arrays) and pass on the CPU."""
    import upstream_fixtures as up

    from infiniop_py import cli
    from infiniop_py.gguf import GGUFFile, load_test

    path = str(tmp_path / f"{name}.gguf")
    up.FIXTURES[name](path, np.random.default_rng(0))
    with GGUFFile(path) as f:
        tests = [load_test(f, i) for i in range(f.test_count)]
    op = {"averagepool": "avg_pool", "maxpool": "max_pool"}.get(name.split("_")[0]) + ("_backward" if "backward" in name else "")
    assert {t.spec.name for t in tests} == {op} and {t.style for t in tests} == {"named"}
    out = "output" if "backward" not in name else "grad_input"
    first = "input" if "backward" not in name else "grad_output"
    assert all(t.tensors[out].dtype is t.tensors[first].dtype for t in tests)
    assert {t.tensors[out].dtype for t in tests} == {DType.F32, DType.F16}
    assert tests[2].attrs["stride"] is None and tests[2].attrs["kernel_size"] == (3,)
    assert tests[1].attrs["ceil_mode"] is True and tests[0].attrs["padding"] == (0,)
    assert cli.main([path, "--cpu", "--quiet"]) == 0


def _fake_gpu_plans() -> dict:
    """Creates every case of the four ops on a faked sm_90 device with 132 SMs (no GPU: NVRTC
    and launches replaced), launches each kernel object once with fake pointers, and returns
    {case: [kernel name, grid, block, shared memory, workspace, kernel names outside
    compile_units()]}. Runs in a subprocess: it patches the CUDA runtime module-wide."""
    from infiniop_py.cuda import compiler, runtime

    class Fn:
        num_regs, shared_size_bytes = 64, 0

    requested: list = []

    def record(self, source, names, device_id):
        requested.extend(names)
        self.raw, self.kernels = None, {n: Fn() for n in names}
        self.ptr = {n: i + 1 for i, n in enumerate(names)}

    launches: list = []
    runtime.device_count = lambda: 1
    runtime.properties = lambda device_id=0: {"name": "sm_90", "sm_count": 132, "cc": 90, "max_shared_per_block_optin": 232448}
    compiler.Module.__init__ = record
    compiler._launch_fn = lambda: (
        lambda fn, gx, gy, gz, bx, by, bz, shmem, stream, params, extra: launches.append((fn, gx, bx, shmem))
    )
    handle = iop.create_handle("nvidia")
    out = {}
    for op in POOL_OPS:
        allowed = {n for _, ns in get_spec(op).nvidia.compile_units() for n in ns}
        for i, case in enumerate(get_cases(op)):
            for dt in case.dtypes:
                tensors = {
                    n: iop.create_tensor_descriptor(*tc.resolved(dt)[:2], tc.resolved(dt)[2]) for n, tc in case.tensors.items()
                }
                requested.clear()
                launches.clear()
                d = iop.create_descriptor(op, handle, **tensors, **case.attrs)
                d._kernel.launch([1000, 2000, 3000][: len(case.tensors)], 4000, {}, 0)
                names = sorted(set(requested) - allowed)
                fast = isinstance(getattr(d._kernel, "plan", None), pc.FastPlan)
                items = [st.items for st in d._kernel.plan.stages] if fast else []
                ptrs = [list(launch.values) for launch in d._kernel.launches]
                out[f"{op}-{i}-{dt.name}"] = [
                    list(launches),
                    d.workspace_size,
                    names,
                    getattr(d._kernel, "name", ""),
                    items,
                    ptrs,
                ]
                d.destroy()
    return out


def test_nvidia_factories_on_a_fake_device():
    """The NVIDIA backend's Python side on every case: a plan and its launches (none for empty
    tensors) with the tensor and workspace pointers in the kernels' order; generic plans: one
    launch of a planned block size (128-512 threads) and shared memory, workspace 0; fast plans:
    one launch per stage (max_pool_backward: the argmax bytes into the workspace, then the gather
    reading them), workspace only for those bytes; only kernels that compile_units() lists (so the
    NVRTC compile check covers them)."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = "import json, sys; sys.path.insert(0, 'test'); from test_pooling import _fake_gpu_plans; print(json.dumps(_fake_gpu_plans()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(result) == sum(len(c.dtypes) for op in POOL_OPS for c in get_cases(op))
    nfast = 0
    for key, (launches, ws, extra, name, items, ptrs) in result.items():
        op, index, _ = key.rsplit("-", 2)
        case = get_cases(op)[int(index)]
        empty = any(0 in tc.shape for tc in case.tensors.values())
        assert not extra, key
        if empty:
            assert not launches and ws == 0, key
            continue
        if name.startswith("pool_fast_"):
            nfast += 1
            assert [grid for _, grid, _, _ in launches] == [-(-n // pc.FAST_BLOCK) for n in items], key
            assert all(block == pc.FAST_BLOCK and shmem == 0 for _, _, block, shmem in launches), key
            if op == "max_pool_backward":
                assert ws > 0 and ptrs == [[4000, 3000], [1000, 2000, 4000]], key
            else:
                assert ws == 0 and ptrs == [[1000, 2000, 3000][: len(case.tensors)]], key
            continue
        assert ws == 0 and len(launches) == 1, key
        ((_fn, grid, block, shmem),) = launches
        assert block in pc.BLOCKS and 1 <= grid <= 132 * (2048 // block) * 2 and shmem <= pc.SMEM_LIMIT, key
        assert (shmem > 0) == name.startswith("pool_max_backward_tiled"), key
    assert nfast >= len(result) // 4


def _device_problems():
    """(op, descriptors, attributes) of every case of the four tables (f16, f32) and a sweep of
    sizes, windows and layouts."""
    for op in POOL_OPS:
        for case in get_cases(op):
            for dt in set(case.dtypes) & {DType.F16, DType.F32}:
                yield op, {n: td(*tc.resolved(dt)) for n, tc in case.tensors.items()}, case.attrs
    windows = ({"kernel_size": [2], "stride": [2]}, {"kernel_size": [3], "stride": [2], "padding": [1]})
    windows += ({"kernel_size": [3], "stride": [1], "padding": [1]}, {"kernel_size": [5], "stride": [3], "padding": [2]})
    for op, n, c, size, attrs, last in itertools.product(POOL_OPS, (1, 8, 32), (3, 64, 256), (7, 30, 112), windows, (0, 1)):
        shape = (n, c, size, size)
        d = descs(op, shape, attrs)
        if last:  # channels-last: C innermost in every tensor
            d = {
                k: td(v.shape, (v.shape[1] * v.shape[2] * v.shape[3], 1, v.shape[3] * v.shape[1], v.shape[1]))
                for k, v in d.items()
            }
        yield op, d, attrs


def test_plans_on_132_sms_are_the_h100_constants():
    """Tile sizes and grids come from the device's properties: with 132 SMs (threads per SM
    reported as 2048, or not reported) every generic plan and grid equal those of the H100
    figures they replace (132 x 2048 resident threads in the tile-size model, a grid of at most
    132 x (2048 // block) x 2 blocks), over the case tables and a sweep of sizes; with 66 SMs
    some plans differ."""
    from infiniop_py.testing.fake_device import fake_nvidia

    infos = {}

    def plans(props) -> dict:
        out = {}
        with fake_nvidia(**props):
            h = iop.create_handle("nvidia")
            for i, (op, d, attrs) in enumerate(_device_problems()):
                with create_descriptor(op, h, **d, **attrs) as desc:
                    k = desc._kernel
                    if isinstance(getattr(k, "plan", None), pc.Plan):
                        out[i] = (op, k.plan, k.launches[0].grid[0])
                        infos[i] = desc.info
        return out

    h100 = plans({})
    assert len(h100) > 500
    assert plans({"threads_per_sm": 2048}) == h100
    for i, (op, plan, grid) in h100.items():
        info = infos[i]
        names = [r.name for r in get_spec(op).tensors]
        want = pc.plan(info.geom, info[names[0]], [info[n] for n in names[1:]], MODES[op], threads=132 * 2048)
        assert plan == want, op
        assert grid == max(1, min(want.ntiles, 132 * (2048 // want.block) * 2)), op
    half = plans({"sm_count": 66})
    assert sum(half[i][1] != h100[i][1] for i in h100) > 0


# -- benchmark suite ----------------------------------------------------------------------------------
def test_bench_suite_lists_its_cases():
    """infiniop_py/bench/suites/pooling.py: on the GPU the benchmark shapes (max k3 s2 p1, avg k2
    s2, forward and backward, NCHW and channels-last, f32/f16/bf16); on the CPU a smaller NCHW set."""
    from types import SimpleNamespace

    from infiniop_py.bench.suites import pooling

    gpu = pooling.cases(SimpleNamespace(gpu=True))
    assert len(gpu) == 2 * 2 * 3 * 2 and {c.shape for c in gpu} == {(32, 64, 112, 112)}
    assert {c.op for c in gpu} == set(POOL_OPS) and {c.dtype for c in gpu} == {"f32", "f16", "bf16"}
    assert {c.case.split()[-1] for c in gpu} == {"NCHW", "channels-last"}
    assert {c.case for c in gpu if c.op.startswith("max")} >= {"32x64x112x112 k3 s2 p1 NCHW"}
    assert len(pooling.cases(SimpleNamespace(gpu=False))) == 12


def test_bench_suite_runs_on_the_cpu(tmp_path, monkeypatch):
    """The backward cases (the forward ones take the standard path) build, pass their float64
    and torch checks and are timed on the CPU; the bytes-moved metric counts what each must move."""
    import json

    pytest.importorskip("torch")
    from infiniop_py.bench import cli
    from infiniop_py.bench import env as bench_env

    monkeypatch.setattr(bench_env.CpuEnv, "copy_bandwidth", lambda self: {"GBps": 10.0, "how": "test"})
    monkeypatch.setattr(bench_env.CpuEnv, "matrix_rate", lambda self: {"f32": 0.1, "how": "test"})
    out = tmp_path / "run.json"
    args = ["--cpu", "--family", "pooling", "--quick", "--op", "max_pool_backward,avg_pool_backward", "--reps", "3"]
    args += ["--warmup", "1", "--host-calls", "5", "--no-progress", "--no-kernel"]
    assert cli.main(["run", *args, "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert sorted(row["op"] for row in rows) == sorted(BWD)
    assert all(row["check"]["ok"] and row["check_ref"]["ok"] for row in rows), rows
    backward = {row["op"]: row["bytes"] for row in rows if row["op"].endswith("backward")}
    assert backward["max_pool_backward"] == 2 * 4 * 16 * 56 * 56 * 4 + 4 * 16 * 28 * 28 * 4  # dx, x, dy
    assert backward["avg_pool_backward"] == 4 * 16 * 56 * 56 * 4 + 4 * 16 * 28 * 28 * 4  # dx, dy
