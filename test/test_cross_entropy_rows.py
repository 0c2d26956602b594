"""Cross entropy rows on the NVIDIA backend: ``row_lse`` (rule ce-stream: the row streamed once
with an online max / sum, nothing cached) and the cached ``row_softmax`` of shorter rows. Rows of
9 ... 65537 elements, every float dtype, int32 / int64 labels
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


def test_lse_plan_rule():
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce.rowwise import RowProblem, plan_row, vec_of

    def lse(dt, mode, n, rows=1 << 30):  # (threads per row, packs per batch) of row_lse, or None
        rule, launch = plan_row(RowProblem(dt, mode, n, rows, vec_of(dt)))
        return (launch.block[0], int(launch.kernel[:-1].split(", ")[-1])) if rule == "ce-stream" else None

    # a warp per row from 4096 rows on; fewer rows: more threads per row (at most 256)
    assert lse(DType.F16, "ce", 32000, 8192) == (32, 4) and lse(DType.F32, "ce_loss", 32000, 4096) == (32, 4)
    assert lse(DType.F16, "ce", 32000, 1024) == (128, 4) and lse(DType.F32, "ce", 32000, 64) == (256, 4)
    assert lse(DType.F16, "ce", 2048, 8) == (64, 4) and lse(DType.F32, "ce", 1024, 8) == (64, 4)
    assert lse(DType.F16, "ce", 2047, 8) is None and lse(DType.F32, "ce", 1000) is None  # the cached kernel
    assert lse(DType.F16, "softmax", 32000) is None and lse(DType.F32, "causal", 4096) is None
    launch = plan_row(RowProblem(DType.BF16, "ce", 32000, 8192, 8, ti="long long"))[1]
    assert launch.kernel == "row_lse<iop_bf16, RW_CE, long long, 4>" and launch.grid == (1024,) and launch.block == (32, 8)


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
def test_cross_entropy_rows_nvidia(monkeypatch):
    cp = cupy_with_env(monkeypatch, {})
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
def test_cross_entropy_loss_rows_nvidia(monkeypatch):
    """cross_entropy_loss (class dim 1 of (B, V), mean over the labels in range) on wide rows and
    rows of the cached kernel."""
    cp = cupy_with_env(monkeypatch, {})
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(37)
    for B, V in ((64, 32000), (33, 4097), (9, 1000)):
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
