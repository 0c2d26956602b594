"""Bad input and API details of the reduction / row-wise family (the generic cases live in test_ops)."""

import numpy as np
import pytest
from conftest import create_status, cupy_with_env, status_of

import infiniop_py as iop
from infiniop_py import Status
from infiniop_py.reduce.rowwise import RowLaunch, RowProblem, plan_row, vec_of

D = iop.create_tensor_descriptor


@pytest.fixture
def h():
    return iop.create_handle("cpu")


def test_sum_dims_checks(h):
    x = D((4, 5, 6), None, iop.float32)
    assert create_status("sum", h, D((4,), None, iop.float32), x, dims=[1, 1]) == Status.BAD_PARAM
    assert create_status("sum", h, D((4,), None, iop.float32), x, dims=[3]) == Status.BAD_PARAM
    assert create_status("sum", h, D((4, 6), None, iop.float32), x, dims=[1], keepdim=True) == Status.BAD_TENSOR_SHAPE
    assert create_status("sum", h, D((4, 6), None, iop.float16), x, dims=[1]) == Status.BAD_TENSOR_DTYPE
    assert create_status("sum", h, D((4, 6), (0, 1), iop.float32), x, dims=[1]) == Status.BAD_TENSOR_STRIDES
    assert create_status("sum", h, D((), None, iop.int32), D((3,), None, iop.int32)) == Status.BAD_TENSOR_DTYPE


def test_sum_negative_dims_and_all(h):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = iop.create_descriptor("sum", h, D((2, 4), None, iop.float32), D(x.shape, None, iop.float32), dims=[-2])
    y = np.empty((2, 4), np.float32)
    d.calculate(None, y, x)
    np.testing.assert_array_equal(y, x.sum(1))
    d2 = iop.create_descriptor("sum", h, D((), None, iop.float32), D(x.shape, None, iop.float32), dims=[])
    y0 = np.empty((), np.float32)
    d2.calculate(None, y0, x)
    assert y0 == x.sum()


def test_sum_cstyle_repeats_dims(h):
    x = np.ones((3, 5), np.float32)
    xd, yd = D((3, 5), None, iop.float32), D((3, 1), None, iop.float32)
    d = iop.infiniopCreateSumDescriptor(h, yd, xd, [1], 1, True)
    y = np.empty((3, 1), np.float32)
    iop.infiniopSum(d, None, 0, y, x, [1], 1, True, None)
    np.testing.assert_array_equal(y, 5.0)
    assert status_of(lambda: iop.infiniopSum(d, None, 0, y, x, [0], 1, True, None)) == Status.BAD_PARAM
    assert status_of(lambda: iop.infiniopSum(d, None, 0, y, x, [1], 1, False, None)) == Status.BAD_PARAM
    assert status_of(lambda: iop.infiniopCreateSumDescriptor(h, yd, xd, [1], 2, True)) == Status.BAD_PARAM
    iop.infiniopDestroySumDescriptor(d)


def test_reduce_max_mean_checks(h):
    x = D((4, 5), None, iop.float32)
    assert create_status("reduce_max", h, D((4,), None, iop.float32), x, dim=2) == Status.BAD_PARAM
    assert create_status("reduce_mean", h, D((4, 5), None, iop.float32), x, dim=1) == Status.BAD_TENSOR_SHAPE
    assert (
        create_status("reduce_max", h, D((4,), None, iop.float32), D((4, 0), None, iop.float32), dim=1) == Status.BAD_TENSOR_SHAPE
    )
    assert create_status("reduce_mean", h, D((4,), None, iop.int32), D((4, 5), None, iop.int32), dim=1) == Status.BAD_TENSOR_DTYPE
    iop.create_descriptor("reduce_max", h, D((4,), None, iop.int32), D((4, 5), None, iop.int32), dim=1).destroy()


def test_mean_of_empty_extent_is_nan(h):
    d = iop.create_descriptor("reduce_mean", h, D((3,), None, iop.float32), D((3, 0), None, iop.float32), dim=1)
    y = np.zeros(3, np.float32)
    d.calculate(None, y, np.empty((3, 0), np.float32))
    assert np.isnan(y).all()


def test_softmax_checks(h):
    x = D((4, 5), None, iop.float32)
    assert create_status("softmax", h, x, x, dim=2) == Status.BAD_PARAM
    assert create_status("log_softmax", h, D((4, 6), None, iop.float32), x) == Status.BAD_TENSOR_SHAPE
    assert create_status("softmax", h, D((), None, iop.float32), D((), None, iop.float32)) == Status.BAD_TENSOR_SHAPE
    assert create_status("softmax", h, D((4, 5), (1, 0), iop.float32), x) == Status.BAD_TENSOR_STRIDES


def test_softmax_all_neg_inf_row_is_nan(h):
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    y = np.empty_like(x)
    iop.create_descriptor("softmax", h, D((2, 2)), D((2, 2))).calculate(None, y, x)
    assert np.isnan(y[0]).all() and y[1].tolist() == [1.0, 0.0]


