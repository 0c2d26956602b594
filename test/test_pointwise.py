"""Pointwise family (ops.md §1.2-§1.11): bad input at create, special values on every device,
C-style aliases, equal's two modes, cast's conversion rules and rope's position handling."""

import math

import ml_dtypes
import numpy as np
import pytest
from conftest import create_status

import infiniop_py as iop
from infiniop_py import DType, Status
from infiniop_py.dtypes import to_numpy
from infiniop_py.testing.device import backend_for

F32, F16, BF16, F64 = DType.F32, DType.F16, DType.BF16, DType.F64


def td(shape, dtype=F32, strides=None):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def _gpu_health(be, where: str) -> None:
    """Fail with a clear message when the CUDA context is already broken (a sticky error left by
    an earlier test or kernel makes every later GPU call fail with the same error)."""
    try:
        be.cp.cuda.runtime.deviceSynchronize()
    except Exception as exc:  # cupy CUDARuntimeError
        pytest.fail(f"{where}: the CUDA context was already broken before this call ({type(exc).__name__}: {exc})")


def _describe(op, device, outs, ins, attrs) -> str:
    o = ", ".join(f"{n} {DType(dt).name}{list(shape)}" for n, (shape, dt) in outs.items())
    i = ", ".join(f"{n} {a.dtype}{list(a.shape)}" for n, a in ins.items())
    return f"{op} on {device} ({o} <- {i}{', ' + str(attrs) if attrs else ''})"


def run(op, device, outs: dict, ins: dict, **attrs):
    """Run ``op`` on contiguous host arrays; ``outs`` maps output names to (shape, dtype).

    Every failure (a status from create/calculate, a CUDA error at launch or synchronisation)
    becomes an assertion naming the operator, device, tensors and attributes.
    """
    where = _describe(op, device, outs, ins, attrs)
    be = backend_for(device)
    if be.gpu:
        _gpu_health(be, where)
    try:
        h = iop.create_handle(device)
        descs = {n: td(a.shape, _dt(a)) for n, a in ins.items()}
        descs.update({n: td(shape, dt) for n, (shape, dt) in outs.items()})
        bufs = {n: be.upload(np.ascontiguousarray(a).reshape(-1)) for n, a in ins.items()}
        for n, (shape, dt) in outs.items():
            bufs[n] = be.upload(np.zeros(max(1, math.prod(shape)), to_numpy(dt)))
        d = iop.create_descriptor(op, h, **descs, **attrs)
        ws = be.empty_bytes(d.workspace_size) if d.workspace_size else None
        d.calculate(ws, **bufs)
        be.synchronize()
        res = {}
        for n, (shape, dt) in outs.items():
            res[n] = be.download(bufs[n], to_numpy(dt))[: math.prod(shape)].reshape(shape)
        d.destroy()
    except iop.InfiniopError as exc:
        pytest.fail(f"{where}: {exc.status.name}: {exc.message}")
    except Exception as exc:  # CUDA errors from CuPy, anything unexpected
        pytest.fail(f"{where}: {type(exc).__name__}: {exc}")
    return res if len(res) > 1 else next(iter(res.values()))


def expect(what: str, got, want) -> None:
    """Exact comparison (NaN equals NaN, -0.0 equals 0.0) with both arrays in the message."""
    g = np.asarray(got).astype(np.float64).reshape(-1)
    w = np.asarray(want, dtype=np.float64).reshape(-1)
    ok = g.shape == w.shape and bool(np.all((g == w) | (np.isnan(g) & np.isnan(w))))
    assert ok, f"{what}: got {g.tolist()}, expected {w.tolist()}"


