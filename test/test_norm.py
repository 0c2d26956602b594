"""Normalization family (ops.md §3): bad input at create, determinism, GGUF quirks, planning.

The generic case table covers values; this file checks every create-time rejection names the
argument and carries the right status, that weight gradients are bitwise reproducible, and (on
fake devices, without a GPU) that the row-wise planners reach exactly the kernels the compile
check compiles.
"""

import numpy as np
import pytest
from conftest import DEVICES

import infiniop_py as iop
from infiniop_py import InfiniopError, Status
from infiniop_py.dtypes import DType
from infiniop_py.testing.fake_device import fake_nvidia

F16, BF16, F32, F64, I32 = DType.F16, DType.BF16, DType.F32, DType.F64, DType.I32


def td(shape, dt=F32, strides=None):
    return iop.create_tensor_descriptor(shape, strides, dt)


def expect(status, word, op, *descs, **kw):
    h = iop.create_handle("cpu")
    with pytest.raises(InfiniopError) as ei:
        iop.create_descriptor(op, h, *descs, **kw)
    assert ei.value.status == status, str(ei.value)
    assert word in str(ei.value), str(ei.value)


# -- rms_norm ---------------------------------------------------------------------------------
def test_rms_norm_bad():
    x = td((4, 8))
    expect(Status.BAD_TENSOR_SHAPE, "'w'", "rms_norm", x, x, td((7,)))
    expect(Status.BAD_TENSOR_SHAPE, "'y'", "rms_norm", td((4, 9)), x, td((8,)))
    expect(Status.BAD_TENSOR_SHAPE, "'x'", "rms_norm", td(()), td(()), td((1,)))
    expect(Status.BAD_TENSOR_DTYPE, "'w'", "rms_norm", x, x, td((8,), F16))  # f32 x needs f32 w
    expect(Status.BAD_TENSOR_DTYPE, "'w'", "rms_norm", td((4, 8), F16), td((4, 8), F16), td((8,), F64))
    expect(Status.BAD_TENSOR_DTYPE, "'x'", "rms_norm", td((4, 8), I32), td((4, 8), I32), td((8,), I32))
    expect(Status.BAD_TENSOR_DTYPE, "'y'", "rms_norm", td((4, 8), F16), x, td((8,)))
    expect(Status.BAD_TENSOR_STRIDES, "'x'", "rms_norm", x, td((4, 8), F32, (1, 4)), td((8,)))
    expect(Status.BAD_TENSOR_STRIDES, "'w'", "rms_norm", x, x, td((8,), F32, (2,)))
    expect(Status.BAD_TENSOR_STRIDES, "'y'", "rms_norm", td((4, 8), F32, (0, 1)), x, td((8,)))
    for eps in (0.0, -1e-5, float("nan"), float("inf")):
        expect(Status.BAD_PARAM, "epsilon", "rms_norm", x, x, td((8,)), epsilon=eps)


def test_rms_norm_mixed_weights_accepted():
    h = iop.create_handle("cpu")
    for xd in (F16, BF16):
        for wd in (F16, BF16, F32):
            iop.create_descriptor("rms_norm", h, td((2, 8), xd), td((2, 8), xd), td((8,), wd)).destroy()


def test_rms_norm_backward_bad():
    x, w = td((4, 8)), td((8,))
    expect(Status.BAD_TENSOR_SHAPE, "'grad_w'", "rms_norm_backward", x, td((4,)), x, x, w)
    expect(Status.BAD_TENSOR_SHAPE, "'grad_y'", "rms_norm_backward", x, w, td((4, 7)), x, w)
    xh = td((4, 8), F16)
    expect(Status.BAD_TENSOR_DTYPE, "'w'", "rms_norm_backward", xh, td((8,), BF16), xh, xh, td((8,), BF16))
    expect(Status.BAD_TENSOR_DTYPE, "'grad_w'", "rms_norm_backward", xh, td((8,), F16), xh, xh, td((8,), F32))
    expect(Status.BAD_PARAM, "epsilon", "rms_norm_backward", x, w, x, x, w, epsilon=float("nan"))