def test_causal_softmax_checks(h):
    assert create_status("causal_softmax", h, D((5, 4)), D((5, 4))) == Status.BAD_TENSOR_SHAPE
    assert create_status("causal_softmax", h, D((5,)), D((5,))) == Status.BAD_TENSOR_SHAPE
    x = np.zeros((2, 4), np.float32)
    y = np.empty_like(x)
    iop.create_descriptor("causal_softmax", h, D((2, 4)), D((2, 4))).calculate(None, y, x)
    np.testing.assert_allclose(y, [[1 / 3, 1 / 3, 1 / 3, 0], [0.25] * 4])


def test_cross_entropy_checks_and_bad_labels(h):
    x = D((4, 5), None, iop.float32)
    assert create_status("cross_entropy", h, D((4,)), x, D((4,), None, iop.float32)) == Status.BAD_TENSOR_DTYPE
    assert create_status("cross_entropy", h, D((5,)), x, D((5,), None, iop.int64)) == Status.BAD_TENSOR_SHAPE
    d = iop.create_descriptor("cross_entropy", h, D((4,)), x, D((4,), None, iop.int32))
    y = np.empty(4, np.float32)
    d.calculate(None, y, np.zeros((4, 5), np.float32), np.array([0, -100, 5, 2**31 - 1], np.int32))
    np.testing.assert_allclose(y, [np.log(5), 0, 0, 0], rtol=1e-6)


def test_cross_entropy_loss_checks(h):
    x = D((4, 5), None, iop.float32)
    assert create_status("cross_entropy_loss", h, D((2,)), x, D((4,), None, iop.int64)) == Status.BAD_TENSOR_SHAPE
    assert create_status("cross_entropy_loss", h, D(()), x, D((5,), None, iop.int64)) == Status.BAD_TENSOR_SHAPE
    d = iop.create_descriptor("cross_entropy_loss", h, D(()), x, D((4,), None, iop.int64))
    loss = np.empty((), np.float32)
    d.calculate(
        d.workspace_size and np.empty(d.workspace_size, np.uint8), loss, np.zeros((4, 5), np.float32), np.array([1, -100, 9, 2])
    )
    np.testing.assert_allclose(loss, np.log(5), rtol=1e-6)


def test_cross_entropy_loss_backward_checks(h):
    x = D((4, 5), None, iop.float32)
    assert create_status("cross_entropy_loss_backward", h, x, x, D((4, 5), None, iop.float16)) == Status.BAD_TENSOR_DTYPE
    assert create_status("cross_entropy_loss_backward", h, D((4, 5), (0, 1)), x, x) == Status.BAD_TENSOR_STRIDES


def _row(dt, mode, n, rows=1):
    """(rule id, launch) of the row-wise planner for ``rows`` contiguous rows of ``n``."""
    return plan_row(RowProblem(dt, mode, n, rows, vec_of(dt)))


def test_row_softmax_rule():
    from infiniop_py.dtypes import DType

    # 16-bit rows of more than 2048 vectors (past the hybrid kernel's range) cache raw packs
    assert _row(DType.F16, "log_softmax", 100000) == ("row-raw", _row(DType.F16, "log_softmax", 100000)[1])
    assert _row(DType.BF16, "log_softmax", 100000)[1].kernel == "row_softmax<iop_bf16, RW_LOG_SOFTMAX, 8, 8, int, 1>"
    assert _row(DType.F16, "causal", 2049 * 8)[1].kernel == "row_softmax<iop_half, RW_CAUSAL, 8, 8, int, 1>"
    assert _row(DType.F16, "causal", 2048)[1].kernel == "row_softmax<iop_half, RW_CAUSAL, 8, 4, int, 0>"
    assert _row(DType.F32, "causal", 100000)[0] == "row-cached"


def test_reduce_plan_kinds():
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce import plan_reduce

    full = plan_reduce((8192, 8192), (8192, 1), (0, 0), (0, 1), DType.F32, 132)
    assert full.kind == "rows" and full.S > 1 and full.workspace == full.S * 4 and full.vec == 4
    last = plan_reduce((8192, 8192), (8192, 1), (1, 0), (1,), DType.F16, 132)
    assert last.kind == "rows" and last.S == 1 and last.vec == 8
    col = plan_reduce((8192, 8192), (8192, 1), (0, 1), (0,), DType.BF16, 132)
    assert col.kind == "tile" and col.S == 1 and col.workspace == 0
    multi = plan_reduce((4, 512, 896), (458752, 896, 1), (0, 0, 1), (0, 1), DType.F32, 132)
    assert multi.kind == "tile" and multi.M == 896 and multi.L == 2048
    small = plan_reduce((4, 512, 896), (458752, 896, 1), (0, 0, 0), (0, 1, 2), DType.F32, 132)
    assert small.kind == "rows" and small.S > 1 and small.last == 1
    assert full.last == 1  # one launch at every size (measured faster on the H200)
    transposed = plan_reduce((40, 300), (1, 40), (0, 0), (0, 1), DType.F32, 132)
    assert transposed.kind == "rows" and transposed.vec == 4  # collapses to one contiguous run


