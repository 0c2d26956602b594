"""softmax / log_softmax rows on the NVIDIA backend: the row-wise rule table (which kernel each row
length gets, and that the compile set is exactly what the rules reach), then every kernel on rows
that select it: 16-bit mid rows (row_softmax_warp, with and without nc loads), short rows
(row_softmax_short); rows of 2048 / 2049 / 4096 / 4097 and odd lengths, 1-9 rows and 4096 rows,
contiguous and with row stride N + 3 (gap columns untouched), in place, -inf entries, an all -inf
row (NaN, as torch), second call bitwise equal."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cupy_with_env

import infiniop_py as iop
from infiniop_py import create_tensor_descriptor as D  # noqa: N812


def _rule(dt, mode, n, rows=1):
    from infiniop_py.reduce.rowwise import RowProblem, plan_row, vec_of

    return plan_row(RowProblem(dt, mode, n, rows, vec_of(dt)))


def test_warp_nc_rule():
    """16-bit softmax / log_softmax rows of 225-256 packs (N = 1800-2055): a warp per row with nc
    loads, one warp per block; longer and shorter rows take row_softmax_warp."""
    from infiniop_py.dtypes import DType

    nc = "softmax-warp-nc"
    assert _rule(DType.F16, "softmax", 4096)[0] == "softmax-warp" and _rule(DType.F16, "softmax", 2049)[0] == nc
    assert _rule(DType.F16, "log_softmax", 4097)[0] == "softmax-warp" and _rule(DType.F16, "log_softmax", 2048)[0] == nc
    assert _rule(DType.F16, "softmax", 2055)[0] == nc and _rule(DType.F16, "log_softmax", 2057)[0] == "softmax-warp"
    assert _rule(DType.F16, "softmax", 1799)[0] == "softmax-warp" and _rule(DType.F16, "softmax", 1800)[0] == nc
    assert _rule(DType.F32, "softmax", 2100)[0] == "row-cached" and _rule(DType.F16, "causal", 2048)[0] == "row-cached"
    launch = _rule(DType.BF16, "log_softmax", 2048, 4096)[1]
    want = ("row_softmax_warp<iop_bf16, RW_LOG_SOFTMAX, 8, 8, 0, 0, 1>", (4096,), (32, 1))
    assert (launch.kernel, launch.grid, launch.block) == want


def test_rowwise_compile_set_equals_reachable(fake_nvidia):
    """For every row-wise operator of the registry (its factory declares ``rows``), a sweep of
    row lengths (every pack count up to 1026, aligned or not, long rows), row counts and layouts
    (contiguous rows, the column kernel, rows of a causal mask) through RowwiseKernel on a stand-in
    sm_90 device requests exactly the kernels of the operator's compile list."""
    import types

    from infiniop_py.dtypes import itemsize
    from infiniop_py.reduce import rowwise
    from infiniop_py.registry import get_spec

    handle = types.SimpleNamespace(device_id=0)
    ops = [op for op in iop.list_ops() if getattr(get_spec(op).nvidia, "rows", None) is not None]
    assert {"softmax", "log_softmax", "causal_softmax", "cross_entropy", "cross_entropy_loss"} <= set(ops)
    for op in ops:
        fam = get_spec(op).nvidia.rows
        for dt in sorted(fam.dtypes):
            vec = 16 // itemsize(dt)
            lengths = {q * vec + r for q in range(1027) for r in (0, 1)} | {16384, 16385, 20000, 65536, 65537, 100000}
            lengths |= {2048 * vec, 2048 * vec + 1, 2049 * vec}
            for ti in fam.tis:
                for n in sorted(lengths - {0}):
                    for R in (3, 5000):
                        lay = rowwise.RowLayout(n, 1, 1, (R,), [[n], [n], [1]], collapse_rows=fam.mode != "causal")
                        rowwise.RowwiseKernel(handle, lay, dt, fam.mode, (0, 1, 2), ti=ti, loss_slot=0)
                lay = rowwise.RowLayout(100, 7, 7, (7,), [[1], [1], [1]])  # the dim is not the fastest
                rowwise.RowwiseKernel(handle, lay, dt, fam.mode, (0, 1, 2), ti=ti, loss_slot=0)
        compiled = {n for _, names in get_spec(op).nvidia.compile_units() for n in names}
        requested = set(fake_nvidia)
        assert requested == compiled, (op, sorted(requested - compiled)[:5], sorted(compiled - requested)[:5])
        fake_nvidia.clear()


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
def test_softmax_rows_nvidia_mid_rows(monkeypatch):
    cp = cupy_with_env(monkeypatch, {})
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
def test_softmax_rows_nvidia_mid_rows_4096(monkeypatch):
    """Full (4096, N): a grid of 4096 rows."""
    cp = cupy_with_env(monkeypatch, {})
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
def test_softmax_rows_nvidia_large_magnitudes(monkeypatch):
    """Rows around +-1000 and 30000 (f16): exp(v - m) must not lose the low bits of m * log2(e)
    (ShiftExp keeps them as hi + lo); a naive exp(v) overflows."""
    cp = cupy_with_env(monkeypatch, {})
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


