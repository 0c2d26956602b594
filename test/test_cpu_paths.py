"""The CPU backend's two paths: compiled kernels (numba, the ``cpu-fast`` extra) and pure NumPy.

test_ops.py runs every case on whichever path this environment has (the compiled one where
numba is installed, as in CI); here the pure-NumPy path is forced for the first case of every
operator, the compiled kernels are checked directly (exact where the NumPy path is exact, within
a few ulp for exp), and threaded CPU work is checked to be bitwise repeatable.
"""

import contextlib

import numpy as np
import pytest

import infiniop_py as iop
from infiniop_py.cpu import jit, pool
from infiniop_py.dtypes import DType
from infiniop_py.registry import get_cases


def _pure_instances():
    """The first quick case of every operator in f32 and f16 (bf16 takes the f16 path with
    ml_dtypes' casts for conversions)."""
    for op in iop.list_ops():
        index, case = next(((i, c) for i, c in enumerate(get_cases(op)) if "quick" in c.suites), (None, None))
        if case is None:
            continue
        for dt in case.dtypes:
            if dt in (DType.F32, DType.F16):
                yield pytest.param(op, index, dt, id=f"{op}-{index}-{dt.name}")


@pytest.mark.parametrize("op,index,dtype", list(_pure_instances()))
def test_pure_numpy_path(op, index, dtype):
    from infiniop_py.testing.run import run_case

    case = get_cases(op)[index]
    with jit.pure_numpy():
        assert jit.kernels() is None
        result = run_case(op, case, dtype, "cpu")
    assert result.ok, f"{op} [{case.description}] {dtype.name} (pure NumPy): " + "; ".join(result.messages)


@pytest.mark.parametrize("op", ["conv", "max_pool_backward"])
def test_pure_numpy_path_every_case(op):
    """Operators whose compiled kernels take most of the case table (the direct convolution of
    few channels, max_pool_backward): the NumPy path on every case too, f32 and f16."""
    from infiniop_py.testing.run import run_case

    failed = []
    with jit.pure_numpy():
        for case in get_cases(op):
            for dt in (d for d in case.dtypes if d in (DType.F32, DType.F16)):
                result = run_case(op, case, dt, "cpu")
                if not result.ok:
                    failed.append(f"[{case.description}] {dt.name}: " + "; ".join(result.messages))
    assert not failed, failed


def _kernels():
    pytest.importorskip("numba")
    k = jit.kernels()
    if k is None:
        pytest.skip("compiled kernels disabled (INFINIOP_CPU_PURE) or unavailable")
    return k


def test_kernels_load_when_numba_is_installed():
    _kernels()


def _bits(a):
    return a.view(np.uint16) if a.dtype == np.float16 else a.view(np.int16) if a.dtype.itemsize == 2 else a


SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 7e4, 1e-8, -3e-39, 3.4e38]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("op", [np.add, np.subtract, np.multiply, np.true_divide])
def test_binary_kernel_matches_numpy_f32_rounded_once(op, dtype):
    k = _kernels()
    dt = np.dtype(dtype) if dtype != "bfloat16" else np.dtype(__import__("ml_dtypes").bfloat16)
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.standard_normal(1000) * 100, SPECIAL, SPECIAL]).astype(np.float32).astype(dt)
    b = np.concatenate([rng.standard_normal(1000), SPECIAL, SPECIAL[::-1]]).astype(np.float32).astype(dt)
    out = np.empty_like(a)
    k.binary({np.add: 0, np.subtract: 1, np.multiply: 2, np.true_divide: 3}[op], _bits(a), _bits(b), _bits(out))
    with np.errstate(all="ignore"):
        want = op(a.astype(np.float32), b.astype(np.float32)).astype(dt)
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(out.astype(np.float32)), nan)
    assert np.array_equal(_bits(out)[~nan], _bits(want)[~nan])