def near(what: str, got, want, atol: float) -> None:
    g = np.asarray(got).astype(np.float64).reshape(-1)
    w = np.asarray(want, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        ok = g.shape == w.shape and bool(np.all((np.abs(g - w) <= atol) | (g == w) | (np.isnan(g) & np.isnan(w))))
    assert ok, f"{what}: got {g.tolist()}, expected {w.tolist()} within {atol:g}"


def _dt(a: np.ndarray) -> DType:
    table = {np.dtype(to_numpy(d)): d for d in (F16, F32, F64, DType.I8, DType.I16, DType.I32, DType.I64, DType.U16,
                                                DType.U32, DType.U64, DType.BOOL)}  # fmt: skip
    table[np.dtype(ml_dtypes.bfloat16)] = BF16
    table[np.dtype(np.uint8)] = DType.U8
    return table[a.dtype]


# -- create-time validation ------------------------------------------------------------------


@pytest.fixture
def h():
    return iop.create_handle("cpu")


def test_gelu_approximate_values(h):
    assert create_status("gelu", h, td((4,)), td((4,)), approximate="erf") is Status.BAD_PARAM
    assert create_status("gelu_backward", h, td((4,)), td((4,)), td((4,)), approximate=1) is (Status.BAD_PARAM)
    iop.create_descriptor("gelu", h, td((4,)), td((4,)), approximate="tanh").destroy()


def test_elementwise_shape_dtype_stride_errors(h):
    assert create_status("exp", h, td((4,)), td((5,))) is Status.BAD_TENSOR_SHAPE
    assert create_status("exp", h, td((4,)), td((4,), F16)) is Status.BAD_TENSOR_DTYPE
    assert create_status("exp", h, td((4,), DType.I32), td((4,), DType.I32)) is Status.BAD_TENSOR_DTYPE
    assert create_status("exp", h, td((4, 3), strides=(0, 1)), td((4, 3))) is Status.BAD_TENSOR_STRIDES
    assert create_status("leaky_relu", h, td((4,)), td((4,)), negative_slope="x") is Status.BAD_PARAM
    assert create_status("swiglu", h, td((4,)), td((4,)), td((4,), F16)) is Status.BAD_TENSOR_DTYPE
    assert create_status("exp", h, None, td((4,))) is Status.NULL_POINTER


def test_mixed_dtype_rules(h):
    b = DType.BOOL
    # where: a, b, c share one dtype; condition from the data set (u16 is not in it)
    assert create_status("where", h, td((3,)), td((3,), b), td((3,)), td((3,), F16)) is (Status.BAD_TENSOR_DTYPE)
    assert create_status("where", h, td((3,)), td((3,), DType.U16), td((3,)), td((3,))) is (Status.BAD_TENSOR_DTYPE)
    # logical: c bool/u8/i8; a, b may differ
    iop.create_descriptor("logical_or", h, td((3,), DType.I8), td((3,), F16), td((3,), DType.I64)).destroy()
    assert create_status("logical_and", h, td((3,)), td((3,)), td((3,))) is Status.BAD_TENSOR_DTYPE
    # equal: a, b one dtype; c bool/u8/i8; c shape a's or one element
    assert create_status("equal", h, td((3,), b), td((3,)), td((3,), F16)) is Status.BAD_TENSOR_DTYPE
    assert create_status("equal", h, td((3,), F32), td((3,)), td((3,))) is Status.BAD_TENSOR_DTYPE
    assert create_status("equal", h, td((2,), b), td((3,)), td((3,))) is Status.BAD_TENSOR_SHAPE
    assert create_status("equal", h, td((1, 1), b), td((3,)), td((3,))) is Status.BAD_TENSOR_SHAPE
    # cast: any pair of ALL, nothing else
    iop.create_descriptor("cast", h, td((3,), DType.U64), td((3,), BF16)).destroy()
    assert create_status("cast", h, td((3,), DType.F8), td((3,))) is Status.BAD_TENSOR_DTYPE
    assert create_status("clip", h, td((3,)), td((3,)), td((3,)), td((3,), F64)) is (Status.BAD_TENSOR_DTYPE)


def rope_descs(x=(4, 2, 8), pos=(4,), table=(6, 4), dt=F32, pdt=DType.I32, xs=None, ts=None):
    return dict(y=td(x, dt), x=td(x, dt, xs), pos_ids=td(pos, pdt), sin_table=td(table, dt, ts), cos_table=td(table, dt))


@pytest.mark.parametrize(
    "kw,attrs,want",
    [
        ({}, {"algo": 2}, Status.BAD_PARAM),
        ({"x": (4, 2, 7), "table": (6, 3)}, {}, Status.BAD_TENSOR_SHAPE),  # odd dhead
        ({"x": (2, 4, 2, 8, 1)}, {}, Status.BAD_TENSOR_SHAPE),
        ({"x": (4, 8)}, {}, Status.BAD_TENSOR_SHAPE),
        ({"pos": (5,)}, {}, Status.BAD_TENSOR_SHAPE),
        ({"pos": (2, 4)}, {}, Status.BAD_TENSOR_SHAPE),  # [batch, seq] needs 4-d x
        ({"table": (6, 8)}, {}, Status.BAD_TENSOR_SHAPE),
        ({"pdt": F32}, {}, Status.BAD_TENSOR_DTYPE),
        ({"xs": (16, 1, 2)}, {}, Status.BAD_TENSOR_STRIDES),  # last-dim stride must be 1
        ({"ts": (1, 6)}, {}, Status.BAD_TENSOR_STRIDES),  # tables contiguous
    ],
)
def test_rope_validation(h, kw, attrs, want):
    x = kw.pop("x", (4, 2, 8))
    d = rope_descs(x=x, **kw)
    if "xs" in kw:
        d["x"] = td(x, F32, kw["xs"])
    assert create_status("rope", h, **d, **attrs) is want


def test_rope_4d_and_stem(h):
    d = rope_descs(x=(2, 4, 2, 8), pos=(2, 4))
    iop.infiniopCreateRoPEDescriptor(h, d["y"], d["x"], d["pos_ids"], d["sin_table"], d["cos_table"], 1).destroy()


def test_c_style_aliases(h):
    a = iop.infiniopCreateAndDescriptor(h, td((3,), DType.BOOL), td((3,)), td((3,)))
    assert a.spec.name == "logical_and"
    o = iop.infiniopCreateOrDescriptor(h, td((3,), DType.BOOL), td((3,)), td((3,)))
    assert o.spec.name == "logical_or"
    g = iop.infiniopCreateGeluDescriptor(h, td((3,)), td((3,)))  # no attribute: exact form
    assert g.info.attrs["approximate"] == "none"
    gt = iop.infiniopCreateGeluTanhDescriptor(h, td((3,)), td((3,)))
    assert gt.spec.name == "gelutanh"
    from infiniop_py.registry import resolve

    assert resolve("op_and") == "logical_and" and resolve("op_or") == "logical_or" and resolve("leakyrelu") == "leaky_relu"


# -- special values, every device ---------------------------------------------------------------

NAN = float("nan")


def _r(v, npd):
    """``v`` rounded to the test dtype (what an exact kernel stores), as float64."""
    return float(np.asarray(v, np.float64).astype(np.float32).astype(npd).astype(np.float64))


@pytest.mark.parametrize("dt", [F32, F16, BF16, F64])
def test_nan_and_signed_zero(device, dt):
    npd = to_numpy(dt)
    x = np.array([NAN, -0.0, 0.0, -3.0, 2.5, -1e-3], npd)
    tag = f"[{device} {dt.name}]"
    y = run("relu", device, {"output": ((6,), dt)}, {"input": x})
    expect(f"relu {tag}", y, [NAN, 0, 0, 0, 2.5, 0])
    y = run("leaky_relu", device, {"output": ((6,), dt)}, {"input": x}, negative_slope=0.5)
    expect(f"leaky_relu(0.5) {tag}", y[[0, 3, 4]], [NAN, -1.5, 2.5])
    y = run("hardswish", device, {"output": ((6,), dt)}, {"input": x})
    want = np.float64(2.5 * 5.5 / 6) if dt is F64 else _r(2.5 * 5.5 / 6, npd)
    near(f"hardswish {tag}", y[[0, 1, 2, 3, 4]], [NAN, 0, 0, 0, want], 1e-15 if dt is F64 else 0.0)
    g = np.full(6, 3.0, npd)
    gi = run("relu_backward", device, {"grad_input": ((6,), dt)}, {"input": x, "grad_output": g})
    expect(f"relu_backward {tag} (NaN passes the gradient, 0 does not)", gi, [3, 0, 0, 0, 3, 0])
    lo, hi = np.full(6, -1.0, npd), np.full(6, 1.0, npd)
    y = run("clip", device, {"y": ((6,), dt)}, {"x": x, "min_val": lo, "max_val": hi})
    expect(f"clip[-1, 1] {tag}", y, [NAN, 0, 0, -1, 1, float(np.asarray(-1e-3, npd).astype(np.float64))])
    y = run("clip", device, {"y": ((6,), dt)}, {"x": x, "min_val": hi, "max_val": lo})
    expect(f"clip with min > max {tag} (min wins, NaN stays NaN)", y, [NAN] + [1] * 5)


@pytest.mark.parametrize("dt", [F32, F16, BF16, F64])
def test_leaky_relu_any_slope_passes_x_ge_0(device, dt):
    """x >= 0 (and +inf) comes out unchanged whatever the slope, inf, NaN and 1e39 (inf in f32)
    included; x < 0 gives slope * x with the slope in the compute type (f32 for 16-bit types)."""
    npd = to_numpy(dt)
    x = np.array([3.0, 0.0, 1e-3, 1000.0, np.inf, -0.0, -2.0, -0.25, -np.inf, NAN], npd)
    for slope in (np.inf, -np.inf, NAN, 1e39, 0.0, -0.5):
        y = run("leaky_relu", device, {"output": ((x.size,), dt)}, {"input": x}, negative_slope=slope)
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.float64(slope) if dt is F64 else np.float64(np.float32(slope))
            xd = x.astype(np.float64)
            want = np.where(xd >= 0, xd, xd * s).astype(npd)
        expect(f"leaky_relu({slope}) [{device} {dt.name}]", y, want)
        pos = x.astype(np.float64) >= 0
        assert np.array_equal(y[pos].astype(np.float64), x[pos].astype(np.float64)), (slope, y.tolist())


@pytest.mark.parametrize("dt", [F32, F16, F64])
def test_exp_overflow_and_gelu_tails(device, dt):
    npd = to_numpy(dt)
    tag = f"[{device} {dt.name}]"
    x = np.array([-1000.0, 0.0, 12.0 if dt is F16 else 1000.0], npd)
    y = run("exp", device, {"output": ((3,), dt)}, {"input": x})
    expect(f"exp{x.tolist()} {tag}", y, [0, 1, np.inf])
    x = np.array([-30.0, -6.0, 0.0, 6.0, 30.0], npd)
    for approx in ("none", "tanh"):
        y = run("gelu", device, {"output": ((5,), dt)}, {"input": x}, approximate=approx)
        near(f"gelu({approx}){x.tolist()} {tag}", y, [0, 0, 0, 6, 30], 1e-2)
        near(f"gelu({approx}) tails {tag}", y[[0, 1]], [0, 0], 1e-6)
        expect(f"gelu({approx})(0), (30) {tag}", y[[2, 4]], [0, 30])
    y = run("sigmoid", device, {"output": ((5,), dt)}, {"input": x})
    near(f"sigmoid{x.tolist()} {tag}", y[[0, 2, 4]], [0, 0.5, 1], 1e-12)
    assert y[0] >= 0, f"sigmoid(-30) {tag} is negative: {y[0]}"
    y = run("silu", device, {"output": ((5,), dt)}, {"input": x})
    near(f"silu{x.tolist()} {tag}", y, [0, -6 / (1 + math.exp(6)), 0, 6 / (1 + math.exp(-6)), 30], 2e-2 if dt is F16 else 1e-5)


def test_where_condition_truth(device):
    cond = np.array([-0.0, 0.0, NAN, 0.5, -2.0], np.float16)
    a, b = np.arange(5, dtype=np.float32), -np.arange(5, dtype=np.float32) - 1
    c = run("where", device, {"c": ((5,), F32)}, {"condition": cond, "a": a, "b": b})
    expect(f"where(f16 condition {cond.tolist()}) [{device}] (-0.0 is false, NaN is true)", c, [-1, -2, 2, 3, 4])
    cond = np.array([0, 1, 0, 255, 7], np.uint8)
    c = run("where", device, {"c": ((5,), DType.BOOL)}, {"condition": cond, "a": np.ones(5, bool), "b": np.zeros(5, bool)})
    expect(f"where(u8 condition {cond.tolist()}, bool data) [{device}]", c, [0, 1, 0, 1, 1])


def test_equal_modes(device):
    a = np.array([1.0, NAN, 0.0, 2.0], np.float32)
    b = np.array([1.0, NAN, -0.0, 3.0], np.float32)
    c = run("equal", device, {"c": ((4,), DType.BOOL)}, {"a": a, "b": b})
    expect(f"equal elementwise [{device}] (NaN != NaN, +0 == -0)", c, [1, 0, 1, 0])
    c = run("equal", device, {"c": ((1,), DType.BOOL)}, {"a": a, "b": b})
    expect(f"equal all of {a.tolist()} vs {b.tolist()} [{device}]", c, [0])
    c = run("equal", device, {"c": ((1,), DType.BOOL)}, {"a": a[[0, 2]], "b": b[[0, 2]]})
    expect(f"equal all [1, 0] vs [1, -0] [{device}] (+0 == -0)", c, [1])
    c = run("equal", device, {"c": ((), DType.BOOL)}, {"a": a[:2], "b": a[:2]})
    expect(f"equal all, 0-d c, [1, NaN] vs itself [{device}] (NaN != NaN)", c, [0])
    big = np.arange(300_000, dtype=np.int32)
    big2 = big.copy()
    c = run("equal", device, {"c": ((1,), DType.U8)}, {"a": big, "b": big2})
    expect(f"equal all, 300000 equal i32, u8 c [{device}]", c, [1])
    big2[123_457] += 1
    c = run("equal", device, {"c": ((1,), DType.I8)}, {"a": big, "b": big2})
    expect(f"equal all, one of 300000 i32 differs, i8 c [{device}]", c, [0])


def test_cast_rules(device):
    x = np.array([NAN, -0.0, 0.0, -2.7, 2.7, 1e-30], np.float32)
    y = run("cast", device, {"output": ((6,), DType.BOOL)}, {"input": x})
    expect(f"cast f32 {x.tolist()} -> bool [{device}] (NaN is true)", y, [1, 0, 0, 1, 1, 1])
    y = run("cast", device, {"output": ((3,), DType.I32)}, {"input": x[3:6]})
    expect(f"cast f32 {x[3:6].tolist()} -> i32 [{device}] (truncation)", y, [-2, 2, 0])
    i = np.array([300, -1, 65537, -129], np.int32)
    y = run("cast", device, {"output": ((4,), DType.U8)}, {"input": i})
    expect(f"cast i32 {i.tolist()} -> u8 [{device}] (wraps)", y, [44, 255, 1, 127])
    y = run("cast", device, {"output": ((4,), DType.I16)}, {"input": i})
    expect(f"cast i32 {i.tolist()} -> i16 [{device}] (wraps)", y, [300, -1, 1, -129])
    f = run("cast", device, {"output": ((2,), F16)}, {"input": np.array([70000, 1], np.int64)})
    expect(f"cast i64 [70000, 1] -> f16 [{device}] (overflow -> inf)", f, [np.inf, 1])
    b = run("cast", device, {"output": ((3,), BF16)}, {"input": np.array([True, False, True])})
    expect(f"cast bool -> bf16 [{device}]", b, [1, 0, 1])
    # round to nearest even: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16 -> 1
    f = run("cast", device, {"output": ((2,), F16)}, {"input": np.array([1 + 2**-11, 1 + 3 * 2**-11], np.float32)})
    expect(f"cast f32 -> f16 ties to even [{device}]", f, [1.0, 1 + 2**-9])


@pytest.mark.parametrize("algo", [0, 1])
@pytest.mark.parametrize("dt", [F32, F16])
def test_rope_positions(device, algo, dt):
    npd = to_numpy(dt)
    tag = f"[{device} {dt.name} algo {algo}]"
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, 2, 8)).astype(npd)
    sin = rng.uniform(-1, 1, (4, 4)).astype(npd)
    cos = rng.uniform(-1, 1, (4, 4)).astype(npd)
    tol = dict(rtol=1e-5, atol=1e-6) if dt is F32 else dict(rtol=2e-3, atol=2e-3)

    def rot(row, p):
        xf, c, s = x[row].astype(np.float64), cos[p].astype(np.float64), sin[p].astype(np.float64)
        x0, x1 = (xf[:, 0::2], xf[:, 1::2]) if algo == 0 else (xf[:, :4], xf[:, 4:])
        return x0 * c - x1 * s, x0 * s + x1 * c

    def halves(y):
        return (y[..., 0::2], y[..., 1::2]) if algo == 0 else (y[..., :4], y[..., 4:])

    args = {"x": x, "sin_table": sin, "cos_table": cos}
    pos = np.array([1, 2**63 + 1, 3], np.uint64)  # huge unsigned: out of range, row of zeros
    y = run("rope", device, {"y": ((3, 2, 8), dt)}, {**args, "pos_ids": pos}, algo=algo).astype(np.float64)
    assert np.all(y[1] == 0), f"rope {tag}: row at u64 position 2^63+1 must be zeros, got {y[1].tolist()}"
    for row, p in ((0, 1), (2, 3)):
        for k, (got, want) in enumerate(zip(halves(y[row]), rot(row, p))):
            np.testing.assert_allclose(got, want, **tol, err_msg=f"rope {tag}: row {row} (position {p}), y{k}")
    pos = np.array([-1, 0, 4], np.int8)
    y = run("rope", device, {"y": ((3, 2, 8), dt)}, {**args, "pos_ids": pos}, algo=algo).astype(np.float64)
    assert np.all(y[0] == 0) and np.all(y[2] == 0), f"rope {tag}: rows at positions -1 and 4 must be zeros, got {y.tolist()}"
    for k, (got, want) in enumerate(zip(halves(y[1]), rot(1, 0))):
        np.testing.assert_allclose(got, want, **tol, err_msg=f"rope {tag}: row 1 (position 0), y{k}")
    # an empty table: every position is out of range, nothing is read
    e = np.zeros((0, 4), npd)
    y = run("rope", device, {"y": ((3, 2, 8), dt)}, {"x": x, "pos_ids": pos, "sin_table": e, "cos_table": e}, algo=algo)
    assert np.all(y.astype(np.float64) == 0), f"rope {tag}: empty table must give zeros, got {y.tolist()}"