def _reduce_sweep():
    """(shape, x strides, kept output strides, axes): every size class of the planner's rules, over
    the last, first, all, all-but-first and outer-and-last dims, row-major, column-major, gapped
    (every stride doubled) and padded rows."""
    ms, ns = (1, 2, 3, 7, 32, 33, 200, 1100, 4096), (1, 2, 7, 16, 64, 200, 257, 300, 513, 1000, 2048, 4097, 65537)
    shapes = [(m, n) for m in ms for n in ns] + [(2, 3, 4097), (64, 3, 64, 8), (4, 512, 896), (1, 1 << 22), (70001,)]
    for shape in shapes:
        nd = len(shape)
        c = [1] * nd
        for i in range(nd - 2, -1, -1):
            c[i] = c[i + 1] * shape[i + 1]
        f = [1] * nd
        for i in range(1, nd):
            f[i] = f[i - 1] * shape[i - 1]
        padded = [s + (s > 1) for s in c]
        for axes in {(nd - 1,), (0,), tuple(range(nd)), tuple(range(1, nd)), (0, nd - 1)}:
            kept, ys, acc = [i for i in range(nd) if i not in axes], {}, 1
            for i in reversed(kept):
                ys[i], acc = acc, acc * shape[i]
            for xs in (c, f, [2 * s for s in c], padded):
                yield shape, tuple(xs), [ys.get(i, 0) for i in range(nd)], axes


def test_reduction_compile_set_equals_reachable(monkeypatch):
    """For every reduction of the registry (its factory declares ``reduction``), the sweep through
    ReduceKernel on a stand-in sm_90 device (132 SMs) requests exactly its compile list."""
    import types

    import infiniop_py.reduce as red
    from infiniop_py.cuda import runtime
    from infiniop_py.registry import get_spec

    requested: set = set()

    def get_module(source, names, device_id):
        requested.update(names)
        return types.SimpleNamespace(ptr={n: i + 1 for i, n in enumerate(names)})

    monkeypatch.setattr(red, "get_module", get_module)
    monkeypatch.setattr(red, "Launch", lambda *args, **kw: None)
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    monkeypatch.setattr(runtime, "properties", lambda device_id=0: {"sm_count": 132})
    handle = types.SimpleNamespace(device_id=0)
    ops = [op for op in iop.list_ops() if getattr(get_spec(op).nvidia, "reduction", None) is not None]
    assert {"sum", "reduce_max", "reduce_mean"} <= set(ops)
    for op in ops:
        fam = get_spec(op).nvidia.reduction
        for dt in sorted(fam.dtypes):
            for shape, xs, ys, axes in _reduce_sweep():
                red.ReduceKernel(handle, D(shape, xs, dt), ys, axes, fam.op)
        compiled = {n for _, names in get_spec(op).nvidia.compile_units() for n in names}
        assert requested == compiled, (op, sorted(requested - compiled)[:5], sorted(compiled - requested)[:5])
        requested.clear()


# -- NVIDIA: every plan kind, repeated calls, two streams -------------------------------------
GPU_PLAN_CASES = [
    ("sum", (70001,), (0,)),  # full: split + last-block finish (or finish launch)
    ("sum", (5, 6007), (0, 1)),  # full, outer split
    ("reduce_max", (3, 20011), (1,)),  # 3 rows split, 3 tickets
    ("reduce_mean", (4, 512, 896), (1,)),  # column tile / split
    ("sum", (4, 512, 896), (0, 1)),
    ("sum", (64, 3, 64, 8), (0, 2)),  # tile over two reduced dims
    ("reduce_mean", (1000, 36), (0,)),
]


@pytest.mark.gpu
def test_sum_reduce_max_reduce_mean_nvidia_plans(monkeypatch):
    """Split rows finishing in one launch or two, column tiles, repeated calls on two streams."""
    cp = cupy_with_env(monkeypatch, {})
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(1)
    streams = [cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)]
    for op, shape, axes in GPU_PLAN_CASES:
        for dt, npdt, tol in ((iop.float32, np.float32, 1e-4), (iop.float16, np.float16, 2e-3)):
            x = rng.standard_normal(shape).astype(npdt)
            a = x.astype(np.float64)
            want = a.sum(axes) if op == "sum" else a.max(axes) if op == "reduce_max" else a.mean(axes)
            attrs = {"dims": list(axes)} if op == "sum" else {"dim": axes[0]}
            d = iop.create_descriptor(op, h, D(want.shape, None, dt), D(shape, None, dt), **attrs)
            ws = cp.empty(max(1, d.workspace_size), cp.uint8)
            xd = cp.asarray(x)
            outs = []
            for rep in range(4):  # tickets reset between calls; alternate streams
                y = cp.full(want.shape, cp.nan, npdt)
                cp.cuda.Device().synchronize()  # the fill ran on the current stream, not on streams[*]
                d.calculate(ws, y, xd, stream=streams[rep % 2])
                streams[rep % 2].synchronize()
                outs.append(cp.asnumpy(y))
            scale = np.sqrt(np.prod([shape[i] for i in axes])) if op != "reduce_max" else 1.0
            np.testing.assert_allclose(
                outs[0].astype(np.float64), want, rtol=tol, atol=tol * scale, err_msg=f"{op} {shape} {axes} {dt}"
            )
            for o in outs[1:]:  # deterministic
                assert o.tobytes() == outs[0].tobytes(), (op, shape, axes, dt)
            # x at an odd element offset (unaligned packs: the scalar fallback plans, row heads)
            xo = cp.asarray(np.concatenate([np.zeros(1, npdt), x.ravel()]))[1:].reshape(shape)
            y = cp.full(want.shape, cp.nan, npdt)
            d.calculate(ws, y, xo)
            cp.cuda.get_current_stream().synchronize()
            np.testing.assert_allclose(cp.asnumpy(y).astype(np.float64), want, rtol=tol, atol=tol * scale)


