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
    expect(Status.BAD_TENSOR_SHAPE, "linear_backward", td((4, 3)), td((5, 3)), None, td((4, 6)), td((4, 3)), td((5, 3)), word="grad_y")


def test_index_bad_input():
    expect(Status.BAD_TENSOR_DTYPE, "gather", td((2, 3)), td((4, 3)), td((2, 3), F32), dim=0, word="'index'")
    expect(Status.BAD_TENSOR_SHAPE, "gather", td((2, 3)), td((4, 3)), td((2, 3, 1), I64), dim=0, word="'index'")
    expect(Status.BAD_PARAM, "gather", td((2, 3)), td((4, 3)), td((2, 3), I64), dim=2, word="'dim'")
    expect(Status.BAD_TENSOR_SHAPE, "gather", td((2, 3)), td((4, 3)), td((2, 4), I64), dim=0, word="'index'")
    expect(Status.BAD_PARAM, "scatter", td((4, 3)), td((4, 3)), td((2, 3), I64), td((2, 3)), axis=0, reduction=3, word="reduction")
    expect(Status.BAD_TENSOR_DTYPE, "scatter", td((4, 3), iop.DType.BOOL), td((4, 3), iop.DType.BOOL), td((2, 3), I64),
           td((2, 3), iop.DType.BOOL), axis=0, reduction=1, word="bool")
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
    iop.infiniopGemm(d, None, 0, c, a, b, 0.5, 2.0, s)
    s.synchronize()
    ref = 0.5 * (cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b)) + 2.0 * cp.asnumpy(c0)
    np.testing.assert_allclose(cp.asnumpy(c), ref, rtol=1e-4, atol=1e-4)


def test_kernel_struct_sizes():
    """Host-packed argument structs must match the C layouts (natural alignment) byte for byte."""
    import struct

    import infiniop_py.registry as reg

    reg.list_ops()
    common = __import__("infiniop_ops.gather.common", fromlist=["pack_meta"])
    assert len(common.pack_meta((2, 3), (3, 1), (3, 1), (3, 1), 6)) == 328  # IdxMeta
    assert struct.calcsize("<6q6q6q6qqqiiii") == 224  # TriMeta
    assert struct.calcsize("<5q5q5q5q5fii4xq") == 200  # InterpMeta (rows 8-aligned)
    src = open(reg.ops_dir() / "interpolate_nearest" / "__init__.py").read()
    assert '"<5q5q5q5q5fii4xq"' in src


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
