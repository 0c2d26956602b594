"""NVIDIA-only behaviour: buffer kinds, bf16 transport, streams, device checks, 64-bit indexing.

Skips cleanly on machines without a GPU and CuPy; the generic op test covers every case.
"""

import numpy as np
import pytest
from conftest import requires_gpu

import infiniop_py as iop
from infiniop_py import Status

pytestmark = [requires_gpu, pytest.mark.gpu]


def td(shape, strides=None, dtype=iop.float32):
    return iop.create_tensor_descriptor(shape, strides, dtype)


@pytest.fixture(scope="module")
def h():
    return iop.create_handle("nvidia")


def test_buffer_kinds_and_streams(h):
    import cupy as cp
    import torch

    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((64, 33)).astype(np.float32)
    b_np = rng.standard_normal((64, 33)).astype(np.float32)
    want = a_np + b_np
    d = iop.create_descriptor("add", h, td((64, 33)), td((64, 33)), td((64, 33)))
    a, b = cp.asarray(a_np), cp.asarray(b_np)
    c = cp.full((64, 33), cp.nan, cp.float32)
    d.calculate(None, c, a, b)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), want)

    s = cp.cuda.Stream(non_blocking=True)
    c[...] = cp.nan
    cp.cuda.Device().synchronize()  # the poison ran on the current stream, not on s
    d.calculate(None, c, a, b, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), want)

    ta, tb = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
    tc = torch.full((64, 33), float("nan"), device="cuda")
    ts = torch.cuda.Stream()
    torch.cuda.synchronize()  # the poison ran on torch's current stream, not on ts
    d.calculate(None, tc, ta, tb, stream=ts)
    ts.synchronize()
    np.testing.assert_array_equal(tc.cpu().numpy(), want)

    tc.fill_(float("nan"))
    torch.cuda.synchronize()
    iop.infiniopAdd(d, None, 0, tc.data_ptr(), ta.data_ptr(), tb, ts.cuda_stream)
    ts.synchronize()
    np.testing.assert_array_equal(tc.cpu().numpy(), want)

    class CAI:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    c[...] = cp.nan
    d.calculate(None, CAI(c), CAI(a), b)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), want)


def test_bf16_transport(h):
    import cupy as cp
    import ml_dtypes
    import torch

    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 50)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((40, 50)).astype(ml_dtypes.bfloat16)
    want = (a.astype(np.float32) * b.astype(np.float32)).astype(ml_dtypes.bfloat16).astype(np.float32)
    d = iop.create_descriptor("mul", h, *(td((40, 50), dtype=iop.bfloat16),) * 3)
    # as uint16 CuPy arrays
    ca, cb = cp.asarray(a.view(np.uint16)), cp.asarray(b.view(np.uint16))
    cc = cp.zeros((40, 50), cp.uint16)
    d.calculate(None, cc, ca, cb)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(cc).view(ml_dtypes.bfloat16).astype(np.float32), want)
    # as torch bfloat16 tensors
    ta = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).cuda()
    tb = torch.from_numpy(b.astype(np.float32)).to(torch.bfloat16).cuda()
    tc = torch.zeros(40, 50, dtype=torch.bfloat16, device="cuda")
    d.calculate(None, tc, ta, tb, stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    np.testing.assert_array_equal(tc.float().cpu().numpy(), want)


def test_device_placement_and_extent(h):
    import cupy as cp

    d = iop.create_descriptor("add", h, td((8,)), td((8,)), td((8,)))
    x = cp.ones(8, cp.float32)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, x, np.ones(8, np.float32), x)
    assert ei.value.status is Status.BAD_PARAM and "'a'" in str(ei.value)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(None, x, cp.ones(7, cp.float32), x)
    assert ei.value.status is Status.BAD_PARAM
    cpu = iop.create_descriptor("add", iop.create_handle("cpu"), td((8,)), td((8,)), td((8,)))
    with pytest.raises(iop.InfiniopError) as ei:
        cpu.calculate(None, np.ones(8, np.float32), x, np.ones(8, np.float32))
    assert ei.value.status is Status.BAD_PARAM