def test_reduce_rows_16bit_plan_rule():
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce import plan_reduce

    rows = plan_reduce((8192, 8192), (8192, 1), (1, 0), (1,), DType.F16, 132)
    assert rows.rules == ("rows16-warp", "one-pass") and rows.block == (32, 4) and rows.grid == (2048, 1)
    assert rows.kernel == "reduce_rows<iop_half, SumOp, 0, 8, 0, 0>"
    full = plan_reduce((8192, 8192), (8192, 1), (0, 0), (0, 1), DType.BF16, 132, "max")
    assert full.rules == ("rows-packed", "sweep-flagged") and full.block == (256, 1) and full.S == 528 and full.last == 3
    assert full.kernel == "reduce_rows<iop_bf16, MaxOp, 0, 8, 3, 1>"
    assert plan_reduce((8192, 8192), (8192, 1), (1, 0), (1,), DType.F32, 132).kernel.startswith("reduce_rows<")
    assert plan_reduce((64, 8192), (8192, 1), (1, 0), (1,), DType.F16, 132).block == (64, 1)  # few rows


def test_reduce_full_plans():
    """Full reductions: 16-bit rows are swept grid-stride and finish from flagged slots; f32 / f64
    keep contiguous chunks and the fence ticket; outer splits and many rows finish otherwise."""
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce import plan_reduce

    def full(dt, shape=(8192, 8192), strides=(8192, 1)):
        return plan_reduce(shape, strides, (0, 0), (0, 1), dt, 132)

    for dt in (DType.F16, DType.BF16):
        p = full(dt)
        assert p.rules[1] == "sweep-flagged" and p.last == 3 and p.workspace == 0 and not p.finish
    p = full(DType.F32)
    assert p.rules[1] == "last-block" and p.last == 1 and p.workspace == 528 * 4 and p.kernel.endswith(", 4, 1, 0>")
    assert full(DType.F64).last == 1 and full(DType.I32).last == 1
    # not one contiguous row per output (outer split): no sweep
    assert plan_reduce((8192, 64), (128, 1), (0, 0), (0, 1), DType.F16, 132).rules[1] == "last-block"
    # more than 32 split rows: a second launch, a warp per output
    many = plan_reduce((33, 65537), (65537, 1), (1, 0), (1,), DType.F16, 132)
    assert many.rules[1] == "sweep" and many.finish == "reduce_finish<iop_half, SumOp, 0, 0>" and many.finish_block == (256,)
    # scalar rows of <= 512 elements, 8 rows per block: a block per output finishes
    few = plan_reduce((300,), (2,), (0,), (0,), DType.F32, 132)
    assert few.rules == ("rows-short", "finish-block") and few.finish.endswith(", 1>")


# -- NVIDIA: reduce_rows on f16 / bf16 rows (raw 32-bit words on the 16-byte path) -----------
H16_CASES = [
    ("sum", (3, 20011), (1,)),  # split rows, last-block finish
    ("reduce_max", (3, 20011), (1,)),
    ("reduce_mean", (37, 4099), (1,)),  # head, batches, remainder loop, tail
    ("reduce_max", (64, 8192), (1,)),  # the 8192 row plan (64 threads, or a warp per row)
    ("reduce_mean", (1100, 2051), (1,)),  # warp-per-row rule (>= 8 * 132 rows), odd rows
    ("sum", (64, 8192), (1,)),
    ("sum", (70001,), (0,)),  # full: split + last block
    ("reduce_max", (70001,), (0,)),
    ("sum", (5, 6007), (0, 1)),  # full, outer split
    ("sum", (9000001,), (0,)),  # full, long enough for the batched grid-stride loop (ILV)
    ("reduce_max", (9000001,), (0,)),
    ("reduce_mean", (2, 1000003), (1,)),  # two split rows (two tickets, two slot columns)
]


