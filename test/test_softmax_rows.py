"""Round 8B (issue 4): softmax / log_softmax mid rows on the NVIDIA backend, every variant of
``row_softmax_wpipe`` (rows per warp with the next row loaded during the write pass, two warps
per row, cache hints) and the default ``row_softmax_warp``; rows of 2048 / 2049 / 4096 / 4097
and odd lengths, 1-9 rows and 4096 rows, contiguous and with row stride N + 3 (gap columns
untouched), in place, -inf entries, an all -inf row (NaN, as torch), second call bitwise equal."""

from __future__ import annotations

import numpy as np
import pytest

import infiniop_py as iop
from infiniop_py import create_tensor_descriptor as D  # noqa: N812

PIPE = {"IOP_ROWWISE_PIPE": "1"}
ENVS = {
    "default": {},
    "warp0": {"IOP_ROWWISE_WARP": "0"},
    "pipe": PIPE,
    "pipe_rpw1.35": {**PIPE, "IOP_ROWWISE_PIPE_RPW": "1.35"},
    "pipe_rpw3_cs": {**PIPE, "IOP_ROWWISE_PIPE_RPW": "3", "IOP_ROWWISE_PIPE_H": "4"},
    "pipe_nc": {**PIPE, "IOP_ROWWISE_PIPE_H": "9"},
    "pipe_ef": {**PIPE, "IOP_ROWWISE_PIPE_H": "3"},
    "pipe_cs1": {**PIPE, "IOP_ROWWISE_PIPE_H": "12"},
    "split": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "8"},
    "split_rpw2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_RPW": "2"},
    "split_rpw3": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_RPW": "3"},
    "pipe0": {"IOP_ROWWISE_PIPE": "0"},
    "pipe0_w1": {"IOP_ROWWISE_PIPE": "0", "IOP_ROWWISE_WARPS": "1"},
    "w2": {"IOP_ROWWISE_WARPS": "2"},
    "split_w2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "8", "IOP_ROWWISE_WARPS": "2"},
    "split_nc": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "9"},
    "nc_w1": {**PIPE, "IOP_ROWWISE_PIPE_H": "9", "IOP_ROWWISE_WARPS": "1"},
}


def test_pipe_plan_rule(monkeypatch):
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce.rowwise import all_names, pipe_kernel_name, pipe_plan

    # default: two warps per row for unaligned rows of 257-512 packs, nc loads and one warp
    # per block for rows of 225-256 packs, else row_softmax_warp
    s2, nc = (8, 8, 2, 8, 1.0, 4), (8, 8, 1, 9, 1.0, 1)
    assert pipe_plan(DType.F16, "softmax", 4096) is None and pipe_plan(DType.F16, "softmax", 2049) == nc
    assert pipe_plan(DType.BF16, "log_softmax", 4097) == s2 and pipe_plan(DType.F16, "log_softmax", 2048) == nc
    assert pipe_plan(DType.F16, "softmax", 4103) == s2 and pipe_plan(DType.F16, "softmax", 4105) is None
    assert pipe_plan(DType.F16, "softmax", 2055) == nc and pipe_plan(DType.F16, "softmax", 2057) == s2
    assert pipe_plan(DType.F16, "softmax", 1799) is None and pipe_plan(DType.F16, "softmax", 1800) == nc
    assert pipe_plan(DType.F16, "log_softmax", 1000) is None
    assert pipe_plan(DType.F32, "softmax", 4097) is None and pipe_plan(DType.F16, "causal", 4097) is None
    assert pipe_kernel_name(DType.F16, "softmax", 8, 8, 2, 8) in all_names(DType.F16, "softmax")
    monkeypatch.setenv("IOP_ROWWISE_PIPE", "0")
    assert pipe_plan(DType.F16, "softmax", 4097) is None and pipe_plan(DType.F16, "softmax", 2048) is None
    monkeypatch.setenv("IOP_ROWWISE_PIPE", "1")
    assert pipe_plan(DType.F16, "softmax", 4096) == (16, 4, 1, 0, 2.0, 4)
    assert pipe_plan(DType.BF16, "log_softmax", 2049) == (8, 6, 1, 0, 2.0, 4)
    assert pipe_plan(DType.F32, "softmax", 2048) is None and pipe_plan(DType.F16, "causal", 2048) is None
    monkeypatch.setenv("IOP_ROWWISE_PIPE_S", "2")
    assert pipe_plan(DType.F16, "softmax", 4097) == (8, 6, 2, 0, 2.0, 4)
    monkeypatch.setenv("IOP_ROWWISE_PIPE_H", "8")
    assert pipe_plan(DType.F16, "softmax", 2048) == (4, 12, 2, 8, 1.0, 4)
    assert pipe_kernel_name(DType.F16, "softmax", 16, 4, 1, 0) in all_names(DType.F16, "softmax")