def _small_rope_grids(monkeypatch):
    """rope_grid puts rows past 3 in grid.z, rope_units walks 3 rows per block: the paths large
    tensors take, on small ones."""
    rope_cuda = iop.registry.get_spec("rope").module.cuda
    monkeypatch.setattr(rope_cuda, "GRID_ROWS", 3)
    monkeypatch.setattr(rope_cuda, "wave_rows", lambda *a: 3)


@pytest.mark.parametrize("dt", [F32, F16, BF16, F64])
@pytest.mark.parametrize("algo", [0, 1])
def test_rope_kernels(device, monkeypatch, dt, algo):
    """The kernel each rule and its fallbacks choose (grid, heads, units, rows; every pair-group
    width) against the CPU backend, with small grid caps; several head groups; out-of-range
    positions; heads too wide for the grid and heads configs (dhead 1024 and 2048)."""
    _small_rope_grids(monkeypatch)
    npd = to_numpy(dt)
    rng = np.random.default_rng(1)
    shapes = [((37, 40, 128), (37,)), ((2, 19, 3, 64), (2, 19)), ((11, 7, 16), (11,)), ((13, 5, 24), (13,))]
    shapes += [((3, 33, 8), (3,)), ((5, 3, 1024), (5,)), ((4, 2, 2048), (4,)), ((3, 1, 2), (3,))]
    for xshape, pshape in shapes:
        half, table = xshape[-1] // 2, 30
        x = rng.uniform(-2, 2, xshape).astype(npd)
        pos = rng.integers(-1, table + 2, pshape).astype(np.int32)
        ins = {
            "x": x,
            "pos_ids": pos,
            "sin_table": rng.uniform(-1, 1, (table, half)).astype(npd),
            "cos_table": rng.uniform(-1, 1, (table, half)).astype(npd),
        }
        got = run("rope", device, {"y": (xshape, dt)}, ins, algo=algo).astype(np.float64)
        want = run("rope", "cpu", {"y": (xshape, dt)}, ins, algo=algo).astype(np.float64)
        tol = {F64: 1e-12, F32: 1e-5}.get(dt, 1e-2)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"rope {dt.name} algo {algo} {xshape}")