def test_exp32_accuracy_and_special_values():
    """exp32 (through the exp kernel): relative error <= 3 ulp over the
    whole float32 range, overflow -> inf, underflow -> 0, NaN stays NaN."""
    k = _kernels()
    x = np.concatenate([np.linspace(-103, 88.7, 200001), [np.nan, np.inf, -np.inf, 89.0, 1e30, -200.0]]).astype(np.float32)
    got = np.empty_like(x)
    k.exp(x, got)
    want = np.exp(x.astype(np.float64))
    normal = (want > 1.2e-38) & (want < 3.4e38)
    rel = np.abs(got[normal] - want[normal]) / want[normal]
    assert rel.max() <= 3 * 2.0**-23  # measured 2.4e-7
    sub = want <= 1.2e-38
    assert np.all(np.abs(got[sub] - want[sub]) <= 2 * 2.0**-149)  # subnormal results: 2 ulp of 2^-149
    assert np.isnan(got[-6]) and got[-5] == np.inf and got[-4] == 0 and got[-3] == np.inf and got[-2] == np.inf and got[-1] == 0


# op -> (tensor shapes; dtype): large enough for the pool to split the work
THREADED = {
    "mul": ({"c": (768, 1024), "a": (768, 1024), "b": (768, 1024)}, DType.F16),
    "layer_norm_backward": (
        {
            "grad_input": (512, 768),
            "grad_weight": (768,),
            "grad_bias": (768,),
            "grad_output": (512, 768),
            "weight": (768,),
            "input_standardization": (512, 768),
            "input_std_deviation": (512,),
        },
        DType.F32,
    ),
    "rms_norm_backward": (
        {"grad_x": (512, 768), "grad_w": (768,), "grad_y": (512, 768), "x": (512, 768), "w": (768,)},
        DType.BF16,
    ),
    "sum": ({"output": (640,), "input": (640, 1000)}, DType.F16),
}


@pytest.mark.parametrize("op", sorted(THREADED))
@pytest.mark.parametrize("path", ["compiled", "pure"])
def test_threaded_results_repeat_bitwise(op, path, monkeypatch):
    """Large enough to be split over the pool (row kernels split from MIN_PART elements here,
    not from SPLIT_PART): every run gives the same bits, and the same as one thread (the split
    of work that adds up over rows depends on the shape only)."""
    from infiniop_py.cpu import rows
    from infiniop_py.dtypes import to_numpy

    monkeypatch.setattr(rows, "SPLIT_PART", rows.MIN_PART)

    if path == "compiled":
        _kernels()
    shapes, dt = THREADED[op]
    rng = np.random.default_rng(3)
    h = iop.create_handle("cpu")
    npdt = to_numpy(dt)
    descs = {n: iop.create_tensor_descriptor(s, None, dt) for n, s in shapes.items()}
    attrs = {"dims": [-1]} if op == "sum" else {}
    inputs = {n: (rng.standard_normal(s) + 0.5).astype(np.float32).astype(npdt) for n, s in shapes.items()}
    outputs = [n for n in shapes if n.startswith(("grad_", "c", "output"))]

    def run():
        bufs = dict(inputs)
        for n in outputs:
            bufs[n] = np.zeros(shapes[n], npdt)
        with iop.create_descriptor(op, h, **descs, **attrs) as d:
            d.calculate(None, **bufs)
        return [bufs[n].view(np.uint8).copy() for n in outputs]

    ctx = jit.pure_numpy() if path == "pure" else contextlib.nullcontext()
    with ctx:
        first = run()
        assert all(np.array_equal(a, b) for _ in range(2) for a, b in zip(first, run()))
        threads = pool.THREADS
        try:
            pool.THREADS = 1
            single = run()
        finally:
            pool.THREADS = threads
    assert all(np.array_equal(a, b) for a, b in zip(first, single))


