"""Bad input, determinism and GPU specifics of the GEMM and index & layout family.

Bad input must raise the right status at create, with a message naming the argument, and
never touch a buffer. Duplicate indices must give the same result on CPU and NVIDIA.
"""

import numpy as np
import pytest
from conftest import DEVICES, requires_gpu

import infiniop_py as iop
from infiniop_py import Status

F16, F32, I32, I64 = iop.DType.F16, iop.DType.F32, iop.DType.I32, iop.DType.I64


def td(shape, dtype=F32, strides=None):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def expect(status, op, *tensors, word=None, **kw):
    h = iop.create_handle("cpu")
    with pytest.raises(iop.InfiniopError) as e:
        iop.create_descriptor(op, h, *tensors, **kw)
    assert e.value.status == status, str(e.value)
    if word:
        assert word in str(e.value), str(e.value)


def test_gemm_bad_input():
    expect(Status.BAD_TENSOR_SHAPE, "gemm", td((4, 5)), td((4, 3)), td((2, 5)), word="inner")
    expect(Status.BAD_TENSOR_STRIDES, "gemm", td((4, 5)), td((4, 3), strides=(6, 2)), td((3, 5)), word="'a'")
    expect(Status.BAD_TENSOR_SHAPE, "gemm", td((3, 4, 5)), td((2, 4, 6)), td((3, 6, 5)), word="'a' batch")
    expect(Status.BAD_TENSOR_DTYPE, "gemm", td((4, 5)), td((4, 3), F16), td((3, 5)), word="'a'")
    expect(Status.BAD_TENSOR_SHAPE, "gemm", td((4,)), td((4, 3)), td((3, 5)), word="'c'")
    expect(Status.BAD_TENSOR_STRIDES, "gemm", td((3, 4, 5), strides=(0, 5, 1)), td((3, 4, 2)), td((3, 2, 5)), word="'c'")


def test_linear_bad_input():
    expect(Status.BAD_TENSOR_SHAPE, "linear", td((4, 5)), td((4, 3)), td((5, 4)), None, word="inner")
    expect(Status.BAD_TENSOR_SHAPE, "linear", td((4, 5)), td((4, 3)), td((5, 3)), td((4,)), word="'b'")
    expect(
        Status.BAD_TENSOR_SHAPE,
        "linear_backward",
        td((4, 3)),
        td((5, 3)),
        None,
        td((4, 6)),
        td((4, 3)),
        td((5, 3)),
        word="grad_y",
    )


def test_index_bad_input():
    expect(Status.BAD_TENSOR_DTYPE, "gather", td((2, 3)), td((4, 3)), td((2, 3), F32), dim=0, word="'index'")
    expect(Status.BAD_TENSOR_SHAPE, "gather", td((2, 3)), td((4, 3)), td((2, 3, 1), I64), dim=0, word="'index'")
    expect(Status.BAD_PARAM, "gather", td((2, 3)), td((4, 3)), td((2, 3), I64), dim=2, word="'dim'")
    expect(Status.BAD_TENSOR_SHAPE, "gather", td((2, 3)), td((4, 3)), td((2, 4), I64), dim=0, word="'index'")
    expect(
        Status.BAD_PARAM, "scatter", td((4, 3)), td((4, 3)), td((2, 3), I64), td((2, 3)), axis=0, reduction=3, word="reduction"
    )
    expect(
        Status.BAD_TENSOR_DTYPE,
        "scatter",
        td((4, 3), iop.DType.BOOL),
        td((4, 3), iop.DType.BOOL),
        td((2, 3), I64),
        td((2, 3), iop.DType.BOOL),
        axis=0,
        reduction=1,
        word="bool",
    )
    expect(Status.BAD_TENSOR_SHAPE, "scatter", td((4, 3)), td((4, 3)), td((2, 3), I64), td((2, 2)), axis=0, word="'updates'")
    expect(Status.BAD_TENSOR_SHAPE, "index_copy", td((4, 3)), td((4, 3)), td((3,), I64), td((2, 3)), dim=0, word="len(index)")
    expect(Status.BAD_TENSOR_SHAPE, "index_copy", td((4, 3)), td((4, 3)), td((2, 1), I64), td((2, 3)), dim=0, word="'index'")
    expect(Status.BAD_TENSOR_DTYPE, "index_copy_inplace", td((4, 3)), td((2, 3)), td((2,), F32), dim=0, word="'index'")
    expect(Status.BAD_PARAM, "index_copy_inplace", td((4, 3)), td((2, 3)), td((2,), I32), dim=-3, word="'dim'")
    expect(Status.BAD_TENSOR_SHAPE, "tril", td((4,)), td((4,)), word="'input'")
    expect(Status.BAD_TENSOR_SHAPE, "interpolate_nearest", td((2, 4, 8)), td((2, 3, 4)), word="'output'")
    expect(Status.BAD_TENSOR_SHAPE, "interpolate_nearest", td((2, 3)), td((2, 3)), word="'input'")