def _two_calls(cp, d, ws, xin, out_shape, npdt):
    """Two calls of ``d`` on ``xin``, each into a fresh output poisoned with 7: host copies."""
    outs = []
    for _ in range(2):
        y = cp.asarray(np.full(out_shape, 7, npdt))
        d.calculate(ws, y, xin)
        cp.cuda.get_current_stream().synchronize()
        outs.append(cp.asnumpy(y))
    return outs


@pytest.mark.gpu
def test_sum_reduce_max_reduce_mean_nvidia_rows16(monkeypatch):
    cp = cupy_with_env(monkeypatch, {})
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(7)
    for op, shape, axes in H16_CASES:
        for dt, npdt, tol in ((iop.float16, np.float16, 2e-3), (iop.bfloat16, ml_dtypes.bfloat16, 1.6e-2)):
            x = (rng.standard_normal(shape) * 4).astype(npdt)
            if op == "reduce_max":  # NaN propagates; -inf and a row of equal maxima elsewhere
                flat = x.reshape(-1)
                flat[min(5, flat.size - 1)] = np.nan
                flat[-3] = -np.inf
            a = x.astype(np.float64)
            want = a.sum(axes) if op == "sum" else a.max(axes) if op == "reduce_max" else a.mean(axes)
            attrs = {"dims": list(axes)} if op == "sum" else {"dim": axes[0]}
            d = iop.create_descriptor(op, h, D(want.shape, None, dt), D(shape, None, dt), **attrs)
            ws = cp.empty(max(1, d.workspace_size), cp.uint8)
            scale = np.sqrt(np.prod([shape[i] for i in axes])) if op != "reduce_max" else 1.0
            xd = cp.asarray(x)
            xo = cp.asarray(np.concatenate([np.zeros(3, npdt), x.ravel()]))[3:].reshape(shape)
            for xin in (xd, xo):  # aligned, and at an odd element offset (unaligned heads)
                outs = _two_calls(cp, d, ws, xin, want.shape, npdt)
                assert outs[0].tobytes() == outs[1].tobytes(), (op, shape, dt)  # deterministic
                got = outs[0].astype(np.float64)
                np.testing.assert_allclose(
                    got, want, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=f"{op} {shape} {axes} {dt}"
                )


def test_reduce_rows_warp_plan_rule():
    """Short contiguous f32 / f16 / bf16 rows (<= 256 packs) take reduce_rows_warp: a warp per row,
    NP loads per lane (the fewest that hold the row), 4 rows per block."""
    from infiniop_py.dtypes import DType
    from infiniop_py.reduce import plan_reduce

    def last(shape, dt):
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        return plan_reduce(shape, tuple(strides), tuple(strides[:-1]) + (0,), (len(shape) - 1,), dt, 132)

    def np_(p):
        return int(p.kernel.split(", ")[-2]) if p.rules == ("rows-warp",) else 0

    for dt, n in ((DType.F32, 8), (DType.F16, 4), (DType.BF16, 4)):
        p = last((4, 512, 896), dt)
        assert np_(p) == n and p.block == (32, 4) and p.grid == (512, 1) and p.S == 1 and p.workspace == 0
    assert last((4, 512, 896), DType.F16).kernel == "reduce_rows_warp<iop_half, SumOp, 0, 4, 1>"
    assert last((64, 896), DType.F16).grid == (16, 1)
    assert np_(last((1024, 2048), DType.F16)) == 8  # 256 packs: the largest row
    assert np_(last((2048, 1024), DType.F32)) == 8
    assert np_(last((2048, 1025), DType.F32)) == 0 and np_(last((2048, 2049), DType.BF16)) == 0
    assert last((8192, 8192), DType.F16).rules[0] == "rows16-warp" and last((8192, 8192), DType.F16).block == (32, 4)
    assert np_(last((8192, 512), DType.F16)) == 2 and np_(last((100, 17), DType.F32)) == 1
    assert np_(last((100, 15), DType.F16)) == 0  # < 2 packs: the scalar path
    assert np_(last((4, 512, 896), DType.F64)) == 0 and np_(last((4, 512, 896), DType.I32)) == 0
    full = plan_reduce((4, 512, 896), (458752, 896, 1), (0, 0, 0), (0, 1, 2), DType.F16, 132)
    assert np_(full) == 0  # one long row
    assert plan_reduce((4, 512, 896), (458752, 896, 1), (896, 0, 1), (1,), DType.F16, 132).kind != "rows"
    mx = plan_reduce((4, 512, 896), (458752, 896, 1), (512, 1, 0), (2,), DType.F16, 132, "max")
    assert mx.kernel == "reduce_rows_warp<iop_half, MaxOp, 0, 4, 0>"  # the loads' dependency only for sums