def test_rope_cases_small_grids(device, monkeypatch):
    """Every quick rope case (strided, permuted, padded, in-place, out-of-range, every pos dtype)
    with small grid caps, against float64 torch."""
    from infiniop_py.registry import get_cases
    from infiniop_py.testing.run import run_case

    if device == "cpu":
        pytest.skip("the grid caps are NVIDIA launch parameters")
    _small_rope_grids(monkeypatch)
    bad = []
    for case in get_cases("rope"):
        if "quick" not in case.suites:
            continue
        for dt in case.dtypes:
            r = run_case("rope", case, dt, device)
            if not (r.ok and r.comparisons):
                bad.append(f"[{case.description}] {dt.name}: " + "; ".join(r.messages))
    assert not bad, " | ".join(bad)


def test_rope_rules_and_compile_set():
    """The rope planner's configs per (algorithm, dtype), and its compile list: exactly the
    kernels of each rule's config and its fallbacks."""
    rope_cuda = iop.registry.get_spec("rope").module.cuda
    want = {(0, F16): "g2", (0, BF16): "g4", (0, F32): "g4", (1, F16): "ex2", (1, BF16): "ex2", (1, F32): "g2b"}
    for (algo, dt), name in want.items():
        assert rope_cuda.config_for(algo, dt) == rope_cuda.CONFIGS[name]
    assert rope_cuda.config_for(0, F64).kind == rope_cuda.config_for(1, F64).kind == "units"
    names = [n for _, ns in rope_cuda.compile_units() for n in ns]
    assert len(names) == len(set(names))
    assert {n.split("<")[0] for n in names} == {"rope_kernel", "rope_units", "rope_heads", "rope_grid"}
    assert not any(n.startswith(("rope_grid", "rope_heads")) and "double" in n for n in names)