def _run(device, op, outs, ins, **attrs):
    """Run op on ``device`` with NumPy inputs; returns NumPy outputs (contiguous layouts)."""
    from infiniop_py.testing.device import backend_for

    be = backend_for(device)
    h = iop.create_handle(device)
    dt = {np.dtype(np.float32): F32, np.dtype(np.int64): I64, np.dtype(np.float16): F16}
    descs = [td(a.shape, dt[a.dtype]) for a in (*outs, *ins)]
    bufs = [be.upload(np.ascontiguousarray(a).reshape(-1)) for a in (*outs, *ins)]
    d = iop.create_descriptor(op, h, *descs, **attrs)
    ws = be.empty_bytes(d.workspace_size) if d.workspace_size else None
    d.calculate(ws, *bufs)
    be.synchronize()
    return [be.download(b, a.dtype).reshape(a.shape) for b, a in zip(bufs, outs)]


@pytest.mark.parametrize("device", DEVICES)
def test_scatter_duplicates_deterministic(device):
    """Heavy duplicates: replace = last in row-major order, add in order; same on both backends."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 300)).astype(np.float32)
    idx = rng.integers(0, 8, size=(200, 300)).astype(np.int64)
    upd = rng.standard_normal((200, 300)).astype(np.float32)
    out = np.zeros_like(x)
    ref = x.copy()
    for p in range(200):
        ref[idx[p], np.arange(300)] = upd[p]
    (got,) = _run(device, "scatter", [out], [x, idx, upd], axis=0)
    np.testing.assert_array_equal(got, ref)
    ref_add = x.copy()
    for p in range(200):
        ref_add[idx[p], np.arange(300)] += upd[p]
    (got1,) = _run(device, "scatter", [out], [x, idx, upd], axis=0, reduction=1)
    (got2,) = _run(device, "scatter", [out], [x, idx, upd], axis=0, reduction=1)
    np.testing.assert_array_equal(got1, got2)
    np.testing.assert_allclose(got1, ref_add, rtol=1e-5, atol=1e-5)
    if device != "cpu":
        (cpu_add,) = _run("cpu", "scatter", [out], [x, idx, upd], axis=0, reduction=1)
        np.testing.assert_array_equal(got1, cpu_add)


@pytest.mark.parametrize("device", DEVICES)
def test_index_copy_duplicates(device):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((50, 70)).astype(np.float32)
    idx = rng.integers(-5, 55, size=(400,)).astype(np.int64)
    src = rng.standard_normal((400, 70)).astype(np.float32)
    ref = x.copy()
    for i, k in enumerate(idx):
        if 0 <= k < 50:
            ref[k] = src[i]
    (got,) = _run(device, "index_copy", [np.zeros_like(x)], [x, idx, src], dim=0)
    np.testing.assert_array_equal(got, ref)


@requires_gpu
@pytest.mark.gpu
def test_gemm_f32_is_true_fp32_even_with_tf32_math_mode():
    """A TF32 math mode on CuPy's handle must not leak into f32 GEMMs (and is restored)."""
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    h = cp.cuda.device.get_cublas_handle()
    old = cublas.getMathMode(h)
    cublas.setMathMode(h, 3)
    try:
        rng = np.random.default_rng(3)
        a = rng.standard_normal((256, 512)).astype(np.float32)
        b = rng.standard_normal((512, 256)).astype(np.float32)
        (c,) = _run("nvidia", "gemm", [np.zeros((256, 256), np.float32)], [a, b])
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert np.abs(c - ref).max() < 1e-3  # TF32 would give ~1e-2
        assert cublas.getMathMode(h) == 3
    finally:
        cublas.setMathMode(h, old)


