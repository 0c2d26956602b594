"""The index family's host-side plans of the table kernels, checked without a GPU: the launches a
descriptor would make are captured and replayed by a NumPy emulator of the CUDA code (index.cu),
element for element (grid-stride order does not matter: every destination has a single writer)."""

import numpy as np
import pytest

import infiniop_py as iop

F32, I64 = iop.DType.F32, iop.DType.I64


def td(shape, dtype=F32, strides=None):
    return iop.create_tensor_descriptor(shape, strides, dtype)


class _FakeModule:
    count = 1000

    def __init__(self, names):
        self.ptr = {}
        for n in names:
            _FakeModule.count += 1
            self.ptr[n] = _FakeModule.count


@pytest.fixture
def fake_gpu(monkeypatch):
    """Build NVIDIA kernels on a machine without a GPU; launches are recorded, not run."""
    import infiniop_py.registry as reg
    from infiniop_py.cuda import compiler, runtime

    reg.list_ops()
    from infiniop_py import index as common

    calls, names = [], {}

    def module(nm, device_id):
        m = _FakeModule(nm)
        names.update({v: k for k, v in m.ptr.items()})
        return m

    monkeypatch.setattr(common, "module", module)
    from infiniop_py.elementwise import copy as staging

    monkeypatch.setattr(staging, "Copy", lambda *a: lambda *b: None)  # elementwise copies need CuPy; emulated by hand
    monkeypatch.setattr(runtime, "properties", lambda dev: {"sm_count": 4, "cc": 90, "name": "fake"})
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    monkeypatch.setattr(compiler, "_launch_fn", lambda: None)
    monkeypatch.setattr(compiler.Launch, "__call__", lambda self, ptrs, ws, stream: calls.append((self, list(ptrs))))
    return common, calls, names


def _pointers(launch, ptrs):
    """The pointer arguments a launch would pass for ``ptrs`` (as Launch.__call__ fills them)."""
    return [ptrs[idx] + off for _, idx, off in launch.slots]