def test_numpy_view_fast_path_checks_what_the_general_path_checks():
    """calculate hands NumPy arrays laid out as their descriptors straight to the kernel; it must
    still refuse read-only outputs and overlaps, also when the same arrays come again."""
    from infiniop_py.status import InfiniopError, Status

    h = iop.create_handle("cpu")
    td = iop.create_tensor_descriptor((64,), None, DType.F32)
    a, b = np.arange(64, dtype=np.float32), np.ones(64, np.float32)
    base = np.zeros(80, np.float32)
    with iop.create_descriptor("add", h, td, td, td) as d:
        c = np.empty(64, np.float32)
        for _ in range(2):  # the second call sees the same objects
            d.calculate(None, c, a, b)
            assert np.array_equal(c, a + 1)
        c.flags.writeable = False
        with pytest.raises(InfiniopError) as ei:
            d.calculate(None, c, a, b)
        assert ei.value.status is Status.BAD_PARAM
        d.calculate(None, a, a, b)  # in place: allowed (identical layout)
        assert np.array_equal(a, np.arange(64, dtype=np.float32) + 1)
        src = base[:64]
        src[:] = 1
        for _ in range(2):
            with pytest.raises(InfiniopError) as ei:
                d.calculate(None, base[3:67], src, b)  # shifted overlap
            assert ei.value.status is Status.BAD_TENSOR_STRIDES


@pytest.mark.parametrize("k", [1, 3, 16])
def test_topksoftmax_compiled_ranks_like_the_numpy_path(k):
    """Ties (lower index first), -0 with +0 and NaN (last): the same indices on both paths."""
    _kernels()
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, size=(64, 16)).astype(np.float32)  # many ties
    x[::5, 2] = -0.0
    x[::7, 5] = np.nan
    x[3] = np.nan
    h = iop.create_handle("cpu")
    descs = dict(
        values=iop.create_tensor_descriptor((64, k), None, DType.F32),
        indices=iop.create_tensor_descriptor((64, k), None, DType.I32),
        x=iop.create_tensor_descriptor(x.shape, None, DType.F32),
    )
    got = {}
    for path in ("compiled", "pure"):
        v, i = np.empty((64, k), np.float32), np.empty((64, k), np.int32)
        with contextlib.ExitStack() as stack:
            if path == "pure":
                stack.enter_context(jit.pure_numpy())
            with iop.create_descriptor("topksoftmax", h, **descs) as d:
                d.calculate(None, v, i, x, k, True)
        got[path] = v, i
    assert np.array_equal(got["compiled"][1], got["pure"][1])
    np.testing.assert_allclose(got["compiled"][0], got["pure"][0], rtol=1e-6, atol=0, equal_nan=True)


@pytest.mark.parametrize("k", [1, 8, 37])
def test_topkrouter_compiled_choice_is_the_numpy_paths(k):
    """The compiled choice of experts (group scores, kept groups, top-k) against the sorts of
    the NumPy path: ties (lower group / index first), NaN (last) and zeros of dropped groups
    ranked above negative scores give the same indices and value bits."""
    _kernels()
    from ops.topkrouter import route

    rng = np.random.default_rng(11)
    for x in (
        rng.integers(-2, 3, size=(48, 256)).astype(np.float32),  # many ties
        np.where(rng.random((48, 256)) < 0.03, np.nan, rng.standard_normal((48, 256))).astype(np.float32),
    ):
        x[7] = np.nan
        for bias in (rng.standard_normal(256).astype(np.float32), np.full(256, -1.0, np.float32)):
            got = route(x, bias, k, 2.5)
            with jit.pure_numpy():
                want = route(x, bias, k, 2.5)
            assert np.array_equal(got[1], want[1])
            assert np.array_equal(got[0].view(np.uint32), want[0].view(np.uint32))