@requires_gpu
@pytest.mark.gpu
def test_gemm_lean_cublas_path_true_fp32():
    """The GEMMs call libcublas(Lt) through ctypes on handles of their own: f32 stays true fp32
    (K = 4096: TF32's 10-bit mantissa would give errors ~100x larger) on the cuBLASLt path and on
    the GemmEx path (linear_backward's, and the fallback where cuBLASLt has no algorithm), whose
    handle is rebound when the stream changes."""
    import cupy as cp

    from infiniop_py.blas import gemm as blas_mod

    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 4096)).astype(np.float32)
    w = rng.standard_normal((4096, 96)).astype(np.float32)
    ref = a.astype(np.float64) @ w.astype(np.float64)
    (c,) = _run("nvidia", "gemm", [np.zeros((128, 96), np.float32)], [a, w])
    b = blas_mod.blas_for(0)
    assert b.backend == "ctypes"
    assert np.abs(c - ref).max() < 2e-3  # fp32: ~1e-4; TF32: ~1e-1
    h = iop.create_handle("nvidia")
    ga, gw = cp.asarray(a), cp.asarray(w)
    d = iop.infiniopCreateGemmDescriptor(h, td((128, 96)), td((128, 4096)), td((4096, 96)))
    assert d._kernel.lt is not None
    plan = d._kernel.plan
    for direct in (False, True):
        for _ in range(2):
            s = cp.cuda.Stream(non_blocking=True)
            gc = cp.full((128, 96), cp.nan, cp.float32)
            cp.cuda.runtime.deviceSynchronize()
            if direct:  # the GemmEx call
                b.gemm(plan, ga.data.ptr, gw.data.ptr, gc.data.ptr, 1.0, 0.0, s.ptr)
            else:
                iop.infiniopGemm(d, None, 0, gc, ga, gw, 1.0, 0.0, s)
            s.synchronize()
            if direct:
                assert b._bound == s.ptr
            assert np.abs(cp.asnumpy(gc) - ref).max() < 2e-3


@requires_gpu
@pytest.mark.gpu
def test_gemm_on_side_stream_and_cstyle():
    import cupy as cp

    rng = np.random.default_rng(4)
    a = cp.asarray(rng.standard_normal((64, 32)).astype(np.float32))
    b = cp.asarray(rng.standard_normal((32, 16)).astype(np.float32))
    c = cp.asarray(rng.standard_normal((64, 16)).astype(np.float32))
    c0 = c.copy()
    h = iop.create_handle("nvidia")
    d = iop.infiniopCreateGemmDescriptor(h, td((64, 16)), td((64, 32)), td((32, 16)))
    s = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()  # the uploads ran on the current stream, not on s
    iop.infiniopGemm(d, None, 0, c, a, b, 0.5, 2.0, s)
    s.synchronize()
    ref = 0.5 * (cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b)) + 2.0 * cp.asnumpy(c0)
    np.testing.assert_allclose(cp.asnumpy(c), ref, rtol=1e-4, atol=1e-4)


def _gpu_view(cp, arr, offset, dtype):
    """``arr`` uploaded into a larger buffer starting ``offset`` elements in (pointer misaligned)."""
    flat = cp.full(arr.size + offset + 8, cp.nan, dtype)
    flat[offset : offset + arr.size] = cp.asarray(arr.reshape(-1), dtype)
    return flat[offset : offset + arr.size].reshape(arr.shape)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "f32"])