# -- layer_norm -------------------------------------------------------------------------------
def ln(shape=(4, 8), dt=F32, std=None, w=None, b=True):
    std = std if std is not None else shape[:-1]
    return [td(shape, dt), td(shape, dt), td(std, dt), td(shape, dt), td(w or shape[-1:], dt), td(shape[-1:], dt) if b else None]


def test_layer_norm_bad():
    expect(Status.BAD_TENSOR_SHAPE, "'input_std_deviation'", "layer_norm", *ln(std=(4, 2)))
    expect(Status.BAD_TENSOR_SHAPE, "'input_std_deviation'", "layer_norm", *ln(std=(8,)))
    expect(Status.BAD_TENSOR_SHAPE, "'weight'", "layer_norm", *ln(w=(9,)))
    a = ln()
    a[5] = td((7,))
    expect(Status.BAD_TENSOR_SHAPE, "'bias'", "layer_norm", *a)
    a = ln()
    a[1] = td((4, 9))
    expect(Status.BAD_TENSOR_SHAPE, "'input_standardization'", "layer_norm", *a)
    a = ln()
    a[4] = td((8,), F16)
    expect(Status.BAD_TENSOR_DTYPE, "'weight'", "layer_norm", *a)
    expect(Status.BAD_PARAM, "eps", "layer_norm", *ln(), eps=0.0)
    expect(Status.BAD_PARAM, "eps", "layer_norm", *ln(), eps=float("nan"))
    expect(Status.BAD_TENSOR_SHAPE, "'input'", "layer_norm", *ln(shape=(4, 0)))


def test_layer_norm_std_shapes_and_no_bias():
    h = iop.create_handle("cpu")
    iop.create_descriptor("layer_norm", h, *ln(std=(4, 1))).destroy()
    iop.create_descriptor("layer_norm", h, *ln(b=False)).destroy()


def test_layer_norm_backward_bad():
    s, d = td((4, 8)), td((8,))
    expect(Status.BAD_TENSOR_SHAPE, "'input_std_deviation'", "layer_norm_backward", s, d, d, s, d, s, td((4, 8)))
    expect(Status.BAD_TENSOR_SHAPE, "'grad_bias'", "layer_norm_backward", s, d, td((7,)), s, d, s, td((4,)))
    expect(Status.BAD_TENSOR_SHAPE, "'input_standardization'", "layer_norm_backward", s, d, d, s, d, td((4, 9)), td((4,)))
    expect(Status.BAD_TENSOR_DTYPE, "'grad_weight'", "layer_norm_backward", s, td((8,), F64), None, s, d, s, td((4,)))


# -- batch_norm -------------------------------------------------------------------------------
def bn(shape=(4, 3, 5), dt=F32, sdt=None, c=None):
    c = c or shape[1]
    sdt = sdt or dt
    return [td(shape, dt), td((c,), sdt), td((c,), sdt), td(shape, dt), td((c,), dt), td((c,), dt)]


def test_batch_norm_bad():
    expect(Status.BAD_TENSOR_SHAPE, "n = B*D = 1", "batch_norm", *bn(shape=(1, 3)))
    expect(Status.BAD_TENSOR_SHAPE, "n = B*D = 1", "batch_norm", *bn(shape=(1, 3, 1)))
    expect(Status.BAD_TENSOR_SHAPE, "'input'", "batch_norm", *bn(shape=(4,), c=4))
    expect(Status.BAD_TENSOR_SHAPE, "'input'", "batch_norm", *bn(shape=(2, 3, 4, 5)))
    a = bn()
    a[4] = td((4,))
    expect(Status.BAD_TENSOR_SHAPE, "'weight'", "batch_norm", *a)
    a = bn()
    a[2] = td((2,))
    expect(Status.BAD_TENSOR_SHAPE, "'running_var'", "batch_norm", *a)
    expect(Status.BAD_TENSOR_DTYPE, "'running_mean'", "batch_norm", *bn(dt=F16, sdt=BF16))
    expect(Status.BAD_TENSOR_DTYPE, "'running_mean'", "batch_norm", *bn(dt=F32, sdt=F64))
    for m in (-0.1, 1.5, float("nan")):
        expect(Status.BAD_PARAM, "momentum", "batch_norm", *bn(), momentum=m)
    expect(Status.BAD_PARAM, "eps", "batch_norm", *bn(), eps=-1.0)
    a = bn()
    a[1] = td((3,), F32, (0,))
    expect(Status.BAD_TENSOR_STRIDES, "'running_mean'", "batch_norm", *a)