@pytest.mark.parametrize("dtype", [DType.U8, DType.F16, DType.BF16, DType.F32, DType.F64])
def test_rearrange_2d_transpose_compiled_copies_bits(dtype):
    """The compiled blocked copy (2-D, src strided along rows, edge blocks and tiles) gives the
    same bits as NumPy's copy, on both paths."""
    _kernels()
    npdt = _np_dtype(dtype)
    rng = np.random.default_rng(5)
    big = rng.integers(0, 250, size=(1100, 900)).astype(np.uint8).astype(npdt)
    src = big[::3, ::2].T  # (450, 367), strides along both dims, neither unit
    h = iop.create_handle("cpu")
    sd = iop.create_tensor_descriptor(src.shape, tuple(st // src.itemsize for st in src.strides), dtype)
    dd = iop.create_tensor_descriptor(src.shape, None, dtype)
    for path in ("compiled", "pure"):
        dst = np.zeros(src.shape, npdt)
        with contextlib.ExitStack() as stack:
            if path == "pure":
                stack.enter_context(jit.pure_numpy())
            with iop.create_descriptor("rearrange", h, dd, sd) as d:
                d.calculate(None, dst, src)
        assert np.array_equal(dst.view(np.uint8), np.ascontiguousarray(src).view(np.uint8)), path


def _np_dtype(dt: DType):
    from infiniop_py.dtypes import to_numpy

    return to_numpy(dt)


def _same_bits(x, y) -> bool:
    """Bitwise equal, any NaN matching any NaN."""
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    nan = np.isnan(yf)
    return np.array_equal(np.isnan(xf), nan) and np.array_equal(_bits(x)[~nan], _bits(y)[~nan])


SMALL_SHAPES = [(1,), (7,), (1023,), (1025,), (3, 5), (2, 3, 4)]


@pytest.mark.parametrize("dtype", [DType.F32, DType.F16, DType.BF16])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_small_dense_binary_call_gives_the_numpy_paths_bits(op, dtype):
    """Small calls on dense operands of one dtype run the compiled kernel's machine code on
    the arrays themselves (no dispatch, no views); the bits are the pure-NumPy path's (f32:
    NumPy's own loop; halves: computed in f32, rounded once), odd sizes and n-D included."""
    k = _kernels()
    assert jit.entry("binary", 0, *[np.zeros(1, np.uint16)] * 3) is not None
    npdt = _np_dtype(dtype)
    rng = np.random.default_rng(5)
    h = iop.create_handle("cpu")
    for shape in SMALL_SHAPES:
        n = int(np.prod(shape))
        vals = np.concatenate([rng.standard_normal(n) * 50, SPECIAL])[:n]
        a = vals.astype(np.float32).astype(npdt).reshape(shape)
        b = np.concatenate([rng.standard_normal(n) + 0.25, SPECIAL[::-1]])[:n].astype(np.float32).astype(npdt).reshape(shape)
        td = iop.create_tensor_descriptor(shape, None, dtype)
        got, want = np.empty(shape, npdt), np.empty(shape, npdt)
        with iop.create_descriptor(op, h, td, td, td) as d:
            for _ in range(2):  # the second call sees the same arrays again
                d.calculate(None, got, a, b)
            with jit.pure_numpy():
                d.calculate(None, want, a, b)
        assert _same_bits(got, want), (op, dtype, shape)
    assert k is not None


@pytest.mark.parametrize("dtype", [DType.F32, DType.F16, DType.BF16])
def test_small_dense_unary_call_runs_the_ops_own_kernel(dtype):
    """A unary op with a kernel of its own (relu) on small dense operands: the pure-NumPy
    path's bits."""
    _kernels()
    npdt = _np_dtype(dtype)
    rng = np.random.default_rng(8)
    h = iop.create_handle("cpu")
    x = np.concatenate([rng.standard_normal(999) * 10, SPECIAL]).astype(np.float32).astype(npdt)
    td = iop.create_tensor_descriptor(x.shape, None, dtype)
    got, want = np.empty_like(x), np.empty_like(x)
    with iop.create_descriptor("relu", h, td, td) as d:
        d.calculate(None, got, x)
        with jit.pure_numpy():
            d.calculate(None, want, x)
    assert _same_bits(got, want)


def test_small_dense_call_falls_back_where_it_does_not_apply():
    """Strided operands, a misaligned array, raw addresses, an in-place call and calls inside
    pure_numpy all give the same result as the small dense path."""
    _kernels()
    h = iop.create_handle("cpu")
    rng = np.random.default_rng(6)
    n = 1000
    a = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
    td = iop.create_tensor_descriptor((n,), None, DType.F16)
    with iop.create_descriptor("add", h, td, td, td) as d:
        raw = bytearray(2 * n + 1)
        odd = np.frombuffer(raw, np.float16, count=n, offset=1)  # misaligned (read-only) input
        assert not odd.flags.aligned
        odd_w = np.frombuffer(memoryview(raw), np.float16, count=n, offset=1)
        raw[1:] = a.tobytes()
        c = np.empty(n, np.float16)
        d.calculate(None, c, odd, b)
        assert np.array_equal(c, want)
        c2 = np.empty(n, np.float16)
        d.calculate(None, c2.ctypes.data, a.ctypes.data, b.ctypes.data)  # raw addresses
        assert np.array_equal(c2, want)
        with jit.pure_numpy():
            c3 = np.empty(n, np.float16)
            d.calculate(None, c3, a, b)
        assert np.array_equal(c3, want)
        x = a.copy()
        d.calculate(None, x, x, b)  # in place
        assert np.array_equal(x, want)
        del odd, odd_w
    strided = iop.create_tensor_descriptor((n,), (2,), DType.F16)
    with iop.create_descriptor("add", h, strided, strided, td) as d:
        big_a = np.zeros(2 * n, np.float16)
        big_a[::2] = a
        out = np.zeros(2 * n, np.float16)
        d.calculate(None, out[::2], big_a[::2], b)
        assert np.array_equal(out[::2], want) and not out[1::2].any()


def test_small_dense_call_still_refuses_bad_buffers():
    """The small path keeps calculate's checks: read-only output, a buffer too small for its
    descriptor, a missing buffer, a shifted overlap (each with its status)."""
    from infiniop_py.status import InfiniopError, Status

    h = iop.create_handle("cpu")
    td = iop.create_tensor_descriptor((64,), None, DType.BF16)
    npdt = _np_dtype(DType.BF16)
    a, b = np.ones(64, npdt), np.ones(64, npdt)
    with iop.create_descriptor("add", h, td, td, td) as d:
        c = np.empty(64, npdt)
        d.calculate(None, c, a, b)
        assert np.all(c.astype(np.float32) == 2)
        cases = []
        ro = np.empty(64, npdt)
        ro.flags.writeable = False
        cases.append(((ro, a, b), Status.BAD_PARAM))
        cases.append(((c, np.ones(32, npdt), b), Status.BAD_PARAM))  # too small
        cases.append(((c, None, b), Status.NULL_POINTER))
        base = np.zeros(80, npdt)
        cases.append(((base[3:67], base[:64], b), Status.BAD_TENSOR_STRIDES))
        for args, status in cases:
            for _ in range(2):
                with pytest.raises(InfiniopError) as ei:
                    d.calculate(None, *args)
                assert ei.value.status is status, (status, ei.value)


def test_forced_pure_numpy_environment_runs_small_add_and_bf16_gemm():
    """INFINIOP_CPU_PURE=1 (read at import): no compiled kernel anywhere, the small add and
    the bf16 gemm take their NumPy paths and stay correct."""
    import os
    import subprocess
    import sys

    code = """
import numpy as np, infiniop_py as iop
from infiniop_py.cpu import jit, matmul
from infiniop_py.dtypes import DType, to_numpy
assert jit.kernels() is None and not matmul.available()
h = iop.create_handle("cpu")
rng = np.random.default_rng(0)
for dt in (DType.F32, DType.F16, DType.BF16):
    npdt = to_numpy(dt)
    a, b = (rng.standard_normal(1024).astype(np.float32).astype(npdt) for _ in range(2))
    c = np.empty(1024, npdt)
    td = iop.create_tensor_descriptor((1024,), None, dt)
    with iop.create_descriptor("add", h, td, td, td) as d:
        d.calculate(None, c, a, b)
    assert np.array_equal(c, (a.astype(np.float32) + b.astype(np.float32)).astype(npdt)), dt
bf = to_numpy(DType.BF16)
a = rng.standard_normal((160, 200)).astype(bf)
b = rng.standard_normal((200, 96)).astype(bf)
c = np.empty((160, 96), bf)
descs = [iop.create_tensor_descriptor(x.shape, None, DType.BF16) for x in (c, a, b)]
with iop.create_descriptor("gemm", h, *descs) as d:
    d.calculate(None, c, a, b, 1.0, 0.0)
ref = a.astype(np.float64) @ b.astype(np.float64)
assert np.all(np.abs(c.astype(np.float64) - ref) <= 1e-2 * (np.abs(ref) + 1)), "gemm"
print("ok")
"""
    env = dict(os.environ, INFINIOP_CPU_PURE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def _bf16_kernels():
    from infiniop_py.cpu import matmul

    _kernels()
    if not matmul.available():
        pytest.skip("no AVX512-BF16 (or an LLVM before 17): bf16 gemm takes the f32 BLAS")
    return matmul


def _bf16(rng, shape, order=None):
    import ml_dtypes

    x = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    return x if order is None else np.ascontiguousarray(x.transpose(order)).transpose(np.argsort(order))


BF16_PRODUCTS = [
    # (a batch, b batch, m, k, n, a layout, b layout): odd edges, odd k, transposed, padded, broadcast
    (1, 1, 512, 512, 512, "c", "c"),
    (1, 1, 13, 17, 9, "c", "c"),
    (1, 1, 8, 2, 32, "c", "c"),
    (1, 1, 1, 1, 1, "c", "c"),
    (1, 1, 33, 515, 65, "t", "c"),
    (1, 1, 64, 129, 100, "c", "t"),
    (3, 3, 5, 11, 7, "t", "t"),
    (1, 4, 40, 64, 70, "c", "c"),  # a broadcast
    (4, 1, 40, 64, 70, "c", "pad"),  # b broadcast, padded rows
    (2, 2, 24, 600, 40, "pad", "c"),  # k over one pass of the tile (BF16_KC pairs)
]


@pytest.mark.parametrize("amx", [False, True], ids=["dpbf16ps", "amx"])
@pytest.mark.parametrize("ab,bb,m,k,n,la,lb", BF16_PRODUCTS)
def test_bf16_products_on_the_bf16_dot_products(ab, bb, m, k, n, la, lb, amx):
    """bf16_matmul against float64: every element within the float32 summation bound
    (k + 1) 2^-24 sum |a| |b|, on every layout and edge; repeatable bit for bit, also on one
    thread; through vdpbf16ps and, where the CPU has them, the AMX tiles."""
    matmul = _bf16_kernels()
    if amx and not matmul.uses_amx():
        pytest.skip("no AMX-BF16 here (or no permission for the tile state)")
    if not amx and "+avx512bf16" not in matmul._host_features():
        pytest.skip("no AVX512-BF16 here")
    rng = np.random.default_rng(m * 1000 + k + n)

    def operand(batch, r, c, layout):
        if layout == "t":
            return _bf16(rng, (batch, c, r)).transpose(0, 2, 1)
        if layout == "pad":
            return _bf16(rng, (batch, r, c + 3))[:, :, :c]
        return _bf16(rng, (batch, r, c))

    a, b = operand(ab, m, k, la), operand(bb, k, n, lb)
    got = matmul._product(jit.kernels(), a, b, amx).copy()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (k + 1) * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    assert got.shape == (max(ab, bb), m, n)
    assert np.all(np.abs(got - a64 @ b64) <= bound)
    assert np.array_equal(matmul._product(jit.kernels(), a, b, amx), got)
    threads = pool.THREADS
    try:
        pool.THREADS = 1
        assert np.array_equal(matmul._product(jit.kernels(), a, b, amx), got)
    finally:
        pool.THREADS = threads


def test_bf16_gemm_takes_the_bf16_dot_products(monkeypatch):
    """gemm in bf16, large enough: the bf16 kernels (not the f32 BLAS), alpha and beta applied
    after, within bf16's tolerance of float64; small products keep the f32 BLAS."""
    matmul = _bf16_kernels()
    calls = []
    product = matmul._product
    monkeypatch.setattr(matmul, "_product", lambda *a: calls.append(a[1].shape) or product(*a))
    rng = np.random.default_rng(9)
    h = iop.create_handle("cpu")
    for m, k, n in ((256, 320, 200), (13, 17, 9)):
        a, b, c0 = _bf16(rng, (m, k)), _bf16(rng, (k, n)), _bf16(rng, (m, n))
        c = c0.copy()
        descs = [iop.create_tensor_descriptor(x.shape, None, DType.BF16) for x in (c, a, b)]
        with iop.create_descriptor("gemm", h, *descs) as d:
            d.calculate(None, c, a, b, 0.5, 1.5)
        ref = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 1.5 * c0.astype(np.float64)
        np.testing.assert_allclose(c.astype(np.float64), ref, rtol=1e-2, atol=1e-2)
    assert calls == [(1, 256, 320)]