def _gpu(monkeypatch, env):
    from conftest import gpu_available

    if not gpu_available():
        pytest.skip("needs an NVIDIA GPU with CuPy")
    import cupy

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return cupy


def _want(x, op):
    r = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = r.max(-1, keepdims=True)
        ls = r - m - np.log(np.exp(r - m).sum(-1, keepdims=True))
    return ls if op == "log_softmax" else np.exp(ls)


def _run(cp, h, op, x, npdt, dt, stride, inplace, tol, tag, check_repeat=True):
    R, N = x.shape
    want = _want(x, op)
    sh, st = (R, N), (stride, 1)
    d = iop.create_descriptor(op, h, D(sh, st, dt), D(sh, st, dt), dim=-1)
    buf = np.full((R, stride), 7, npdt)
    buf[:, :N] = x
    xb = cp.asarray(buf.ravel())
    xd = cp.lib.stride_tricks.as_strided(xb, sh, (stride * 2, 2))
    if inplace:
        yb, yd = xb, xd
    else:
        yb = cp.asarray(np.full(R * stride, 5, npdt))
        yd = cp.lib.stride_tricks.as_strided(yb, sh, (stride * 2, 2))
    d.calculate(None, yd, xd)
    cp.cuda.get_current_stream().synchronize()
    out = cp.asnumpy(yb).reshape(R, stride)
    got = out[:, :N].astype(np.float64)
    if stride > N:  # gap columns untouched
        assert np.all(out[:, N:].astype(np.float64) == (7 if inplace else 5)), tag
    assert np.array_equal(np.isnan(got), np.isnan(want)), tag
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), tag
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol, err_msg=tag)
    if check_repeat and not inplace:
        d.calculate(None, yd, xd)
        cp.cuda.get_current_stream().synchronize()
        assert np.array_equal(cp.asnumpy(yb).view(np.uint16), out.ravel().view(np.uint16)), tag


@pytest.mark.gpu
@pytest.mark.parametrize("env", list(ENVS.values()), ids=list(ENVS))
def test_softmax_rows_nvidia_variants(monkeypatch, env):
    cp = _gpu(monkeypatch, env)
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(23)
    shapes = ((1, 2049), (2, 2048), (3, 4097), (4, 4096), (5, 3001), (6, 2050), (7, 4103), (8, 1500), (9, 4095))
    for op in ("softmax", "log_softmax"):
        for R, N in shapes:
            for dt, npdt, tol in ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 2e-2)):
                a = rng.uniform(-8, 8, size=(R, N))
                a[:, 5::11] = -np.inf
                if R > 2:
                    a[1] = -np.inf
                if R > 4:  # half of a row -inf (the two halves of a split row differ)
                    a[3, : N // 2] = -np.inf
                    a[4, N // 2 :] = -np.inf
                x = a.astype(npdt)
                for stride, inplace in ((N, False), (N + 3, False), (N, True), (N + 3, True)):
                    _run(cp, h, op, x, npdt, dt, stride, inplace, tol, f"{op} {R}x{N} {dt} {stride} {inplace}")


@pytest.mark.gpu
@pytest.mark.parametrize("env", list(ENVS.values()), ids=list(ENVS))
def test_softmax_rows_nvidia_variants_4096_rows(monkeypatch, env):
    """Full (4096, N): every warp loops over several rows (the grid is R / RPW slots)."""
    cp = _gpu(monkeypatch, env)
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(29)
    for op, N, dt, npdt, tol in (
        ("softmax", 2048, iop.float16, np.float16, 2e-3),
        ("log_softmax", 2049, iop.bfloat16, ml_dtypes.bfloat16, 2e-2),
        ("softmax", 4097, iop.bfloat16, ml_dtypes.bfloat16, 2e-2),
        ("log_softmax", 4096, iop.float16, np.float16, 2e-3),
    ):
        a = rng.uniform(-8, 8, size=(4096, N))
        a[:, 7::13] = -np.inf
        a[4095] = -np.inf
        x = a.astype(npdt)
        for stride, inplace in ((N, False), (N + 3, False), (N + 3, True)):
            _run(cp, h, op, x, npdt, dt, stride, inplace, tol, f"{op} 4096x{N} {dt} {stride} {inplace}")
