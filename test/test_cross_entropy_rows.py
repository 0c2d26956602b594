"""Cross entropy rows on the NVIDIA backend: ``row_lse`` (the row streamed once with an online
max / sum, nothing cached) under every switch, and the cached ``row_softmax`` it replaced
(``IOP_ROWWISE_LSE=0``). Rows of 9 ... 65537 elements, every float dtype, int32 / int64 labels
(some out of range: loss 0), rows unaligned to 16 bytes (odd view offsets), a row stride
past N, -inf entries, an all -inf row and a NaN row (NaN, as torch), maxima late in the row
(the running sum is rescaled), large magnitudes; the output's gaps are left alone, and a
second call is bitwise equal. cross_entropy_loss (the mean) runs through the same kernel."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cupy_with_env

import infiniop_py as iop
from infiniop_py import create_tensor_descriptor as D  # noqa: N812

LSE_ENVS = {
    "default": {},
    "cached": {"IOP_ROWWISE_LSE": "0"},
    "all": {"IOP_ROWWISE_LSE": "all"},
    "u2": {"IOP_ROWWISE_LSE_U": "2"},
    "u8": {"IOP_ROWWISE_LSE_U": "8"},
    "g32": {"IOP_ROWWISE_LSE": "all", "IOP_ROWWISE_LSE_G": "32"},
    "g128": {"IOP_ROWWISE_LSE": "all", "IOP_ROWWISE_LSE_G": "128"},
    "g64_u8": {"IOP_ROWWISE_LSE_G": "64", "IOP_ROWWISE_LSE_U": "8"},
    "g256_u2": {"IOP_ROWWISE_LSE_G": "256", "IOP_ROWWISE_LSE_U": "2"},
}


def test_lse_plan_rule(monkeypatch):
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce.rowwise import all_names, lse_kernel_name, lse_plan

    for k in ("IOP_ROWWISE_LSE", "IOP_ROWWISE_LSE_G", "IOP_ROWWISE_LSE_U"):
        monkeypatch.delenv(k, raising=False)
    # a warp per row from LSE_WARPS rows on; fewer rows: more threads per row (at most 256)
    assert lse_plan(DType.F16, "ce", 32000, 8192) == (32, 4) and lse_plan(DType.F32, "ce_loss", 32000, 4096) == (32, 4)
    assert lse_plan(DType.F16, "ce", 32000, 1024) == (128, 4) and lse_plan(DType.F32, "ce", 32000, 64) == (256, 4)
    assert lse_plan(DType.F16, "ce", 2048, 8) == (64, 4) and lse_plan(DType.F32, "ce", 1024, 8) == (64, 4)
    assert lse_plan(DType.F16, "ce", 2047, 8) is None and lse_plan(DType.F32, "ce", 1000) is None  # the cached kernel
    assert lse_plan(DType.F16, "softmax", 32000) is None and lse_plan(DType.F32, "causal", 4096) is None
    assert lse_kernel_name(DType.BF16, "ce", "long long", 4) in all_names(DType.BF16, "ce", "long long")
    assert lse_kernel_name(DType.F64, "ce_loss", "int", 8) in all_names(DType.F64, "ce_loss")
    monkeypatch.setenv("IOP_ROWWISE_LSE_U", "8")
    monkeypatch.setenv("IOP_ROWWISE_LSE_G", "64")
    assert lse_plan(DType.F16, "ce", 32000) == (64, 8)
    monkeypatch.setenv("IOP_ROWWISE_LSE_U", "3")  # not instantiated: the default
    monkeypatch.setenv("IOP_ROWWISE_LSE_G", "100")  # a power of two: rounded down
    assert lse_plan(DType.F16, "ce", 32000) == (64, 4)
    monkeypatch.setenv("IOP_ROWWISE_LSE", "0")
    assert lse_plan(DType.F16, "ce", 32000) is None
    monkeypatch.setenv("IOP_ROWWISE_LSE", "all")
    monkeypatch.delenv("IOP_ROWWISE_LSE_G")
    assert lse_plan(DType.F32, "ce", 128, 8) == (32, 4)  # 32 packs: no more threads than one batch each


def _want(a, lab):
    """float64 loss per row: logsumexp(row) - row[label], 0 where the label is out of range."""
    n = a.shape[-1]
    ok = (lab >= 0) & (lab < n)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = a.max(-1)
        lse = m + np.log(np.exp(a - m[:, None]).sum(-1))
        picked = np.take_along_axis(a, np.where(ok, lab, 0)[:, None], -1)[:, 0]
    return np.where(ok, lse - picked, 0.0)


def _rows(rng, rows, n):
    a = rng.uniform(-6, 6, size=(rows, n))
    a[:, 3::17] = -np.inf
    a[0, :] += np.linspace(0, 20, n)  # maxima late in the row: the running sum is rescaled
    if rows > 2:
        a[1] = -np.inf  # all -inf: NaN, as torch
    if rows > 3:
        a[2, n // 3] = np.nan
    if rows > 4:
        a[3] = rng.uniform(-1, 1, n) * 3e4  # large magnitudes (finite in f16 too)
    return a


def _labels(rng, rows, n):
    lab = rng.integers(0, n, size=rows)
    if rows > 5:
        lab[4], lab[5] = -100, n
    return lab


def _types():
    import ml_dtypes

    return (
        (iop.float32, np.float32, 1e-5),
        (iop.float64, np.float64, 1e-12),
        (iop.float16, np.float16, 2e-3),
        (iop.bfloat16, ml_dtypes.bfloat16, 2e-2),
    )


def _run(cp, h, x, lab, npdt, dt, tdt, stride, xoff, tol, tag):
    R, N = x.shape
    es = np.dtype(npdt).itemsize
    want = _want(x.astype(np.float64), lab)
    d = iop.create_descriptor("cross_entropy", h, D((R,), (2,), dt), D((R, N), (stride, 1), dt), D((R,), None, tdt))
    buf = np.full(R * stride + 8, 7, npdt)
    buf[xoff : xoff + R * stride].reshape(R, stride)[:, :N] = x
    xb = cp.asarray(buf)
    xd = cp.lib.stride_tricks.as_strided(xb[xoff:], (R, N), (stride * es, es))
    tb = cp.asarray(lab.astype(np.int32 if tdt == iop.int32 else np.int64))
    yb = cp.asarray(np.full(2 * R, 5, npdt))
    yd = yb[::2]
    d.calculate(None, yd, xd, tb)
    cp.cuda.get_current_stream().synchronize()
    full = cp.asnumpy(yb)
    assert np.all(full[1::2].astype(np.float64) == 5), tag  # gaps untouched
    got = full[::2].astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)), tag
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol, err_msg=tag)
    assert np.array_equal(cp.asnumpy(xb).view(np.uint8), buf.view(np.uint8)), tag  # x untouched
    d.calculate(None, yd, xd, tb)
    cp.cuda.get_current_stream().synchronize()
    assert np.array_equal(cp.asnumpy(yb).view(np.uint8), full.view(np.uint8)), tag


@pytest.mark.gpu
@pytest.mark.parametrize("env", list(LSE_ENVS.values()), ids=list(LSE_ENVS))
def test_cross_entropy_rows_nvidia(monkeypatch, env):
    cp = cupy_with_env(monkeypatch, env)
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(31)
    shapes = ((3, 9), (7, 100), (6, 1000), (9, 2049), (5, 4100), (8, 33001), (6, 65537))
    for R, N in shapes:
        for dt, npdt, tol in _types():
            x = _rows(rng, R, N).astype(npdt)
            lab = _labels(rng, R, N)
            for stride, xoff, tdt in ((N, 0, iop.int64), (N + 3, 1, iop.int32), (N, 3, iop.int32)):
                tag = f"{R}x{N} {dt} stride {stride} offset {xoff} {tdt}"
                _run(cp, h, x, lab, npdt, dt, tdt, stride, xoff, tol, tag)


@pytest.mark.gpu
@pytest.mark.parametrize("env", [LSE_ENVS["default"], LSE_ENVS["cached"]], ids=["default", "cached"])
def test_cross_entropy_loss_rows_nvidia(monkeypatch, env):
    """cross_entropy_loss (class dim 1 of (B, V), mean over the labels in range) on wide rows."""
    cp = cupy_with_env(monkeypatch, env)
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(37)
    for B, V in ((64, 32000), (33, 4097)):
        for dt, npdt, tol in _types():
            a = rng.uniform(-6, 6, size=(B, V))
            lab = _labels(rng, B, V)
            x = a.astype(npdt)
            ok = (lab >= 0) & (lab < V)
            want = _want(x.astype(np.float64), lab)[ok].mean()
            d = iop.create_descriptor("cross_entropy_loss", h, D((), None, dt), D((B, V), None, dt), D((B,), None, iop.int64))
            ws = cp.empty(max(1, d.workspace_size), dtype=cp.uint8)
            y = cp.full((), 5, npdt)
            d.calculate(ws, y, cp.asarray(x), cp.asarray(lab))
            got = float(cp.asnumpy(y).astype(np.float64))
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{B}x{V} {dt}")


def test_tuning_switch_not_a_number(monkeypatch):
    """A tuning switch that is not a number is a BAD_PARAM error naming the variable (read when
    a plan is made, so at descriptor create)."""
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce.rowwise import lse_plan, pipe_plan

    monkeypatch.setenv("IOP_ROWWISE_LSE_G", "wide")
    with pytest.raises(iop.InfiniopError, match="IOP_ROWWISE_LSE_G") as e:
        lse_plan(DType.F16, "ce", 32000, 8192)
    assert e.value.status == iop.Status.BAD_PARAM
    monkeypatch.setenv("IOP_ROWWISE_PIPE", "1")
    monkeypatch.setenv("IOP_ROWWISE_PIPE_RPW", "1.5x")
    with pytest.raises(iop.InfiniopError, match="IOP_ROWWISE_PIPE_RPW"):
        pipe_plan(DType.F16, "softmax", 4096)
    monkeypatch.setenv("IOP_ROWWISE_PIPE_RPW", "1.5")  # a float switch takes a float
    assert pipe_plan(DType.F16, "softmax", 4096)[4] == 1.5