def test_unaligned_contiguous_falls_back(h):
    import cupy as cp

    d = iop.create_descriptor(
        "add", h, td((1001,), dtype=iop.float16), td((1001,), dtype=iop.float16), td((1001,), dtype=iop.float16)
    )
    base = cp.asarray(np.random.default_rng(2).standard_normal(1003).astype(np.float16))
    out = cp.full(1003, cp.nan, cp.float16)
    d.calculate(None, out[1:1002], base[1:1002], base[2:1003])  # 2-byte offsets: no 16-byte alignment
    cp.cuda.get_current_stream().synchronize()
    ref = (base[1:1002].astype(cp.float32) + base[2:1003].astype(cp.float32)).astype(cp.float16)
    np.testing.assert_array_equal(cp.asnumpy(out[1:1002]), cp.asnumpy(ref))
    assert bool(cp.isnan(out[0])) and bool(cp.isnan(out[1002]))


def test_transpose_rearrange_large_and_64bit_index(h):
    import cupy as cp

    n = 2**31 + 7  # elements: forces the 64-bit index path of the strided kernel
    d = iop.create_descriptor("add", h, td((n,), dtype=iop.uint8), td((n,), dtype=iop.uint8), td((n,), (0,), dtype=iop.uint8))
    a = cp.arange(n, dtype=cp.uint64).astype(cp.uint8)
    b = cp.full(1, 3, cp.uint8)
    c = cp.empty(n, cp.uint8)
    d.calculate(None, c, a, b)
    cp.cuda.get_current_stream().synchronize()
    assert int(c[-1]) == ((n - 1) % 256 + 3) % 256 and bool((c[:1000] == (a[:1000] + 3)).all())
    del a, c
    r = iop.create_descriptor("rearrange", h, td((4096, 4100)), td((4096, 4100), (1, 4096)))
    src = cp.random.standard_normal(4096 * 4100, dtype=cp.float32)
    dst = cp.empty(4096 * 4100, cp.float32)
    r.calculate(None, dst, src)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(dst.reshape(4096, 4100)), cp.asnumpy(src.reshape(4100, 4096).T))


def test_keyword_tensor_order_on_gpu(h):
    import cupy as cp

    d = iop.create_descriptor("sub", h, b=td((3,)), a=td((3,)), c=td((3,)))
    a, b, c = cp.full(3, 5.0, cp.float32), cp.ones(3, cp.float32), cp.zeros(3, cp.float32)
    d.calculate(None, b=b, c=c, a=a)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(c), [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(cp.asnumpy(a), [5.0, 5.0, 5.0])  # inputs untouched


def test_workspace_reuse_and_too_small(h):
    """A CuPy workspace is checked once per object; a smaller one is still refused."""
    import cupy as cp

    d = iop.create_descriptor("sum", h, td(()), td((64, 1000)), dims=[])
    assert d.workspace_size > 0
    x = cp.asarray(np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32))
    y = cp.empty((), cp.float32)
    ws = cp.empty(d.workspace_size, cp.uint8)
    for _ in range(3):
        d.calculate(ws, y, x)
    cp.cuda.get_current_stream().synchronize()
    np.testing.assert_allclose(float(y), float(cp.asnumpy(x).astype(np.float64).sum()), rtol=1e-5, atol=1e-3)
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(cp.empty(d.workspace_size - 1, cp.uint8), y, x)
    assert ei.value.status is Status.INSUFFICIENT_WORKSPACE


def test_torch_workspace_reuse_and_repoint(h):
    """A torch workspace is reused while data_ptr() is unchanged, re-checked once it moves."""
    import torch

    d = iop.create_descriptor("sum", h, td(()), td((64, 1000)), dims=[])
    need = d.workspace_size
    assert need > 0
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn((64, 1000), device="cuda", dtype=torch.float32, generator=gen)
    y = torch.empty((), device="cuda", dtype=torch.float32)
    ws = torch.empty(need, device="cuda", dtype=torch.uint8)
    for _ in range(3):
        y.fill_(float("nan"))
        d.calculate(ws, y, x)
        torch.testing.assert_close(y.double(), x.double().sum(), rtol=1e-5, atol=1e-3)
    ws.set_(torch.empty(need - 1, device="cuda", dtype=torch.uint8))  # same object, new, too-short storage
    with pytest.raises(iop.InfiniopError) as ei:
        d.calculate(ws, y, x)
    assert ei.value.status is Status.INSUFFICIENT_WORKSPACE
    ws.set_(torch.empty(need, device="cuda", dtype=torch.uint8))
    y.fill_(float("nan"))
    d.calculate(ws, y, x)
    torch.testing.assert_close(y.double(), x.double().sum(), rtol=1e-5, atol=1e-3)
