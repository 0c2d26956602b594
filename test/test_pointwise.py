"""Pointwise family (ops.md §1.2-§1.11): bad input at create, special values on every device,
C-style aliases, equal's two modes, cast's conversion rules and rope's position handling."""

import math

import ml_dtypes
import numpy as np
import pytest

import infiniop_py as iop
from infiniop_py import DType, Status
from infiniop_py.dtypes import to_numpy
from infiniop_py.testing.device import backend_for

F32, F16, BF16, F64 = DType.F32, DType.F16, DType.BF16, DType.F64


def td(shape, dtype=F32, strides=None):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def status(fn) -> Status:
    with pytest.raises(iop.InfiniopError) as ei:
        fn()
    return ei.value.status


def run(op, device, outs: dict, ins: dict, **attrs):
    """Run ``op`` on contiguous host arrays; ``outs`` maps output names to (shape, dtype)."""
    be = backend_for(device)
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
    res = {n: be.download(bufs[n], to_numpy(dt))[: math.prod(shape)].reshape(shape) for n, (shape, dt) in outs.items()}
    d.destroy()
    return res if len(res) > 1 else next(iter(res.values()))


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
    assert status(lambda: iop.create_descriptor("gelu", h, td((4,)), td((4,)), approximate="erf")) is Status.BAD_PARAM
    assert status(lambda: iop.create_descriptor("gelu_backward", h, td((4,)), td((4,)), td((4,)), approximate=1)) is (
        Status.BAD_PARAM
    )
    iop.create_descriptor("gelu", h, td((4,)), td((4,)), approximate="tanh").destroy()


def test_elementwise_shape_dtype_stride_errors(h):
    assert status(lambda: iop.create_descriptor("exp", h, td((4,)), td((5,)))) is Status.BAD_TENSOR_SHAPE
    assert status(lambda: iop.create_descriptor("exp", h, td((4,)), td((4,), F16))) is Status.BAD_TENSOR_DTYPE
    assert status(lambda: iop.create_descriptor("exp", h, td((4,), DType.I32), td((4,), DType.I32))) is Status.BAD_TENSOR_DTYPE
    assert status(lambda: iop.create_descriptor("exp", h, td((4, 3), strides=(0, 1)), td((4, 3)))) is Status.BAD_TENSOR_STRIDES
    assert status(lambda: iop.create_descriptor("leaky_relu", h, td((4,)), td((4,)), negative_slope="x")) is Status.BAD_PARAM
    assert status(lambda: iop.create_descriptor("swiglu", h, td((4,)), td((4,)), td((4,), F16))) is Status.BAD_TENSOR_DTYPE
    assert status(lambda: iop.create_descriptor("exp", h, None, td((4,)))) is Status.NULL_POINTER


def test_mixed_dtype_rules(h):
    b = DType.BOOL
    # where: a, b, c share one dtype; condition from the data set (u16 is not in it)
    assert status(lambda: iop.create_descriptor("where", h, td((3,)), td((3,), b), td((3,)), td((3,), F16))) is (
        Status.BAD_TENSOR_DTYPE
    )
    assert status(lambda: iop.create_descriptor("where", h, td((3,)), td((3,), DType.U16), td((3,)), td((3,)))) is (
        Status.BAD_TENSOR_DTYPE
    )
    # logical: c bool/u8/i8; a, b may differ
    iop.create_descriptor("logical_or", h, td((3,), DType.I8), td((3,), F16), td((3,), DType.I64)).destroy()
    assert status(lambda: iop.create_descriptor("logical_and", h, td((3,)), td((3,)), td((3,)))) is Status.BAD_TENSOR_DTYPE
    # equal: a, b one dtype; c bool/u8/i8; c shape a's or one element
    assert status(lambda: iop.create_descriptor("equal", h, td((3,), b), td((3,)), td((3,), F16))) is Status.BAD_TENSOR_DTYPE
    assert status(lambda: iop.create_descriptor("equal", h, td((3,), F32), td((3,)), td((3,)))) is Status.BAD_TENSOR_DTYPE
    assert status(lambda: iop.create_descriptor("equal", h, td((2,), b), td((3,)), td((3,)))) is Status.BAD_TENSOR_SHAPE
    assert status(lambda: iop.create_descriptor("equal", h, td((1, 1), b), td((3,)), td((3,)))) is Status.BAD_TENSOR_SHAPE
    # cast: any pair of ALL, nothing else
    iop.create_descriptor("cast", h, td((3,), DType.U64), td((3,), BF16)).destroy()
    assert status(lambda: iop.create_descriptor("cast", h, td((3,), DType.F8), td((3,)))) is Status.BAD_TENSOR_DTYPE
    assert status(lambda: iop.create_descriptor("clip", h, td((3,)), td((3,)), td((3,)), td((3,), F64))) is (
        Status.BAD_TENSOR_DTYPE
    )


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
    assert status(lambda: iop.create_descriptor("rope", h, **d, **attrs)) is want


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


