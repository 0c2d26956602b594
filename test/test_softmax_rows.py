"""Round 8B (issue 4): softmax / log_softmax mid rows on the NVIDIA backend, every variant of
``row_softmax_wpipe`` (rows per warp with the next row loaded during the write pass, two warps
per row, cache hints) and the default ``row_softmax_warp``; rows of 2048 / 2049 / 4096 / 4097
and odd lengths, 1-9 rows and 4096 rows, contiguous and with row stride N + 3 (gap columns
untouched), in place, -inf entries, an all -inf row (NaN, as torch), second call bitwise equal."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cupy_with_env

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
    "warp_al": {"IOP_ROWWISE_WARP_AL": "1"},
    "warp_al_pipe0": {"IOP_ROWWISE_WARP_AL": "1", "IOP_ROWWISE_PIPE": "0"},
    "warp_sh1": {"IOP_ROWWISE_WARP_SH": "1"},  # exponentials as one FFMA and one ex2 (ShiftExp) or not
    "warp_sh0": {"IOP_ROWWISE_WARP_SH": "0"},
    "warp_sh1_pipe0": {"IOP_ROWWISE_WARP_SH": "1", "IOP_ROWWISE_PIPE": "0"},
}


def test_pipe_plan_rule(monkeypatch):
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce.rowwise import all_names, pipe_kernel_name, pipe_plan

    # default: nc loads and one warp per block for rows of 225-256 packs, else row_softmax_warp
    # (two warps per row only under the switches)
    nc = (8, 8, 1, 9, 1.0, 1)
    assert pipe_plan(DType.F16, "softmax", 4096) is None and pipe_plan(DType.F16, "softmax", 2049) == nc
    assert pipe_plan(DType.F16, "log_softmax", 4097) is None and pipe_plan(DType.F16, "log_softmax", 2048) == nc
    assert pipe_plan(DType.BF16, "log_softmax", 4097) is None and pipe_plan(DType.F16, "softmax", 4097) is None
    assert pipe_plan(DType.F16, "log_softmax", 4103) is None and pipe_plan(DType.F16, "log_softmax", 4105) is None
    assert pipe_plan(DType.F16, "softmax", 2055) == nc and pipe_plan(DType.F16, "log_softmax", 2057) is None
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


def _want(x, op):
    r = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = r.max(-1, keepdims=True)
        ls = r - m - np.log(np.exp(r - m).sum(-1, keepdims=True))
    return ls if op == "log_softmax" else np.exp(ls)


def _rows(rng, rows, n):
    """Random rows with -inf entries, an all -inf row (NaN, as torch) and, from 5 rows on, rows
    whose first / second half is -inf (the two halves of a split row differ)."""
    a = rng.uniform(-8, 8, size=(rows, n))
    a[:, 5::11] = -np.inf
    if rows > 2:
        a[1] = -np.inf
    if rows > 4:
        a[3, : n // 2] = -np.inf
        a[4, n // 2 :] = -np.inf
    return a


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
    cp = cupy_with_env(monkeypatch, env)
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(23)
    shapes = ((1, 2049), (2, 2048), (3, 4097), (4, 4096), (5, 3001), (6, 2050), (7, 4103), (8, 1500), (9, 4095))
    for op in ("softmax", "log_softmax"):
        for R, N in shapes:
            for dt, npdt, tol in ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 2e-2)):
                x = _rows(rng, R, N).astype(npdt)
                for stride, inplace in ((N, False), (N + 3, False), (N, True), (N + 3, True)):
                    _run(cp, h, op, x, npdt, dt, stride, inplace, tol, f"{op} {R}x{N} {dt} {stride} {inplace}")


@pytest.mark.gpu
@pytest.mark.parametrize("env", list(ENVS.values()), ids=list(ENVS))
def test_softmax_rows_nvidia_variants_4096_rows(monkeypatch, env):
    """Full (4096, N): every warp loops over several rows (the grid is R / RPW slots)."""
    cp = cupy_with_env(monkeypatch, env)
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


@pytest.mark.gpu
@pytest.mark.parametrize("env", [{}, {"IOP_ROWWISE_WARP_SH": "1"}, {"IOP_ROWWISE_WARP_SH": "0"}], ids=["default", "sh1", "sh0"])
def test_softmax_rows_nvidia_large_magnitudes(monkeypatch, env):
    """Rows around +-1000 and 30000 (f16): exp(v - m) must not lose the low bits of m * log2(e)
    (ShiftExp keeps them as hi + lo); a naive exp(v) overflows."""
    cp = cupy_with_env(monkeypatch, env)
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(41)
    for base, types in (
        (1000.0, ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 2e-2))),
        (-1000.0, ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 2e-2))),
        (30000.0, ((iop.float16, np.float16, 2e-3),)),
    ):
        for op in ("softmax", "log_softmax"):
            for R, N in ((3, 4097), (4, 4096), (2, 1500), (2, 8192)):
                for dt, npdt, tol in types:
                    x = (base + rng.uniform(-40, 40, size=(R, N))).astype(npdt)
                    for stride, inplace in ((N, False), (N + 3, False)):
                        _run(cp, h, op, x, npdt, dt, stride, inplace, tol, f"{op} {R}x{N} {dt} base {base} stride {stride}")


# Round 9C (issue 4): short rows, row_softmax_short (L lanes per row, P packs per lane).
SHORT_ENVS = {
    "default": {},
    "short0": {"IOP_ROWWISE_SHORT": "0"},
    "short_all": {"IOP_ROWWISE_SHORT": "all"},
    "L4": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_L": "4"},
    "L8_w1": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_L": "8", "IOP_ROWWISE_SHORT_W": "1"},
    "L16_w2": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_L": "16", "IOP_ROWWISE_SHORT_W": "2"},
    "L32": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_L": "32"},
    "p1": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_P": "1"},
    "p4": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_P": "4"},
    "nc": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_H": "1"},
    "align128": {"IOP_ROWWISE_SHORT": "all", "IOP_ROWWISE_SHORT_L": "32", "IOP_ROWWISE_SHORT_H": "8"},
}


def test_short_plan_rule(monkeypatch):
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce.rowwise import all_names, short_kernel_name, short_plan, warp_packs

    for k in ("IOP_ROWWISE_SHORT", "IOP_ROWWISE_SHORT_L", "IOP_ROWWISE_SHORT_P", "IOP_ROWWISE_SHORT_W", "IOP_ROWWISE_SHORT_H"):
        monkeypatch.delenv(k, raising=False)
    # default: f32 two packs per lane, 16-bit one; f32 rows of <= 512 packs (a warp each with 16
    # packs per lane and one warp per block past 256), 16-bit <= 128
    assert short_plan(DType.F32, "softmax", 128) == (16, 2, 4, 0)
    assert short_plan(DType.F16, "log_softmax", 128) == (16, 1, 4, 0)
    assert short_plan(DType.BF16, "softmax", 17) == (4, 1, 4, 0)
    assert short_plan(DType.F32, "log_softmax", 1000) == (32, 8, 4, 0)  # 8 packs per lane: 16-byte boundary
    assert short_plan(DType.F16, "softmax", 1000) == (32, 4, 4, 0) and short_plan(DType.BF16, "softmax", 1031) == (32, 4, 4, 0)
    assert short_plan(DType.F16, "softmax", 1032) is None and short_plan(DType.F32, "softmax", 2052) is None
    # f32 rows of 257-512 packs: packs from a 128-byte boundary (H = 8)
    assert short_plan(DType.F32, "softmax", 1028) == (32, 16, 1, 8) and short_plan(DType.F32, "log_softmax", 2051) == (
        32,
        16,
        1,
        8,
    )
    assert warp_packs(DType.F16, "softmax", 1032) == 8 and warp_packs(DType.F16, "log_softmax", 1032) == 8
    assert short_plan(DType.F32, "softmax", 3) is None  # no whole pack (the scalar path anyway)
    assert short_plan(DType.F16, "causal", 128) is None and short_plan(DType.F64, "softmax", 128) is None
    assert short_plan(DType.F32, "softmax", 4096) is None and short_plan(DType.F16, "softmax", 32000) is None
    assert short_kernel_name(DType.F32, "softmax", 16, 2) in all_names(DType.F32, "softmax")
    assert short_kernel_name(DType.BF16, "log_softmax", 32, 8, 1) in all_names(DType.BF16, "log_softmax")
    monkeypatch.setenv("IOP_ROWWISE_SHORT", "0")
    assert short_plan(DType.F32, "softmax", 128) is None
    monkeypatch.setenv("IOP_ROWWISE_SHORT", "all")
    assert short_plan(DType.F16, "softmax", 1032) == (32, 8, 4, 0)
    assert short_plan(DType.F32, "softmax", 2052) is None  # 513 packs: more than 32 x 16
    assert short_plan(DType.F16, "softmax", 2048) == (32, 8, 4, 0)  # 16-bit: at most 8 packs per lane
    monkeypatch.setenv("IOP_ROWWISE_SHORT_P", "2")
    assert short_plan(DType.F16, "softmax", 128) == (8, 2, 4, 0)
    monkeypatch.setenv("IOP_ROWWISE_SHORT_L", "4")
    assert short_plan(DType.F32, "softmax", 64) == (4, 4, 4, 0) and short_plan(DType.F32, "softmax", 128) is None
    monkeypatch.setenv("IOP_ROWWISE_SHORT_L", "8")
    monkeypatch.setenv("IOP_ROWWISE_SHORT_W", "1")
    monkeypatch.setenv("IOP_ROWWISE_SHORT_H", "1")
    assert short_plan(DType.F32, "softmax", 128) == (8, 4, 1, 1)


def _run_any(cp, h, op, x, npdt, dt, stride, inplace, tol, tag, xoff=0, yoff=None):
    """Like ``_run`` for any element size, with the x (and y) view starting ``xoff`` (``yoff``)
    elements into its buffer (odd offsets: every row unaligned)."""
    R, N = x.shape
    yoff = xoff if yoff is None else yoff
    es = np.dtype(npdt).itemsize
    want = _want(x, op)
    sh, st = (R, N), (stride, 1)
    d = iop.create_descriptor(op, h, D(sh, st, dt), D(sh, st, dt), dim=-1)
    buf = np.full(R * stride + 8, 7, npdt)
    buf[xoff : xoff + R * stride].reshape(R, stride)[:, :N] = x
    xb = cp.asarray(buf)
    xd = cp.lib.stride_tricks.as_strided(xb[xoff:], sh, (stride * es, es))
    if inplace:
        yb, yd, yoff = xb, xd, xoff
    else:
        yb = cp.asarray(np.full(R * stride + 8, 5, npdt))
        yd = cp.lib.stride_tricks.as_strided(yb[yoff:], sh, (stride * es, es))
    d.calculate(None, yd, xd)
    cp.cuda.get_current_stream().synchronize()
    full = cp.asnumpy(yb)
    out = full[yoff : yoff + R * stride].reshape(R, stride)
    got = out[:, :N].astype(np.float64)
    fill = 7 if inplace else 5
    if stride > N:  # gap columns untouched
        assert np.all(out[:, N:].astype(np.float64) == fill), tag
    assert np.all(full[:yoff].astype(np.float64) == fill) and np.all(full[yoff + R * stride :].astype(np.float64) == fill), tag
    assert np.array_equal(np.isnan(got), np.isnan(want)), tag
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), tag
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol, err_msg=tag)
    if not inplace:
        d.calculate(None, yd, xd)
        cp.cuda.get_current_stream().synchronize()
        assert np.array_equal(cp.asnumpy(yb).view(np.uint8), full.view(np.uint8)), tag


def _short_types():
    import ml_dtypes

    return (
        (iop.float32, np.float32, 2e-5),
        (iop.float16, np.float16, 2e-3),
        (iop.bfloat16, ml_dtypes.bfloat16, 2e-2),
    )


@pytest.mark.gpu
@pytest.mark.parametrize("env", list(SHORT_ENVS.values()), ids=list(SHORT_ENVS))
def test_softmax_short_rows_nvidia(monkeypatch, env):
    cp = cupy_with_env(monkeypatch, env)
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(31)
    shapes = ((1, 128), (2, 17), (3, 100), (4, 127), (5, 129), (6, 64), (7, 256), (8, 512), (9, 1000), (3, 33), (2, 1), (2, 1031))
    # f32 rows of 257-512 packs: a warp per row, 16 packs per lane (16-bit rows: other kernels)
    shapes += ((3, 1028), (4, 2048), (2, 2051), (5, 1501))
    if env not in (
        SHORT_ENVS["default"],
        SHORT_ENVS["short_all"],
        SHORT_ENVS["nc"],
        SHORT_ENVS["align128"],
    ):  # the switches: fewer modules to compile
        shapes = ((2, 17), (4, 127), (5, 129), (9, 1000))
    for op in ("softmax", "log_softmax"):
        for R, N in shapes:
            for dt, npdt, tol in _short_types():
                x = _rows(rng, R, N).astype(npdt)
                for stride, inplace, xoff, yoff in (
                    (N, False, 0, 0),
                    (N + 3, False, 0, 0),
                    (N, True, 0, 0),
                    (N + 3, True, 1, 1),
                    (N, False, 1, 1),
                    (N + 3, False, 3, 0),
                ):
                    tag = f"{op} {R}x{N} {dt} stride {stride} inplace {inplace} off {xoff}/{yoff}"
                    _run_any(cp, h, op, x, npdt, dt, stride, inplace, tol, tag, xoff, yoff)


SHORT_ENVS_4096 = {k: SHORT_ENVS[k] for k in ("default", "short0", "short_all", "p4", "nc", "align128")}


@pytest.mark.gpu
@pytest.mark.parametrize("env", list(SHORT_ENVS_4096.values()), ids=list(SHORT_ENVS_4096))
def test_softmax_short_rows_nvidia_4096_rows(monkeypatch, env):
    cp = cupy_with_env(monkeypatch, env)
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(37)
    for N in (128, 1000, 129, 2049):
        for op in ("softmax", "log_softmax"):
            for dt, npdt, tol in _short_types():
                a = rng.uniform(-8, 8, size=(4096, N))
                a[:, 7::13] = -np.inf
                a[4095] = -np.inf
                x = a.astype(npdt)
                for stride, inplace, off in ((N, False, 0), (N + 3, True, 1)):
                    tag = f"{op} 4096x{N} {dt} stride {stride} inplace {inplace} off {off}"
                    _run_any(cp, h, op, x, npdt, dt, stride, inplace, tol, tag, off)


WARP_ENVS = [{}, {"IOP_ROWWISE_WARP": "all"}, {"IOP_ROWWISE_WARP": "0"}]


@pytest.mark.gpu
@pytest.mark.parametrize("env", WARP_ENVS, ids=["default", "warp_all", "warp0"])
def test_softmax_log_softmax_nvidia_warp_rows(monkeypatch, env):
    """row_softmax_warp (and the block kernel it replaces, under warp0) on odd / even row
    lengths, contiguous and with row stride N + 3 (every row at another alignment), -inf
    entries, an all -inf row (NaN, as torch), in place, few rows; second call bitwise equal."""
    cp = cupy_with_env(monkeypatch, env)
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(11)
    for op in ("softmax", "log_softmax"):
        for R, N in ((1, 2049), (3, 3001), (5, 4097), (7, 1000), (4, 2048), (6, 4096), (9, 17), (2, 520), (2, 8192), (3, 8195)):
            for dt, npdt, tol in ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 2e-2)):
                x = _rows(rng, R, N).astype(npdt)
                for stride, inplace in ((N, False), (N + 3, False), (N, True), (N + 3, True)):
                    _run(cp, h, op, x, npdt, dt, stride, inplace, tol, f"{op} {R}x{N} {dt} stride {stride} inplace {inplace}")