def _dense_plans():
    """(op, dtype, config) of the dense-path config each floating elementwise operator's rule
    table chooses for each of its dtypes, one per config (the default config through exp)."""
    from infiniop_py.dtypes import itemsize
    from infiniop_py.elementwise.cuda import dense_config
    from infiniop_py.registry import all_specs

    seen, out = set(), []
    for spec in all_specs():
        rules = getattr(spec.nvidia, "dense_rules", None)
        if rules is None or not spec.dtypes <= {F32, F16, BF16, F64}:
            continue
        for dt in sorted(spec.dtypes):
            config = dense_config(rules, itemsize(dt))
            if config not in seen and (config != "ex1" or spec.name == "exp"):
                seen.add(config)
                out.append((spec.name, dt, config))
    return out


DENSE_PLANS = _dense_plans()


def test_dense_rules_reach_every_config():
    from infiniop_py.elementwise.cuda import DENSE

    assert {c for _, _, c in DENSE_PLANS} == set(DENSE)


@pytest.mark.parametrize("op, dt, config", DENSE_PLANS, ids=[f"{o}-{d.name}-{c}" for o, d, c in DENSE_PLANS])
def test_dense_configs_odd_sizes(device, op, dt, config):
    """Each dense-path config, through an operator and dtype whose rules choose it, on sizes with
    partial blocks and tails, against the CPU backend."""
    npd = to_numpy(dt)
    rng = np.random.default_rng(2)
    tol = {F64: 1e-12, F32: 1e-6, F16: 2e-3, BF16: 2e-2}[dt]
    spec = iop.registry.get_spec(op)
    for n in (1, 7, 8, 129, 1031, 4 * 128 * 8, 4 * 128 * 8 + 5, 3 * 4 * 256 * 8 + 13, 100003):
        ins = {t.name: rng.uniform(-3, 3, n).astype(npd) for t in spec.inputs}
        outs = {spec.outputs[0].name: ((n,), dt)}
        got = run(op, device, outs, ins).astype(np.float64)
        want = run(op, "cpu", outs, ins).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{op} {config} {dt.name} n={n}")