@pytest.mark.parametrize("dt", [F32, F16, BF16, F64])
def test_nan_and_signed_zero(device, dt):
    npd = to_numpy(dt)
    x = np.array([NAN, -0.0, 0.0, -3.0, 2.5, -1e-3], npd)
    y = run("relu", device, {"output": ((6,), dt)}, {"input": x})
    assert np.isnan(y[0].astype(np.float32)) and list(y[1:].astype(np.float32)) == [0, 0, 0, 2.5, 0]
    y = run("leaky_relu", device, {"output": ((6,), dt)}, {"input": x}, negative_slope=0.5)
    assert np.isnan(y[0].astype(np.float32)) and y[3].astype(np.float32) == -1.5
    y = run("hardswish", device, {"output": ((6,), dt)}, {"input": x})
    assert (
        np.isnan(y[0].astype(np.float32))
        and y[3].astype(np.float32) == 0
        and y[4].astype(np.float32) == np.float32(2.5 * 5.5 / 6).astype(npd).astype(np.float32)
    )
    g = np.full(6, 3.0, npd)
    gi = run("relu_backward", device, {"grad_input": ((6,), dt)}, {"input": x, "grad_output": g})
    assert list(gi.astype(np.float32)) == [3, 0, 0, 0, 3, 0]  # NaN passes the gradient, 0 does not
    lo, hi = np.full(6, -1.0, npd), np.full(6, 1.0, npd)
    y = run("clip", device, {"y": ((6,), dt)}, {"x": x, "min_val": lo, "max_val": hi})
    assert np.isnan(y[0].astype(np.float32)) and list(y[3:].astype(np.float32)) == [-1, 1, np.float32(np.array(-1e-3, npd))]
    y = run("clip", device, {"y": ((6,), dt)}, {"x": x, "min_val": hi, "max_val": lo})  # min > max -> min
    assert list(y[1:].astype(np.float32)) == [1] * 5


@pytest.mark.parametrize("dt", [F32, F16, F64])
def test_exp_overflow_and_gelu_tails(device, dt):
    npd = to_numpy(dt)
    x = np.array([-1000.0, 0.0, 12.0 if dt is F16 else 1000.0], npd)
    y = run("exp", device, {"output": ((3,), dt)}, {"input": x}).astype(np.float64)
    assert y[0] == 0 and y[1] == 1 and np.isinf(y[2])
    x = np.array([-30.0, -6.0, 0.0, 6.0, 30.0], npd)
    for approx in ("none", "tanh"):
        y = run("gelu", device, {"output": ((5,), dt)}, {"input": x}, approximate=approx).astype(np.float64)
        assert abs(y[0]) < 1e-6 and abs(y[1]) < 1e-6 and y[2] == 0 and abs(y[3] - 6) < 1e-2 and y[4] == 30
    y = run("sigmoid", device, {"output": ((5,), dt)}, {"input": x}).astype(np.float64)
    assert 0 <= y[0] < 1e-12 and y[2] == 0.5 and abs(y[4] - 1) < 1e-12


def test_where_condition_truth(device):
    cond = np.array([-0.0, 0.0, NAN, 0.5, -2.0], np.float16)
    a, b = np.arange(5, dtype=np.float32), -np.arange(5, dtype=np.float32) - 1
    c = run("where", device, {"c": ((5,), F32)}, {"condition": cond, "a": a, "b": b})
    assert list(c) == [-1, -2, 2, 3, 4]  # -0.0 is false, NaN is true
    cond = np.array([0, 1, 0, 255, 7], np.uint8)
    c = run("where", device, {"c": ((5,), DType.BOOL)}, {"condition": cond, "a": np.ones(5, bool), "b": np.zeros(5, bool)})
    assert list(c) == [False, True, False, True, True]