def _emulate_index_copy(common, launch, ptrs, name, bufs):
    import struct

    vec = int(name.rstrip(">").split(",")[-1])
    f = struct.unpack(common.TAB_FMT, bytes(launch.holders[0]))
    shape, s0, s1, s2 = f[0:8], f[8:16], f[16:24], f[24:32]
    dim_size, length, chunk, n, st0, st1, st2, sti = f[32:40]
    nd, axis, mode, _ = f[40:44]
    out, x, idx, src = (bufs[p] for p in _pointers(launch, ptrs))
    assert launch._cfg[6] == 4 * chunk <= 48 * 1024  # the kernel has no static shared memory
    for c in range(-(-dim_size // chunk)):
        k0 = c * chunk
        kn = min(chunk, dim_size - k0)
        win = np.full(kn, -1, np.int64)
        for j in range(length):
            k = int(idx[j * st1]) - k0
            if 0 <= k < kn:
                win[k] = max(win[k], j)
        ext = kn if mode == 0 else length
        ext_shape = [ext if d == axis else shape[d] for d in range(nd)]
        for t in range(n * ext):
            co = np.unravel_index(t, ext_shape)
            o0 = sum(int(co[d]) * s0[d] for d in range(nd) if d != axis)
            o1 = sum(int(co[d]) * s1[d] for d in range(nd) if d != axis)
            o2 = sum(int(co[d]) * s2[d] for d in range(nd) if d != axis)
            ca = int(co[axis])
            if mode == 0:
                k, w = k0 + ca, win[ca]
                val = src[o2 + w * st2 : o2 + w * st2 + vec].copy() if w >= 0 else x[o1 + k * sti : o1 + k * sti + vec].copy()
                out[o0 + k * st0 : o0 + k * st0 + vec] = val
            else:
                k = int(idx[ca * st1]) - k0
                if 0 <= k < kn and win[k] == ca:
                    out[o0 + (k0 + k) * st0 : o0 + (k0 + k) * st0 + vec] = src[o2 + ca * st2 : o2 + ca * st2 + vec]


def _last_writers(idx, o1, st1, length, dim_size):
    """For each destination position of a line, the last j in row-major order whose index
    names it (-1 where none does): replace's last-writer-wins table."""
    win = np.full(dim_size, -1)
    for j in range(length):
        k = int(idx[o1 + j * st1])
        if 0 <= k < dim_size:
            win[k] = j
    return win


def _emulate_scatter_table(common, launch, ptrs, bufs):
    import struct

    f = struct.unpack(common.TAB_FMT, bytes(launch.holders[0]))
    shape, s0, s1, s2 = f[0:8], f[8:16], f[16:24], f[24:32]
    dim_size, length, _, lines, st0, st1, st2, _ = f[32:40]
    nd, _, _, lpb = f[40:44]
    out, idx, upd = (bufs[p] for p in _pointers(launch, ptrs))
    assert launch._cfg[6] == 4 * lpb * dim_size and launch._cfg[6] + 3 * 32 * 8 <= 48 * 1024  # + static line offsets
    for line in range(lines):
        co = np.unravel_index(line, shape[:nd])
        o0, o1, o2 = (sum(int(co[d]) * s[d] for d in range(nd)) for s in (s0, s1, s2))
        win = _last_writers(idx, o1, st1, length, dim_size)
        for j in range(length):
            k = int(idx[o1 + j * st1])
            if 0 <= k < dim_size and win[k] == j:
                out[o0 + k * st0] = upd[o2 + j * st2]


def _strided(rng, shape, order=None, pad=0, dtype=np.float32, data=None):
    """A flat buffer and (strides) for ``shape`` with dims laid out in ``order`` (outer first) and ``pad`` extra per row."""
    order = list(range(len(shape))) if order is None else order
    strides = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d] + (pad if d == order[-1] else 0)
    buf = (rng.standard_normal(acc + 8) * 100).astype(dtype) if data is None else data(acc + 8)
    return buf, tuple(strides)


def _view(buf, shape, strides):
    return np.lib.stride_tricks.as_strided(buf, shape, [s * buf.itemsize for s in strides])


INDEX_COPY_LAYOUTS = [
    # (out shape, dim, len, order, pad, tmax)
    ((40, 24), 0, 50, None, 0, None),  # vectorised rows, duplicates
    ((40, 24), 1, 30, None, 0, None),  # axis innermost: scalar
    ((6, 10, 8), 1, 12, (2, 0, 1), 0, None),  # permuted layout
    ((5, 7, 9), 2, 11, None, 3, None),  # padded rows
    ((40, 16), 0, 50, None, 0, 7),  # several table chunks
    ((33, 5), -2, 3, None, 0, 4),  # short index: chunks > len -> scan path
]


@pytest.mark.parametrize("case", INDEX_COPY_LAYOUTS)
@pytest.mark.parametrize("op", ["index_copy", "index_copy_inplace", "index_copy_aliased"])
def test_index_copy_table_plan_emulated(fake_gpu, monkeypatch, case, op):
    common, calls, names = fake_gpu
    shape, dim, length, order, pad, tmax = case
    if tmax:
        monkeypatch.setattr(common, "TMAX", tmax)
    rng = np.random.default_rng(7)
    d = dim % len(shape)
    sshape = tuple(length if a == d else s for a, s in enumerate(shape))
    obuf, ost = _strided(rng, shape, order, pad)
    xbuf, xst = _strided(rng, shape, order, pad)
    sbuf, sst = _strided(rng, sshape, order, pad)
    ibuf = rng.integers(-2, shape[d] + 2, size=length).astype(np.int64)
    h = iop.create_handle("cpu")
    handle = type("H", (), {"device_id": 0})()
    bufs0 = {"out": obuf.copy()}
    ref_out = _view(bufs0["out"], shape, ost)
    if op == "index_copy":
        ref = _view(xbuf, shape, xst).copy()
        descs = [td(shape, strides=ost), td(shape, strides=xst), td((length,), I64), td(sshape, strides=sst)]
    else:
        ref = ref_out.copy()
        if op == "index_copy_inplace":
            descs = [td(shape, strides=ost), td(sshape, strides=sst), td((length,), I64)]
        else:
            descs = [td(shape, strides=ost), td(shape, strides=ost), td((length,), I64), td(sshape, strides=sst)]
    for i, k in enumerate(ibuf):
        if 0 <= k < shape[d]:
            np.moveaxis(ref, d, 0)[k] = np.moveaxis(_view(sbuf, sshape, sst), d, 0)[i]
    real = "index_copy_inplace" if op == "index_copy_inplace" else "index_copy"
    desc = iop.create_descriptor(real, h, *descs, dim=dim)
    spec = desc.spec
    kernel = spec.nvidia(desc.info, handle)
    addr = {"out": 1 << 20, "x": 2 << 20, "idx": 3 << 20, "src": 4 << 20}
    bufs = {addr["out"]: bufs0["out"], addr["x"]: xbuf, addr["idx"]: ibuf, addr["src"]: sbuf}
    if op == "index_copy":
        ptrs = [addr["out"], addr["x"], addr["idx"], addr["src"]]
    elif op == "index_copy_inplace":
        ptrs = [addr["out"], addr["src"], addr["idx"]]
    else:
        ptrs = [addr["out"], addr["out"], addr["idx"], addr["src"]]
    kernel.launch(ptrs, 0, (), 0)
    if not kernel.table:
        assert tmax == 4  # the scan path is only expected for the short-index case
        return
    assert len(calls) == 1
    launch, used = calls[0]
    name = names[launch.fn_ptr]
    assert name.startswith("index_copy_table_kernel")
    if case[0] == (40, 24) and d == 0:
        assert name.endswith(", 4>")  # 16-byte path taken
    _emulate_index_copy(common, launch, used, name, bufs)
    np.testing.assert_array_equal(_view(bufs0["out"], shape, ost), ref)


@pytest.mark.parametrize("case", [
    ((8, 300), 0, (200, 300), None),  # lines across the fast dim: lpb > 1
    ((6, 64), 1, (6, 64), None),  # axis innermost: lpb 1
    ((4, 5, 40), 2, (3, 5, 40), (1, 0, 2)),  # permuted, index covers 3 of 4 rows: copy + table
    ((4, 5, 40), 2, (4, 5, 40), (1, 0, 2)),  # permuted, full cover: line kernel
    ((40, 33), 0, (50, 33), None),  # lpb 32: a second group of one line
])  # fmt: skip
def test_scatter_table_plan_emulated(fake_gpu, case):
    common, calls, names = fake_gpu
    shape, axis, ishape, order = case
    rng = np.random.default_rng(8)
    obuf, ost = _strided(rng, shape, order)
    xbuf, xst = _strided(rng, shape, order)
    ubuf, ust = _strided(rng, ishape, order)
    ibuf, ist = _strided(
        rng, ishape, order, dtype=np.int64, data=lambda n: rng.integers(-1, shape[axis] + 1, size=n).astype(np.int64)
    )
    h = iop.create_handle("cpu")
    handle = type("H", (), {"device_id": 0})()
    desc = iop.create_descriptor(
        "scatter", h, td(shape, strides=ost), td(shape, strides=xst), td(ishape, I64, ist), td(ishape, strides=ust), axis=axis
    )
    kernel = desc.spec.nvidia(desc.info, handle)
    assert names[kernel.table.fn_ptr].startswith("scatter_table_kernel")
    ref = np.zeros(shape, np.float32)
    cpu = iop.create_descriptor("scatter", h, td(shape), td(shape), td(ishape, I64), td(ishape), axis=axis)
    cpu.calculate(None, ref, _view(xbuf, shape, xst).copy(), _view(ibuf, ishape, ist).copy(), _view(ubuf, ishape, ust).copy())
    # table kernel (in place, or out of place after the input -> output copy, emulated by hand)
    out = obuf.copy()
    _view(out, shape, ost)[...] = _view(xbuf, shape, xst)
    bufs = {1 << 20: out, 3 << 20: ibuf, 4 << 20: ubuf}
    kernel.table([1 << 20, 2 << 20, 3 << 20, 4 << 20], 0, 0)
    launch, used = calls[-1]
    _emulate_scatter_table(common, launch, used, bufs)
    np.testing.assert_array_equal(_view(out, shape, ost), ref)
    # line kernel (copy merged in): when the index covers every output line (same layouts here)
    if any(ishape[d] != shape[d] for d in range(len(shape)) if d != axis):
        assert kernel.line is None
        return
    assert kernel.line is not None and names[kernel.line.fn_ptr].startswith("scatter_line_kernel")
    n0 = len(calls)
    out = obuf.copy()
    bufs = {1 << 20: out, 2 << 20: xbuf, 3 << 20: ibuf, 4 << 20: ubuf}
    kernel.launch([1 << 20, 2 << 20, 3 << 20, 4 << 20], 0, (), 0)  # out of place: one launch, the line kernel
    assert len(calls) == n0 + 1 and calls[-1][0] is kernel.line
    _emulate_scatter_line(common, calls[-1][0], calls[-1][1], bufs)
    np.testing.assert_array_equal(_view(out, shape, ost), ref)
    kernel.launch([1 << 20, 1 << 20, 3 << 20, 4 << 20], 0, (), 0)  # in place: the table kernel alone
    assert len(calls) == n0 + 2 and calls[-1][0] is kernel.table


def _emulate_scatter_line(common, launch, ptrs, bufs):
    """scatter_line_kernel: whole output lines written from the last writers, else the input."""
    import struct

    from infiniop_ops.scatter import LINE_SMEM, line_smem

    f = struct.unpack(common.TAB_FMT, bytes(launch.holders[0]))
    shape, s0, s1, s2 = f[0:8], f[8:16], f[16:24], f[24:32]
    dim_size, length, _, lines, st0, st1, st2, sti = f[32:40]
    nd, _, _, lpb = f[40:44]
    assert sti == st0
    out, idx, upd, x = (bufs[p] for p in _pointers(launch, ptrs))
    assert launch._cfg[6] == line_smem(lpb, dim_size, 4) <= LINE_SMEM
    for line in range(lines):
        co = np.unravel_index(line, shape[:nd])
        o0, o1, o2 = (sum(int(co[d]) * s[d] for d in range(nd)) for s in (s0, s1, s2))
        win = _last_writers(idx, o1, st1, length, dim_size)
        for k in range(dim_size):
            out[o0 + k * st0] = upd[o2 + win[k] * st2] if win[k] >= 0 else x[o0 + k * st0]