def test_batch_norm_mixed_stats_accepted():
    h = iop.create_handle("cpu")
    for dt in (F16, BF16, F64):
        iop.create_descriptor("batch_norm", h, *bn(dt=dt, sdt=F32)).destroy()
    iop.create_descriptor("batch_norm", h, *bn(shape=(2, 3))).destroy()
    iop.create_descriptor("batch_norm", h, *bn(shape=(1, 3, 2))).destroy()


def test_batch_norm_backward_bad():
    s, c = td((4, 3, 5)), td((3,))
    expect(Status.BAD_TENSOR_SHAPE, "'running_mean'", "batch_norm_backward", s, c, c, s, s, c, td((4,)), c)
    expect(Status.BAD_TENSOR_SHAPE, "'grad_output'", "batch_norm_backward", s, c, c, s, td((4, 3, 6)), c, c, c)
    expect(
        Status.BAD_TENSOR_SHAPE, "n = B*D = 0", "batch_norm_backward", *([td((0, 3, 5))] + [c, c] + [td((0, 3, 5))] * 2 + [c] * 3)
    )
    expect(Status.BAD_PARAM, "eps", "batch_norm_backward", s, c, c, s, s, c, c, c, eps=0.0)


# -- determinism and results of the weight gradients ------------------------------------------------
CASES = {
    "rms_norm_backward": (("grad_x", "grad_w"), lambda r: {"grad_y": r((64, 1024)), "x": r((64, 1024)), "w": r((1024,))}),
    "layer_norm_backward": (
        ("grad_input", "grad_weight", "grad_bias"),
        lambda r: {
            "grad_output": r((64, 1024)),
            "weight": r((1024,)),
            "input_standardization": r((64, 1024)),
            "input_std_deviation": np.abs(r((64,))) + 0.5,
        },
    ),
    "batch_norm_backward": (
        ("grad_input", "grad_weight", "grad_bias"),
        lambda r: {
            "input": r((8, 16, 1024)),
            "grad_output": r((8, 16, 1024)),
            "weight": r((16,)),
            "running_mean": r((16,)),
            "running_var": r((16,)),
        },
    ),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(CASES))
def test_backward_bitwise_deterministic(op, device):
    outs, make = CASES[op]
    rng = np.random.default_rng(1)
    ins = make(lambda s: rng.uniform(-2, 2, s).astype(np.float32))
    results = []
    for _ in range(3):
        results.append(_run(op, outs, ins, device))
    for r in results[1:]:
        for a, b in zip(results[0], r):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


RING = {  # f32 D = 2048: 256-thread row groups, the cp.async ring kernels (several steps per block)
    "rms_norm_backward": (("grad_x", "grad_w"), lambda r: {"grad_y": r((1500, 2048)), "x": r((1500, 2048)), "w": r((2048,))}),
    "layer_norm_backward": (
        ("grad_input", "grad_weight", "grad_bias"),
        lambda r: {
            "grad_output": r((1500, 2048)),
            "weight": r((2048,)),
            "input_standardization": r((1500, 2048)),
            "input_std_deviation": np.abs(r((1500,))) + 0.5,
        },
    ),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(RING))
