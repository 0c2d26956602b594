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
def test_threaded_results_repeat_bitwise(op, path):
    """Large enough to be split over the pool: every run gives the same bits, and the same as
    one thread (the split of work that adds up over rows depends on the shape only)."""
    from infiniop_py.dtypes import to_numpy

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