def test_short_rule():
    from infiniop_py.dtypes import DType

    def lp(dt, mode, n):  # (lanes, packs per lane, warps per block, H) of row_softmax_short
        rule, launch = _rule(dt, mode, n)
        if rule != "softmax-short":
            return None
        lanes, packs, h = (int(a) for a in launch.kernel[:-1].split(", ")[2:])
        return lanes, packs, launch.block[1], h

    # f32 two packs per lane, 16-bit one; f32 rows of <= 512 packs (a warp each with 16 packs per
    # lane and one warp per block past 256), 16-bit <= 128
    assert lp(DType.F32, "softmax", 128) == (16, 2, 4, 0)
    assert lp(DType.F16, "log_softmax", 128) == (16, 1, 4, 0)
    assert lp(DType.BF16, "softmax", 17) == (4, 1, 4, 0)
    assert lp(DType.F32, "log_softmax", 1000) == (32, 8, 4, 0)
    assert lp(DType.F16, "softmax", 1000) == (32, 4, 4, 0) and lp(DType.BF16, "softmax", 1031) == (32, 4, 4, 0)
    assert lp(DType.F16, "softmax", 1032) is None and lp(DType.F32, "softmax", 2052) is None
    # f32 rows of 257-512 packs: packs from a 128-byte boundary (H = 8)
    assert lp(DType.F32, "softmax", 1028) == (32, 16, 1, 8) and lp(DType.F32, "log_softmax", 2051) == (32, 16, 1, 8)
    assert _rule(DType.F16, "softmax", 1032)[0] == "softmax-warp"
    assert lp(DType.F16, "causal", 128) is None and lp(DType.F64, "softmax", 128) is None
    assert lp(DType.F32, "softmax", 4096) is None and lp(DType.F16, "softmax", 32000) is None
    assert _rule(DType.F32, "softmax", 128, 100)[1].grid == (13,)  # 4 warps x 2 rows per warp


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
def test_softmax_short_rows_nvidia(monkeypatch):
    cp = cupy_with_env(monkeypatch, {})
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(31)
    shapes = ((1, 128), (2, 17), (3, 100), (4, 127), (5, 129), (6, 64), (7, 256), (8, 512), (9, 1000), (3, 33), (2, 1), (2, 1031))
    # f32 rows of 257-512 packs: a warp per row, 16 packs per lane (16-bit rows: other kernels)
    shapes += ((3, 1028), (4, 2048), (2, 2051), (5, 1501))
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


@pytest.mark.gpu
def test_softmax_short_rows_nvidia_4096_rows(monkeypatch):
    cp = cupy_with_env(monkeypatch, {})
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


@pytest.mark.gpu
def test_softmax_log_softmax_nvidia_warp_rows(monkeypatch):
    """row_softmax_warp and the kernels of the neighbouring rules on odd / even row
    lengths, contiguous and with row stride N + 3 (every row at another alignment), -inf
    entries, an all -inf row (NaN, as torch), in place, few rows; second call bitwise equal."""
    cp = cupy_with_env(monkeypatch, {})
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(11)
    for op in ("softmax", "log_softmax"):
        for R, N in ((1, 2049), (3, 3001), (5, 4097), (7, 1000), (4, 2048), (6, 4096), (9, 17), (2, 520), (2, 8192), (3, 8195)):
            for dt, npdt, tol in ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 2e-2)):
                x = _rows(rng, R, N).astype(npdt)
                for stride, inplace in ((N, False), (N + 3, False), (N, True), (N + 3, True)):
                    _run(cp, h, op, x, npdt, dt, stride, inplace, tol, f"{op} {R}x{N} {dt} stride {stride} inplace {inplace}")