def test_backward_bitwise_deterministic_ring(op, device):
    outs, make = RING[op]
    rng = np.random.default_rng(2)
    ins = make(lambda s: rng.uniform(-2, 2, s).astype(np.float32))
    results = [_run(op, outs, ins, device) for _ in range(3)]
    for r in results[1:]:
        for a, b in zip(results[0], r):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _run(op, outs, ins, device):
    h = iop.create_handle(device)
    spec_in = {n: td(a.shape) for n, a in ins.items()}
    shapes = {
        "grad_x": ins.get("x", np.empty(0)).shape,
        "grad_input": (ins.get("grad_output") if "grad_output" in ins else ins.get("input", np.empty(0))).shape,
    }
    wshape = (ins["w"] if "w" in ins else ins["weight"]).shape
    out_shapes = {n: shapes.get(n, wshape) for n in outs}
    d = iop.create_descriptor(op, h, **{n: td(s) for n, s in out_shapes.items()}, **spec_in)
    if device == "cpu":
        bufs = {n: np.full(s, np.nan, np.float32) for n, s in out_shapes.items()}
        ws = np.empty(d.workspace_size, np.uint8) if d.workspace_size else None
        d.calculate(ws, **bufs, **ins)
        return [bufs[n] for n in outs]
    import cupy as cp

    bufs = {n: cp.full(s, cp.nan, cp.float32) for n, s in out_shapes.items()}
    ws = cp.empty(d.workspace_size, cp.uint8) if d.workspace_size else None
    d.calculate(ws, **bufs, **{n: cp.asarray(a) for n, a in ins.items()})
    cp.cuda.get_current_stream().synchronize()
    return [cp.asnumpy(bufs[n]) for n in outs]


def test_running_stats_updated_in_place():
    h = iop.create_handle("cpu")
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 3, (5, 2, 3)).astype(np.float32)
    rm, rv = np.zeros(2, np.float32), np.ones(2, np.float32)
    d = iop.create_descriptor("batch_norm", h, *bn(shape=(5, 2, 3)), momentum=0.25)
    y = np.empty_like(x)
    d.calculate(None, y, rm, rv, x, np.ones(2, np.float32), np.zeros(2, np.float32))
    mu = x.mean(axis=(0, 2))
    var_u = x.var(axis=(0, 2), ddof=1)
    np.testing.assert_allclose(rm, 0.25 * mu, rtol=1e-6)
    np.testing.assert_allclose(rv, 0.75 + 0.25 * var_u, rtol=1e-6)


def _bn_backward_f64(x, dy, w, eps=1e-5):
    """batch_norm_backward in float64 on (B, C) or (B, C, D) arrays (ops.md §3.6)."""
    x3, dy3 = (a.astype(np.float64).reshape(a.shape[0], a.shape[1], -1) for a in (x, dy))
    n = x3.shape[0] * x3.shape[2]
    xc = x3 - x3.mean(axis=(0, 2), keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=(0, 2), keepdims=True) + eps)
    xh = xc * rstd
    gb = dy3.sum(axis=(0, 2))
    gw = (dy3 * xh).sum(axis=(0, 2))
    gi = w.astype(np.float64)[None, :, None] * rstd * (dy3 - gb[None, :, None] / n - xh * gw[None, :, None] / n)
    return gi.reshape(x.shape), gw, gb