def test_gemm_cublaslt_path_alignment_batch(dt):
    """cuBLASLt is the GEMM path; pointers off the 256-byte class (1 element in) get an algorithm
    of their own (or the GemmEx fallback) with the same results; batch-1 broadcast works."""
    import cupy as cp

    npdt, idt = {"f16": (np.float16, F16), "f32": (np.float32, F32)}[dt]
    tol = 2e-2 if dt == "f16" else 1e-3
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (3, 40, 72)).astype(npdt)
    b = rng.uniform(-1, 1, (1, 72, 24)).astype(npdt)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    h = iop.create_handle("nvidia")
    results = []
    d = iop.create_descriptor("gemm", h, td((3, 40, 24), idt), td((3, 40, 72), idt), td((1, 72, 24), idt))
    assert d._kernel.lt is not None
    assert d.workspace_size == 0
    for off in (0, 1, 3):
        ga, gb = _gpu_view(cp, a, off, npdt), _gpu_view(cp, b, 2 * off, npdt)
        gc = _gpu_view(cp, np.zeros((3, 40, 24), npdt), off, npdt)
        gc[...] = cp.nan
        d.calculate(None, gc, ga, gb, 1.0, 0.0)
        cp.cuda.runtime.deviceSynchronize()
        got = cp.asnumpy(gc).astype(np.float64)
        assert np.abs(got - ref).max() < tol, off
        results.append(got)
        gc2 = cp.asarray(got.astype(npdt))
        d.calculate(None, gc2, ga, gb, 0.5, 2.0)  # alpha, beta change between calls
        cp.cuda.runtime.deviceSynchronize()
        assert np.abs(cp.asnumpy(gc2).astype(np.float64) - 2.5 * ref).max() < 4 * tol
    d.destroy()
    assert all(np.abs(r - results[0]).max() < tol for r in results)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "f32"])
def test_linear_bias_epilogue(dt):
    """A contiguous bias on a row-major y goes through cuBLASLt's BIAS epilogue (aligned and
    misaligned pointers); a strided bias keeps the broadcast + beta=1 path."""
    import cupy as cp

    npdt, idt = {"f16": (np.float16, F16), "f32": (np.float32, F32)}[dt]
    tol = 2e-2 if dt == "f16" else 1e-3
    rng = np.random.default_rng(8)
    m, n, k = 33, 80, 136
    x = rng.uniform(-1, 1, (m, k)).astype(npdt)
    w = rng.uniform(-1, 1, (n, k)).astype(npdt)
    bias = rng.uniform(-1, 1, (n,)).astype(npdt)
    ref = x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)
    h = iop.create_handle("nvidia")
    d = iop.create_descriptor("linear", h, td((m, n), idt), td((m, k), idt), td((n, k), idt), td((n,), idt))
    assert d._kernel.lt_bias is not None
    for off in (0, 1):
        gy = _gpu_view(cp, np.zeros((m, n), npdt), off, npdt)
        gy[...] = cp.nan
        gx, gw, gbias = (_gpu_view(cp, t, off, npdt) for t in (x, w, bias))
        ws = cp.empty(d.workspace_size, cp.uint8) if d.workspace_size else None
        d.calculate(ws, gy, gx, gw, gbias)
        cp.cuda.runtime.deviceSynchronize()
        assert np.abs(cp.asnumpy(gy).astype(np.float64) - ref).max() < tol, off
    d.destroy()
    d = iop.create_descriptor("linear", h, td((m, n), idt), td((m, k), idt), td((n, k), idt), td((n,), idt, (2,)))
    assert d._kernel.lt_bias is None and d._kernel.bias is not None
    gb2 = cp.zeros(2 * n, npdt)
    gb2[::2] = cp.asarray(bias)
    gy = cp.full((m, n), cp.nan, npdt)
    d.calculate(None, gy, cp.asarray(x), cp.asarray(w), gb2[::2])
    cp.cuda.runtime.deviceSynchronize()
    assert np.abs(cp.asnumpy(gy).astype(np.float64) - ref).max() < tol


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "f32"])
def test_gemm_graph_replay(dt):
    """Repeated (pointers, alpha, beta) are replayed from a one-call CUDA graph: results stay
    exact while the operands' contents change, and bit-identical to the direct call of a fresh
    descriptor; each (alpha, beta) pair gets its own graph; a caller's own stream capture gets
    the direct call (and replays correctly)."""
    import cupy as cp

    npdt, idt = {"f16": (np.float16, F16), "f32": (np.float32, F32)}[dt]
    tol = 2e-2 if dt == "f16" else 1e-3
    m, n, k = 48, 40, 72
    h = iop.create_handle("nvidia")
    ga, gb = cp.empty((m, k), npdt), cp.empty((k, n), npdt)
    gc = cp.empty((m, n), npdt)
    rng = np.random.default_rng(11)
    d = iop.create_descriptor("gemm", h, td((m, n), idt), td((m, k), idt), td((k, n), idt))
    lt = d._kernel.lt
    assert lt is not None and lt._graphs is not None
    for i in range(8):
        a = rng.uniform(-1, 1, (m, k)).astype(npdt)
        b = rng.uniform(-1, 1, (k, n)).astype(npdt)
        c0 = rng.uniform(-1, 1, (m, n)).astype(npdt)
        ga[...], gb[...], gc[...] = cp.asarray(a), cp.asarray(b), cp.asarray(c0)
        alpha, beta = (1.0, 0.0) if i % 4 < 2 else (0.5, 2.0)
        if beta == 0.0:
            gc[...] = cp.nan
        d.calculate(None, gc, ga, gb, alpha, beta)
        cp.cuda.runtime.deviceSynchronize()
        ref = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c0.astype(np.float64)
        got = cp.asnumpy(gc).astype(np.float64)
        assert np.abs(got - ref).max() < 4 * tol, i
        if i >= 4:  # the key's third sighting or later: replayed; a fresh descriptor's first call is direct
            d2 = iop.create_descriptor("gemm", h, td((m, n), idt), td((m, k), idt), td((k, n), idt))
            gc2 = cp.asarray(c0)
            d2.calculate(None, gc2, ga, gb, alpha, beta)
            cp.cuda.runtime.deviceSynchronize()
            assert np.array_equal(cp.asnumpy(gc2), got.astype(npdt)), i  # same kernel either way
            d2.destroy()
    for _ in range(4):  # every key seen GRAPH_AFTER times now has its graph
        d.calculate(None, gc, ga, gb, 1.0, 0.0)
    assert len(lt._graphs) >= 1
    # the caller captures its own graph: our call must be captured directly, not replayed
    s = cp.cuda.Stream(non_blocking=True)
    a = rng.uniform(-1, 1, (m, k)).astype(npdt)
    ga[...] = cp.asarray(a)
    gc[...] = cp.nan
    cp.cuda.runtime.deviceSynchronize()
    s.begin_capture()
    d.calculate(None, gc, ga, gb, 1.0, 0.0, stream=s)
    user_graph = s.end_capture()
    user_graph.launch(s)
    s.synchronize()
    ref = a.astype(np.float64) @ cp.asnumpy(gb).astype(np.float64)
    assert np.abs(cp.asnumpy(gc).astype(np.float64) - ref).max() < tol
    d.destroy()