# -- NVIDIA: reduce_rows_warp (round 9D) under its switches ---------------------------------
# (x shape, x view (slices into a larger base, or None), axes): rows of 17 .. 2049 elements,
# 1 .. 2051 rows, strided kept dims, odd element offsets of every row
RW_CASES = [
    ((4, 512, 896), None, (2,)),
    ((2051, 896), None, (1,)),
    ((1, 896), None, (1,)),
    ((3, 897), None, (1,)),
    ((37, 1000), None, (1,)),
    ((5, 1024), None, (1,)),
    ((9, 2048), None, (1,)),
    ((7, 2049), None, (1,)),
    ((33, 513), None, (1,)),
    ((64, 17), None, (1,)),
    ((65, 255), None, (1,)),
    ((129, 512), None, (1,)),
    ((300, 64), None, (1,)),
    ((5, 16), None, (1,)),
    ((3, 33), None, (1,)),
    ((1100, 2048), None, (1,)),  # round 7's warp rule (>= 8 rows per SM): now reduce_rows_warp
    ((6, 5, 897), ((6, 10, 901), (slice(None), slice(None, None, 2), slice(1, 898))), (2,)),  # strided kept, odd rows
    ((4, 3, 896), ((4, 3, 1000), (slice(None), slice(None), slice(8, 904))), (2,)),  # aligned rows, gaps
]


@pytest.mark.gpu
def test_sum_reduce_max_reduce_mean_nvidia_rows_warp(monkeypatch):
    cp = cupy_with_env(monkeypatch, {})
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(9)
    dts = (
        (iop.float32, np.float32, 1e-5),
        (iop.float16, np.float16, 2e-3),
        (iop.bfloat16, ml_dtypes.bfloat16, 1.6e-2),
    )
    for shape, view, axes in RW_CASES:
        for op in ("sum", "reduce_max", "reduce_mean"):
            for dt, npdt, tol in dts:
                bshape = view[0] if view else shape
                base = (rng.standard_normal(bshape) * 4).astype(npdt)
                if op == "reduce_max":  # NaN in one row, -inf in another, an all -inf row
                    b = base.reshape(-1, bshape[-1])
                    b[0, min(5, bshape[-1] - 1)] = np.nan
                    b[-1, -3] = -np.inf
                    if b.shape[0] > 2:
                        b[1, :] = -np.inf
                x = base[view[1]] if view else base
                a = x.astype(np.float64)
                want = a.sum(axes) if op == "sum" else a.max(axes) if op == "reduce_max" else a.mean(axes)
                attrs = {"dims": list(axes)} if op == "sum" else {"dim": axes[0]}
                xs = tuple(s // x.itemsize for s in x.strides)
                d = iop.create_descriptor(op, h, D(want.shape, None, dt), D(shape, xs, dt), **attrs)
                ws = cp.empty(max(1, d.workspace_size), cp.uint8)
                scale = np.sqrt(shape[-1]) if op != "reduce_max" else 1.0
                bd = cp.asarray(base)
                # the same view at an odd element offset: every row start moves by 3 elements
                bo = cp.asarray(np.concatenate([np.zeros(3, npdt), base.ravel()]))[3:].reshape(bshape)
                for bin_ in (bd, bo):
                    xin = bin_[view[1]] if view else bin_
                    outs = _two_calls(cp, d, ws, xin, want.shape, npdt)
                    tag = f"{op} {shape} {view and view[0]} {dt}"
                    assert outs[0].tobytes() == outs[1].tobytes(), tag  # deterministic
                    got = outs[0].astype(np.float64)
                    if op == "reduce_max":
                        assert np.array_equal(np.isnan(got), np.isnan(want)), tag
                        assert np.array_equal(np.isneginf(got), np.isneginf(want)), tag
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=tag)


@pytest.mark.gpu
def test_reduce_rows_warp_strided_output(monkeypatch):
    """reduce_rows_warp writes through the output strides (a kept dim of stride 2, keepdim)."""
    cp = cupy_with_env(monkeypatch, {})
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5, 896)).astype(np.float16)
    want = x.astype(np.float64).sum(2)
    d = iop.create_descriptor("sum", h, D((6, 5), (10, 2), iop.float16), D(x.shape, None, iop.float16), dims=[2])
    yb = cp.full((6, 10), 7, cp.float16)
    d.calculate(None, yb[:, ::2], cp.asarray(x))
    cp.cuda.get_current_stream().synchronize()
    out = cp.asnumpy(yb).astype(np.float64)
    np.testing.assert_allclose(out[:, ::2], want, rtol=2e-3, atol=2e-3 * 30)
    assert np.all(out[:, 1::2] == 7)