def test_equal_modes(device):
    a = np.array([1.0, NAN, 0.0, 2.0], np.float32)
    b = np.array([1.0, NAN, -0.0, 3.0], np.float32)
    c = run("equal", device, {"c": ((4,), DType.BOOL)}, {"a": a, "b": b})
    assert list(c) == [True, False, True, False]
    assert not run("equal", device, {"c": ((1,), DType.BOOL)}, {"a": a, "b": b})[0]
    assert run("equal", device, {"c": ((1,), DType.BOOL)}, {"a": a[[0, 2]], "b": b[[0, 2]]})[0]  # +0 == -0
    assert not run("equal", device, {"c": ((), DType.BOOL)}, {"a": a[:2], "b": a[:2]})[()]  # NaN != NaN
    big = np.arange(300_000, dtype=np.int32)
    big2 = big.copy()
    assert run("equal", device, {"c": ((1,), DType.U8)}, {"a": big, "b": big2})[0] == 1
    big2[123_457] += 1
    assert run("equal", device, {"c": ((1,), DType.I8)}, {"a": big, "b": big2})[0] == 0


def test_cast_rules(device):
    x = np.array([NAN, -0.0, 0.0, -2.7, 2.7, 1e-30], np.float32)
    assert list(run("cast", device, {"output": ((6,), DType.BOOL)}, {"input": x})) == [True, False, False, True, True, True]
    assert list(run("cast", device, {"output": ((3,), DType.I32)}, {"input": x[3:6]})) == [-2, 2, 0]  # truncation
    i = np.array([300, -1, 65537, -129], np.int32)
    assert list(run("cast", device, {"output": ((4,), DType.U8)}, {"input": i})) == [44, 255, 1, 127]  # wraps
    assert list(run("cast", device, {"output": ((4,), DType.I16)}, {"input": i})) == [300, -1, 1, -129]
    f = run("cast", device, {"output": ((2,), F16)}, {"input": np.array([70000, 1], np.int64)})
    assert np.isinf(f[0]) and f[1] == 1  # overflow -> inf
    b = run("cast", device, {"output": ((3,), BF16)}, {"input": np.array([True, False, True])})
    assert list(b.astype(np.float32)) == [1, 0, 1]
    # round to nearest even: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16 -> 1
    f = run("cast", device, {"output": ((2,), F16)}, {"input": np.array([1 + 2**-11, 1 + 3 * 2**-11], np.float32)})
    assert list(f.astype(np.float32)) == [1.0, np.float32(1 + 2**-9)]


def test_rope_positions(device):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, 2, 8)).astype(np.float32)
    sin = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    cos = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    pos = np.array([1, 2**63 + 1, 3], np.uint64)  # huge unsigned: out of range, row of zeros
    y = run("rope", device, {"y": ((3, 2, 8), F32)}, {"x": x, "pos_ids": pos, "sin_table": sin, "cos_table": cos}, algo=1)
    assert np.all(y[1] == 0) and np.any(y[0] != 0)
    x0, x1 = x[2, :, :4], x[2, :, 4:]
    np.testing.assert_allclose(y[2, :, :4], x0 * cos[3] - x1 * sin[3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y[2, :, 4:], x0 * sin[3] + x1 * cos[3], rtol=1e-5, atol=1e-6)
    pos = np.array([-1, 0, 4], np.int8)
    y = run("rope", device, {"y": ((3, 2, 8), F32)}, {"x": x, "pos_ids": pos, "sin_table": sin, "cos_table": cos}, algo=0)
    assert np.all(y[0] == 0) and np.all(y[2] == 0)
    np.testing.assert_allclose(y[1, :, 0::2], x[1, :, 0::2] * cos[0] - x[1, :, 1::2] * sin[0], rtol=1e-5, atol=1e-6)
    # an empty table: every position is out of range, nothing is read
    e = np.zeros((0, 4), np.float32)
    y = run("rope", device, {"y": ((3, 2, 8), F32)}, {"x": x, "pos_ids": pos, "sin_table": e, "cos_table": e})
    assert np.all(y == 0)