@requires_gpu
@pytest.mark.gpu
def test_linear_bias_graph_replay():
    """linear + bias (epilogue) replayed from its graph: new bias / x contents are picked up."""
    import cupy as cp

    rng = np.random.default_rng(12)
    m, n, k = 33, 64, 40
    h = iop.create_handle("nvidia")
    d = iop.create_descriptor("linear", h, td((m, n), F16), td((m, k), F16), td((n, k), F16), td((n,), F16))
    assert d._kernel.lt_bias is not None
    gx, gw, gbias, gy = (
        cp.empty((m, k), cp.float16),
        cp.empty((n, k), cp.float16),
        cp.empty(n, cp.float16),
        cp.empty((m, n), cp.float16),
    )
    ws = cp.empty(d.workspace_size, cp.uint8) if d.workspace_size else None
    for i in range(6):
        x, w, bias = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((m, k), (n, k), (n,)))
        gx[...], gw[...], gbias[...] = cp.asarray(x), cp.asarray(w), cp.asarray(bias)
        gy[...] = cp.nan
        d.calculate(ws, gy, gx, gw, gbias)
        cp.cuda.runtime.deviceSynchronize()
        ref = x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)
        assert np.abs(cp.asnumpy(gy).astype(np.float64) - ref).max() < 2e-2, i
    assert len(d._kernel.lt_bias._graphs) == 1