def test_rope_planner_reaches_exactly_its_compile_list(fake_nvidia):
    """A sweep of layouts through the rope planner on a fake device (each rule's config and every
    fallback, for every pair-group width) requests exactly the kernels of compile_units()."""
    from infiniop_py.dtypes import itemsize

    rope_cuda = iop.registry.get_spec("rope").module.cuda
    h = iop.create_handle("nvidia")
    for dt in (F32, F16, BF16, F64):
        for algo in (0, 1):
            for p in rope_cuda.candidates(algo, itemsize(dt)):
                layouts = []
                for k in (3, 129, 257):  # odd: exactly p pairs per group; nj = k: in the grid, past 128, past 256
                    d = 2 * p * k
                    layouts += [((5, 3, d), None), ((2, 3, d), (2**31, d, 1))]  # offsets past 31 bits: no rope_grid
                    layouts += [((2, 262145, d), (2**31, d, 1))]  # more than 65535 head chunks: no rope_heads
                for shape, strides in layouts:
                    x = iop.create_tensor_descriptor(shape, strides, dt)
                    t = iop.create_tensor_descriptor((4, shape[-1] // 2), None, dt)
                    pos = iop.create_tensor_descriptor((shape[0],), None, DType.I32)
                    desc = iop.create_descriptor("rope", h, y=x, x=x, pos_ids=pos, sin_table=t, cos_table=t, algo=algo)
                    desc.destroy()
    compiled = {n for _, names in rope_cuda.compile_units() for n in names}
    requested = set(fake_nvidia)
    assert requested == compiled, (sorted(compiled - requested), sorted(requested - compiled))
