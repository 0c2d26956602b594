"""tanh in f16: the exp/rcp + odd polynomial form (ops/tanh/halfmath.py) against the float64 tanh
correctly rounded to f16, for every finite f16 input (f32 emulation here, the kernel on each device)."""

import importlib

import numpy as np
import pytest
from test_pointwise import run

from infiniop_py import DType


def _halfmath():
    from infiniop_py.registry import get_spec

    get_spec("tanh")  # discovery makes the operators importable as infiniop_ops
    return importlib.import_module("infiniop_ops.tanh.halfmath")


def _all_finite_f16():
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return x[np.isfinite(x)]


def _ordered(a: np.ndarray) -> np.ndarray:
    bits = a.view(np.uint16).astype(np.int64)
    mag = bits & 0x7FFF
    return np.where(bits >> 15 == 1, -mag, mag)


def test_tanh_fit_reproduces():
    hm = _halfmath()
    c, err = hm.fit()
    assert err < 5e-8, err
    np.testing.assert_allclose(c, hm.P_COEF, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("ex2_ulp,rcp_ulp", [(0, 0), (2, 1), (-2, -1), (2, -1), (-2, 1)])
def test_tanh_f16_emulation_rounds_correctly(ex2_ulp, rcp_ulp):
    hm = _halfmath()
    x = _all_finite_f16()
    got = hm.emulate(x.astype(np.float32), ex2_ulp, rcp_ulp).astype(np.float16)
    want = np.tanh(x.astype(np.float64)).astype(np.float16)
    assert np.array_equal(_ordered(got), _ordered(want))


def test_tanh_f16_special_values(device):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.55, -0.55, 0.5498, 20.0, -20.0, 6e-8], np.float16)
    got = run("tanh", device, {"output": (x.shape, DType.F16)}, {"input": x})
    want = np.tanh(x.astype(np.float64)).astype(np.float16)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


def test_tanh_every_f16_value(device):
    x = _all_finite_f16()
    got = run("tanh", device, {"output": (x.shape, DType.F16)}, {"input": x})
    want = np.tanh(x.astype(np.float64)).astype(np.float16)
    dist = np.abs(_ordered(np.asarray(got, np.float16)) - _ordered(want))
    bad = np.nonzero(dist > 1)[0]
    assert bad.size == 0, f"tanh f16 on {device}: {bad.size} inputs off by > 1 ulp, e.g. " + ", ".join(
        f"x={float(x[i])!r}: got {float(got[i])!r}, want {float(want[i])!r}" for i in bad[:6]
    )