def _c_layout(source: str, struct_name: str):
    """[(offset, kind)] of every scalar of ``struct name { ... };`` in CUDA source (natural alignment)."""
    import re

    body = re.search(r"struct\s+" + struct_name + r"\s*\{(.*?)\};", source, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    sizes = {"long long": 8, "int": 4, "float": 4, "double": 8}
    out, off = [], 0
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        ctype = next(t for t in sizes if decl.startswith(t + " "))
        size = sizes[ctype]
        for var in decl[len(ctype) :].split(","):
            m = re.search(r"\[(\d+)\]", var)
            count = int(m.group(1)) if m else 1
            off = -(-off // size) * size
            for _ in range(count):
                out.append((off, ctype))
                off += size
    align = max(sizes[k] for _, k in out)
    return out, -(-off // align) * align


def _py_layout(fmt: str):
    """[(offset, kind)] of every non-pad item of a little-endian struct format, and its size."""
    import re
    import struct

    kinds = {"q": "long long", "i": "int", "f": "float", "d": "double"}
    out, off = [], 0
    for count, ch in re.findall(r"(\d*)([a-z])", fmt):
        count = int(count or 1)
        size = struct.calcsize("<" + ch)
        for _ in range(count):
            if ch != "x":
                out.append((off, kinds[ch]))
            off += size
    assert off == struct.calcsize(fmt)
    return out, off


def test_kernel_struct_layouts():
    """Every host-packed argument struct matches its CUDA struct field by field (offset and type)."""
    import infiniop_py.registry as reg

    reg.list_ops()
    from infiniop_py import index as common
    from infiniop_py import tri

    interp = __import__("infiniop_ops.interpolate_nearest", fromlist=["x"])
    for source, cname, fmt in (
        (common.SOURCE, "IdxMeta", common.META_FMT),
        (common.SOURCE, "TabMeta", common.TAB_FMT),
        (tri.SOURCE, "TriMeta", tri.META_FMT),
        (interp.SOURCE, "InterpMeta", interp.META_FMT),
    ):
        assert _py_layout(fmt) == _c_layout(source, cname), cname
    assert len(common.pack_meta((2, 3), (3, 1), (3, 1), (3, 1), 6)) == _c_layout(common.SOURCE, "IdxMeta")[1]
    tab = common.pack_tab((2, 3), (3, 1), (3, 1), (3, 1), dim_size=1, length=1, chunk=1, n=1)
    assert len(tab) == _c_layout(common.SOURCE, "TabMeta")[1] == 336


def test_index_copy_cstyle_argument_order():
    """Upstream's C-style create puts dim between input and index; calculate has no dim."""
    h = iop.create_handle("cpu")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([2, 0], dtype=np.int64)
    src = -np.arange(6, dtype=np.float32).reshape(2, 3)
    d = iop.infiniopCreateIndexCopyDescriptor(h, td((4, 3)), td((4, 3)), 0, td((2,), I64), td((2, 3)))
    assert d.info.dim == 0
    out = np.zeros_like(x)
    iop.infiniopIndexCopy(d, None, 0, out, x, idx, src, None)
    ref = x.copy()
    ref[idx] = src
    np.testing.assert_array_equal(out, ref)
    d1 = iop.infiniopCreateIndexCopyDescriptor(h, td((3, 4)), td((3, 4)), -1, td((2,), I64), td((3, 2)))
    assert d1.info.dim == 1
    with pytest.raises(iop.InfiniopError) as e:
        iop.infiniopCreateIndexCopyDescriptor(h, td((4, 3)), td((4, 3)), 0, td((2,), I64), td((2, 3)), 1)
    assert e.value.status == Status.BAD_PARAM
    with pytest.raises(iop.InfiniopError) as e:  # the Pythonic order would put a descriptor where dim goes
        iop.infiniopCreateIndexCopyDescriptor(h, td((4, 3)), td((4, 3)), td((2,), I64), td((2, 3)), 0)
    assert e.value.status in (Status.BAD_PARAM, Status.BAD_TENSOR_DTYPE, Status.BAD_TENSOR_SHAPE)
    with pytest.raises(iop.InfiniopError) as e:
        iop.infiniopCreateIndexCopyDescriptor(h, td((4, 3)), td((4, 3)), 0, td((2,), I64), td((2, 3)), dim=0)
    assert e.value.status == Status.BAD_PARAM