# f32 data whose grad_output has a nonzero mean: sum dy*(x - mean) then cancels heavily, and
# f32 sums (or an f32 mean) lose ~1e-4..1e-3 of grad_weight.
BN_DATA = {
    "normal": lambda rng, s: (rng.normal(3.0, 1.0, s), rng.normal(1.0, 1.0, s)),
    "uniform": lambda rng, s: (rng.random(s), rng.random(s)),  # as upstream's generator
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("data", sorted(BN_DATA))
@pytest.mark.parametrize("shape", [(2, 8, 5632), (4, 4, 5632), (4, 16, 32768), (8192, 16)], ids=str)
def test_batch_norm_backward_f32_matches_float64(device, data, shape):
    rng = np.random.default_rng(sum(shape))
    x, dy = (a.astype(np.float32) for a in BN_DATA[data](rng, shape))
    c = shape[1]
    w = rng.uniform(0.5, 1.5, c).astype(np.float32)
    ins = {"input": x, "grad_output": dy, "weight": w, "running_mean": np.zeros(c, np.float32)}
    ins["running_var"] = np.ones(c, np.float32)
    gi, gw, gb = _run("batch_norm_backward", ("grad_input", "grad_weight", "grad_bias"), ins, device)
    want = _bn_backward_f64(x, dy, w)
    for name, got, ref in zip(("grad_input", "grad_weight", "grad_bias"), (gi, gw, gb), want):
        err = np.abs(got.astype(np.float64) - ref)
        # the weight gradients to 1e-5 relative; grad_input as the GGUF files compare it
        bound = 1e-5 * np.abs(ref) + (1e-5 if name == "grad_input" else 0.0)
        worst = float(np.max(err / bound))
        assert worst <= 1.0, f"{name}: error up to {worst:.3g} x the bound (1e-5 relative) on {device}"


# -- NVIDIA planning of the row-wise operators, on fake devices (no GPU, no compiler) ---------------
ROW_OPS = ("rms_norm", "layer_norm", "rms_norm_backward", "layer_norm_backward")


def _row_descs(op, dts, rows, D):  # noqa: N803
    """Contiguous descriptors of a row-wise op: [..., D] rows and per-row tensors in the row
    dtype, [D] vectors in the last declared dtype (the weight's)."""
    from infiniop_py.registry import get_spec

    spec = get_spec(op)
    decl = spec.nvidia.row_op
    descs = {}
    for role in spec.tensors:
        n = role.name
        if n in decl.params:
            descs[n] = td((D,), dts[-1])
        elif n in decl.row_extra:
            descs[n] = td((rows,), dts[0])
        else:
            descs[n] = td((rows, D), dts[0])
    return descs


@pytest.mark.parametrize("op", ROW_OPS)
def test_row_planners_reach_exactly_the_compiled_kernels(op):
    """Row lengths 1 .. 65536 (every row-group size on the vector and the scalar path, and rows
    longer than the registers hold) on a device whose rings fit and on one where they decline."""
    from infiniop_py.registry import get_spec

    spec = get_spec(op)
    compiled = {n for _, names in spec.nvidia.compile_units() for n in names}
    lengths = sorted({2**k + r for k in range(17) for r in (0, 1)})
    reached = set()
    for optin in (227 * 1024, 16 * 1024):
        with fake_nvidia(max_shared_per_block_optin=optin) as requested:
            h = iop.create_handle("nvidia")
            for dts in spec.nvidia.row_op.dtypes:
                for rows in (0, 1000):
                    for D in lengths:  # noqa: N806
                        d = iop.create_descriptor(op, h, **_row_descs(op, dts, rows, D))
                        assert d.workspace_size >= 0
                        d.destroy()
        reached |= set(requested)
    assert reached <= compiled, sorted(reached - compiled)[:10]
    assert reached == compiled, sorted(compiled - reached)[:10]


@pytest.mark.parametrize(
    "op,dt,D,plan",
    [
        ("rms_norm", F16, 1024, "fwd-short-ring, fwd"),
        ("rms_norm", F32, 101, "fwd-short"),  # no vector path (D % 4)
        ("layer_norm", F32, 4096, "fwd, fwd"),
        ("layer_norm", F32, 8192, "fwd, fwd-long"),
        ("rms_norm_backward", F16, 4096, "bwd-256-ring, bwd-long"),
        ("rms_norm_backward", F16, 1024, "bwd, bwd"),
        ("rms_norm_backward", F16, 16384, "bwd-1024-ring-v16, bwd-long"),
        ("layer_norm_backward", F16, 16384, "bwd-1024-ring, bwd-long"),
        ("layer_norm_backward", F32, 4096, "bwd-512-ring, bwd-long"),
    ],
)
def test_row_plan_names_the_rules(op, dt, D, plan):  # noqa: N803
    """The plan names the rule of each path (vector, scalar); where no ring fits the device, the
    ring's rule says it declined (its fallback runs)."""
    small = ", ".join(r + " (ring declined)" if "ring" in r else r for r in plan.split(", "))
    for optin, want in ((227 * 1024, plan), (16 * 1024, small)):
        with fake_nvidia(max_shared_per_block_optin=optin):
            d = iop.create_descriptor(op, iop.create_handle("nvidia"), **_row_descs(op, (dt,), 8192, D))
            assert d.plan == want
            d.destroy()