@pytest.mark.gpu
def test_random_sample_nvidia_greedy():
    from conftest import gpu_available

    if not gpu_available():
        pytest.skip("needs an NVIDIA GPU with CuPy")
    import cupy as cp

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(2)
    for n in (1, 7, 4099, 50001, 151936, 300007):
        for dt, npdt in ((iop.float32, np.float32), (iop.float16, np.float16)):
            x = rng.integers(-3, 3, size=n + 1).astype(npdt)  # ties: the lowest index wins
            d = iop.create_descriptor("random_sample", h, D((), None, iop.int64), D((n,), None, dt))
            ws = cp.empty(max(1, d.workspace_size), cp.uint8)
            for off in (0, 1):  # aligned and unaligned logits
                xv = cp.asarray(x)[off : off + n]
                r = cp.full((), -1, cp.int64)
                d.calculate(ws, r, xv, 0.0, 0.9, 50, 0.8)
                cp.cuda.get_current_stream().synchronize()
                assert int(r) == int(np.argmax(x[off : off + n])), (n, dt, off)
            if n == 151936:  # repeated calls on two streams (per-stream tickets reset)
                streams = [cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)]
                for rep in range(4):
                    r = cp.full((), -1, cp.int64)
                    xv = cp.asarray(x)[:n]
                    cp.cuda.Device().synchronize()  # fill and upload ran on the current stream
                    d.calculate(ws, r, xv, 0.0, 0.9, 50, 0.8, stream=streams[rep % 2])
                    streams[rep % 2].synchronize()
                    assert int(r) == int(np.argmax(x[:n])), (n, dt, rep)


@pytest.mark.gpu
def test_softmax_log_softmax_nvidia_row_variants(monkeypatch):
    """The row kernels of mid and long rows (warp, hybrid, raw 16-bit and f32 caches), aligned and
    at an odd element offset, with -inf entries."""
    cp = cupy_with_env(monkeypatch, {})
    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(3)
    for op in ("softmax", "log_softmax"):
        for shape in ((3, 2049), (5, 4097), (4, 20000), (2, 32000), (2, 70001)):
            for dt, npdt, tol in ((iop.float16, np.float16, 2e-3), (iop.bfloat16, None, 2e-2), (iop.float32, np.float32, 1e-5)):
                a = rng.uniform(-8, 8, size=shape)
                a[:, ::7] = -np.inf
                if npdt is None:
                    import ml_dtypes

                    npdt = ml_dtypes.bfloat16
                x = a.astype(npdt)
                r = x.astype(np.float64)
                m = r.max(-1, keepdims=True)
                ls = r - m - np.log(np.exp(r - m).sum(-1, keepdims=True))
                want = ls if op == "log_softmax" else np.exp(ls)
                d = iop.create_descriptor(op, h, D(shape, None, dt), D(shape, None, dt), dim=-1)
                for off in (0, 1):
                    xd = cp.asarray(np.concatenate([np.zeros(off, npdt), x.ravel()]))[off:].reshape(shape)
                    yd = cp.asarray(np.full(shape[0] * shape[1] + off, np.nan, npdt))[off:].reshape(shape)
                    d.calculate(None, yd, xd)
                    cp.cuda.get_current_stream().synchronize()
                    got = cp.asnumpy(yd).astype(np.float64)
                    fin = np.isfinite(want)
                    assert np.array_equal(np.isneginf(got), np.isneginf(want)), (op, shape, dt, off)
                    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol, err_msg=f"{op} {shape} {dt} {off}")


