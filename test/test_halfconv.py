"""infiniop_py.halfconv: bit-identical to NumPy's casts (f32 -> f16 on every non-NaN float32),
on both paths (compiled kernels where numba is installed, and pure NumPy)."""

import numpy as np
import pytest

from infiniop_py.cpu import jit
from infiniop_py.halfconv import copy_into, to_f32

U16 = np.uint16


@pytest.fixture(autouse=True, params=["compiled", "pure"])
def path(request):
    if request.param == "pure":
        with jit.pure_numpy():
            yield request.param
    else:
        if jit.kernels() is None:
            pytest.skip("compiled kernels unavailable (numba not installed or INFINIOP_CPU_PURE)")
        yield request.param


def _reference(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(np.float16)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == np.float16
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)  # NaN stays NaN (payloads may differ)
    assert np.array_equal(got.view(U16)[~nan], want.view(U16)[~nan])


BOUNDARIES = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504, 65519.996, 65520, 65536, 1e38, -1e38]
    + [6.1035156e-05, 6.1035152e-05, 6.0975552e-05, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 1e-8, 1e-45]
    + [1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20, 2049.0, 2051.0, 4097.0],
    np.float32,
)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 4097, (1 << 16) + 3, 3 * (1 << 16)])
def test_random_bit_patterns(n):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out = np.full(n, np.float16(7), np.float16)
    copy_into(out, x)
    _same_bits(out, _reference(x))


def test_boundaries_both_signs():
    x = np.concatenate([BOUNDARIES, -BOUNDARIES, np.nextafter(BOUNDARIES, np.float32(np.inf))])
    x = np.tile(x, 8)  # past the small-size fallback
    out = np.empty(x.size, np.float16)
    copy_into(out, x)
    _same_bits(out, _reference(x))


@pytest.mark.parametrize("kind", ["zeros", "half_zeros", "subnormal", "mostly_huge", "normal"])
def test_dense_rare_values(kind):
    """Chunks full of zeros / f16 subnormals take the branch-free path; huge values NumPy's."""
    rng = np.random.default_rng(1)
    n = (1 << 16) * 2 + 5
    x = rng.standard_normal(n).astype(np.float32)
    if kind == "zeros":
        x[:] = 0
        x[::3] = -0.0
    elif kind == "half_zeros":
        x[::2] = 0
        x[1::7] *= 1e-6
    elif kind == "subnormal":
        x *= 1e-6
    elif kind == "mostly_huge":
        x *= 1e5
        x[::5] = np.nan
    out = np.empty(n, np.float16)
    copy_into(out, x)
    _same_bits(out, _reference(x))


def test_strided_destination_and_broadcast_source():
    rng = np.random.default_rng(2)
    base = np.full((70, 40), np.float16(-3), np.float16)
    dst = base[::2, 1::3]  # non-contiguous: written through a temporary
    src = rng.standard_normal((1, dst.shape[1])).astype(np.float32)  # broadcast over rows
    copy_into(dst, src)
    _same_bits(np.ascontiguousarray(dst), _reference(np.broadcast_to(src, dst.shape)))
    untouched = np.ones(base.shape, bool)
    untouched[::2, 1::3] = False
    assert np.all(base[untouched] == np.float16(-3))


@pytest.mark.parametrize(
    "src_dt,dst_dt",
    [(np.float64, np.float16), (np.float32, np.float32), (np.float16, np.float32), (np.float32, np.int32)],
)
def test_other_pairs_fall_back_to_numpy(src_dt, dst_dt):
    x = (np.random.default_rng(3).standard_normal(300) * 100).astype(src_dt)
    out = np.empty(300, dst_dt)
    copy_into(out, x)
    with np.errstate(all="ignore"):
        want = x.astype(dst_dt)
    assert np.array_equal(out.view(np.uint8), want.view(np.uint8))


def test_zero_d_and_empty():
    out = np.empty((), np.float16)
    copy_into(out, np.float32(1.5))
    assert out == np.float16(1.5)
    empty = np.empty((0, 5), np.float16)
    copy_into(empty, np.empty((0, 5), np.float32))
    assert empty.shape == (0, 5)


@pytest.mark.parametrize("n", [5, 64, 65, 4097, (1 << 16) + 3])
def test_to_f32_every_half(n):
    every = np.arange(65536, dtype=np.uint32).astype(U16).view(np.float16)
    x = np.resize(every, n) if n < every.size else np.concatenate([every, every[: n - every.size]])
    got = to_f32(x.reshape(1, -1)[:, ::1])
    want = x.astype(np.float32).reshape(1, -1)
    assert got.dtype == np.float32 and got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def test_to_f32_strided_input():
    x = np.random.default_rng(4).standard_normal((40, 30)).astype(np.float16)[::3, 1::2]
    assert np.array_equal(to_f32(x), x.astype(np.float32))


def test_bfloat16_both_directions():
    import ml_dtypes

    bf = np.dtype(ml_dtypes.bfloat16)
    every = np.arange(65536, dtype=np.uint32).astype(U16).view(bf)
    got = to_f32(every[::-1].reshape(256, 256)[:, ::2])  # strided
    want = every[::-1].reshape(256, 256)[:, ::2].astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.integers(0, 2**32, size=70001, dtype=np.uint64).astype(np.uint32).view(np.float32), BOUNDARIES])
    out = np.empty(x.size, bf)
    copy_into(out, x)
    ref = x.astype(bf)
    nan = np.isnan(ref.astype(np.float32))
    assert np.array_equal(np.isnan(out.astype(np.float32)), nan)
    assert np.array_equal(out.view(U16)[~nan], ref.view(U16)[~nan])