def test_row_softmax_warp_rule():
    from infiniop_py.dtypes import DType

    def packs(dt, mode, n):
        rule, launch = _row(dt, mode, n)
        return int(launch.kernel.split(", ")[2]) if rule == "softmax-warp" else 0

    assert packs(DType.F16, "softmax", 1500) == 8 and packs(DType.BF16, "log_softmax", 4097) == 16
    assert _row(DType.F16, "softmax", 2049)[1].kernel == "row_softmax_warp<iop_half, RW_SOFTMAX, 8, 8, 0, 0, 1>"
    assert packs(DType.F16, "log_softmax", 1000) == 0 and _row(DType.F16, "log_softmax", 1000)[0] == "softmax-short"
    assert packs(DType.F16, "softmax", 4104) == 0 and packs(DType.F16, "softmax", 7175) == 0
    assert packs(DType.F16, "softmax", 8192) == 32 and packs(DType.F16, "softmax", 8200) == 0
    assert packs(DType.F32, "softmax", 2100) == 0 and packs(DType.F16, "causal", 2048) == 0
    # softmax: 128-byte boundary at 16 packs per lane (one row per block), ShiftExp at every P
    assert _row(DType.F16, "softmax", 4096, 64)[1] == RowLaunch(
        "row_softmax_warp<iop_half, RW_SOFTMAX, 16, 5, 1, 1>", (64,), (32, 1), 1
    )
    assert _row(DType.F16, "softmax", 1500)[1].kernel == "row_softmax_warp<iop_half, RW_SOFTMAX, 8, 8, 0, 1>"
    # log_softmax: ShiftExp only at 32 packs per lane
    assert _row(DType.F16, "log_softmax", 4096)[1].kernel == "row_softmax_warp<iop_half, RW_LOG_SOFTMAX, 16, 5, 1>"
    assert _row(DType.F16, "log_softmax", 1500)[1].kernel == "row_softmax_warp<iop_half, RW_LOG_SOFTMAX, 8, 8>"
    assert _row(DType.BF16, "log_softmax", 8192, 64)[1] == RowLaunch(
        "row_softmax_warp<iop_bf16, RW_LOG_SOFTMAX, 32, 3, 0, 1>", (16,), (32, 4), 1
    )


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "dim"), [((600, 700), -1), ((600, 700), 0), ((3, 300, 400), 1)])
def test_softmax_cpu_threaded_chunks(op, shape, dim):
    """Inputs large enough for the CPU thread split (rows stay whole), also in place."""
    import torch

    h = iop.create_handle("cpu")
    desc = iop.create_tensor_descriptor(shape, None, iop.float32)
    d = iop.create_descriptor(op, h, desc, desc, dim=dim)
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    want = getattr(torch, op)(torch.from_numpy(x).double(), dim).numpy()
    y = np.full_like(x, np.nan)
    d.calculate(None, y, x)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    d.calculate(None, x, x)
    np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_softmax_log_softmax_nvidia_hyb_rows(monkeypatch):
    """row_softmax_hyb (row cached in registers + shared memory) on long and short rows, odd
    lengths, contiguous and with row stride N + 3 (every row at another alignment), in place,
    -inf entries, an all -inf row (NaN), large magnitudes; f32 / f16 / bf16; second call
    bitwise equal."""
    cp = cupy_with_env(monkeypatch, {})
    import ml_dtypes

    h = iop.create_handle("nvidia")
    rng = np.random.default_rng(12)
    types = (
        (iop.float32, np.float32, 2e-5, 1e4),
        (iop.float16, np.float16, 2e-3, 3e4),
        (iop.bfloat16, ml_dtypes.bfloat16, 2e-2, 1e5),
    )
    for op in ("softmax", "log_softmax"):
        for R, N, big in (
            (3, 32000, False),
            (2, 32001, False),
            (4, 20000, True),
            (3, 40007, False),
            (2, 17, False),
            (3, 2049, True),
        ):
            for dt, npdt, tol, hi in types:
                sz = np.dtype(npdt).itemsize
                a = rng.uniform(-hi, hi, size=(R, N)) if big else rng.uniform(-8, 8, size=(R, N))
                a[:, 5::11] = -np.inf
                if big:
                    a[:, 1] = a[:, 2] = hi
                if R > 2:
                    a[1] = -np.inf
                x = a.astype(npdt)
                r = x.astype(np.float64)
                with np.errstate(invalid="ignore", divide="ignore"):
                    m = r.max(-1, keepdims=True)
                    ls = (r - m) - np.log(np.exp(r - m).sum(-1, keepdims=True))
                want = ls if op == "log_softmax" else np.exp(ls)
                for stride, inplace in ((N, False), (N + 3, False), (N, True), (N + 3, True)):
                    sh = (R, N)
                    st = (stride, 1)
                    d = iop.create_descriptor(op, h, D(sh, st, dt), D(sh, st, dt), dim=-1)
                    buf = np.full((R, stride), 7, npdt)
                    buf[:, :N] = x
                    xb = cp.asarray(buf.ravel())
                    xd = cp.lib.stride_tricks.as_strided(xb, sh, (stride * sz, sz))
                    if inplace:
                        yb, yd = xb, xd
                    else:
                        yb = cp.asarray(np.full(R * stride, 5, npdt))
                        yd = cp.lib.stride_tricks.as_strided(yb, sh, (stride * sz, sz))
                    d.calculate(None, yd, xd)
                    cp.cuda.get_current_stream().synchronize()
                    out = cp.asnumpy(yb).reshape(R, stride)
                    got = out[:, :N].astype(np.float64)
                    tag = f"{op} {R}x{N} {dt} stride {stride} inplace {inplace} big {big}"
                    if stride > N:  # gap columns untouched
                        assert np.all(out[:, N:].astype(np.float64) == (7 if inplace else 5)), tag
                    assert np.array_equal(np.isnan(got), np.isnan(want)), tag
                    fin = np.isfinite(want)
                    assert np.array_equal(np.isneginf(got), np.isneginf(want)), tag
                    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol, err_msg=tag)
                    if not inplace:
                        d.calculate(None, yd, xd)
                        cp.cuda.get_current_stream().synchronize()
                        assert np.array_equal(cp.asnumpy(yb).view(np.uint8), out.ravel().view(np.uint8)), tag


def test_softmax_hyb_rule():
    from infiniop_py.dtypes import DType

    assert _row(DType.F32, "softmax", 32000, 7)[1] == RowLaunch(
        "row_softmax_hyb<float, RW_SOFTMAX, 8>", (7,), (256,), 24, 24 * 256 * 16
    )
    assert _row(DType.F16, "log_softmax", 32000)[1].block == (192,) and _row(DType.F16, "log_softmax", 32000)[1].ne == 13
    assert _row(DType.F16, "softmax", 2049)[0] != "softmax-hybrid" and _row(DType.F16, "softmax", 65537)[0] == "row-raw"
    assert _row(DType.F32, "softmax", 65536)[1].block == (1024,) and _row(DType.F32, "softmax", 65536)[1].ne == 8
    assert _row(DType.F64, "softmax", 32000)[0] == "row-cached"
    assert _row(DType.F32, "causal", 32000)[0] == "row-cached"
