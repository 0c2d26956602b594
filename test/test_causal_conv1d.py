"""causal_conv1d family (ops.md §7): behaviour the case tables do not show.

- a decode step (causal_conv1d_update) after a forward over L steps equals the forward over the
  L + T steps, for its outputs and the state it leaves;
- the backward is bitwise reproducible run to run (dweight/dbias from fixed-order sums);
- the seed report's ten configurations meet its own error bars against float64 (dx 1e-4 f32,
  1e-2 f16; dweight/dbias 1.2e-3 f32, 1.2e-1 f16; like the report's, the bars of the long sums
  grow with the result: never below half an ulp of the stored value), the larger ones with
  INFINIOP_FULL=1;
- bad input raises InfiniopError with the right status naming the argument (both backends);
- a state index outside conv_state, or a slot named by several rows, is a padding slot: out 0,
  nothing read or written outside conv_state, the shared slot untouched;
- the NVIDIA planners request only kernels their ``compile_units()`` list (checked on a fake
  sm_90 device, so on any machine), and pick the channel-first / channel-last paths;
- NVIDIA only: unaligned buffers and longer warp runs give the same results.
"""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
from conftest import DEVICES, requires_gpu

import infiniop_py as iop
from infiniop_py import InfiniopError, Status
from infiniop_py.dtypes import DType, to_numpy
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.testing.data import random_data
from infiniop_py.testing.device import backend_for
from infiniop_py.testing.fake_device import fake_nvidia
from infiniop_py.testing.reference import reference

F16, BF16, F32, F64, I32, I64 = DType.F16, DType.BF16, DType.F32, DType.F64, DType.I32, DType.I64
FULL = os.environ.get("INFINIOP_FULL") == "1"


def td(shape, dt=F32, strides=None):
    return iop.create_tensor_descriptor(shape, strides, dt)


def run(op: str, device: str, arrays: dict, outs: dict, attrs=None, descs=None):
    """Run ``op`` once on contiguous buffers: ``arrays`` inputs (and in/out tensors), ``outs``
    output (shape, dtype) by name; returns the outputs (and in/out tensors) as NumPy arrays."""
    spec = get_spec(op)
    be = backend_for(device)
    h = iop.create_handle(device)
    bufs, tds = {}, {}
    for r in spec.tensors:
        a = arrays.get(r.name)
        if a is not None:
            tds[r.name] = td(a.shape, _dtype(a))
            bufs[r.name] = be.upload(np.ascontiguousarray(a))
        elif r.name in outs:
            shape, dt = outs[r.name]
            tds[r.name] = td(shape, dt)
            bufs[r.name] = be.upload(np.full(shape, np.nan, to_numpy(dt)))
        else:
            tds[r.name] = None
            bufs[r.name] = None
    tds.update(descs or {})
    d = iop.create_descriptor(op, h, **tds, **(attrs or {}))
    ws = be.empty_bytes(d.workspace_size) if d.workspace_size else None
    d.calculate(ws, *[bufs[r.name] for r in spec.tensors])
    be.synchronize()
    d.destroy()
    res = {}
    for r in spec.outputs:
        if bufs[r.name] is not None:
            t = tds[r.name]
            res[r.name] = be.download(bufs[r.name], to_numpy(t.dtype)).reshape(t.shape)
    return res


def _dtype(a: np.ndarray) -> DType:
    return {np.dtype(to_numpy(t)): t for t in (F16, BF16, F32, F64, I32, I64)}[a.dtype]


def rand(rng, shape, dt=F32):
    return random_data(rng, dt, shape)


# -- decode after prefill -----------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("W,T,silu", [(4, 1, False), (2, 3, True), (8, 8, True), (5, 2, False)])
def test_update_after_forward_equals_longer_forward(device, dt, W, T, silu):  # noqa: N803
    rng = np.random.default_rng(W * 10 + T)
    B, D, L = 3, 20, 37  # noqa: N806
    x = rand(rng, (B, D, L + T), dt)
    w, b = rand(rng, (D, W), dt), rand(rng, (D,), dt)
    init = rand(rng, (B, D, W - 1), dt)
    attrs = {"activation": "silu" if silu else "none"}
    full = run(
        "causal_conv1d",
        device,
        {"x": x, "weight": w, "bias": b, "initial_states": init},
        {"out": ((B, D, L + T), dt), "final_states": ((B, D, W - 1), dt)},
        attrs,
    )
    head = run(
        "causal_conv1d",
        device,
        {"x": np.ascontiguousarray(x[..., :L]), "weight": w, "bias": b, "initial_states": init},
        {"out": ((B, D, L), dt), "final_states": ((B, D, W - 1), dt)},
        attrs,
    )
    step = run(
        "causal_conv1d_update",
        device,
        {"x": np.ascontiguousarray(x[..., L:]), "conv_state": head["final_states"], "weight": w, "bias": b},
        {"out": ((B, D, T), dt)},
        attrs,
    )
    f64 = np.float64
    np.testing.assert_allclose(head["out"].astype(f64), full["out"][..., :L].astype(f64), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(step["out"].astype(f64), full["out"][..., L:].astype(f64), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(step["conv_state"].view(np.uint8), full["final_states"].view(np.uint8))


# -- determinism ----------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "layout,shape,W,silu,det",
    [
        ("cf", (4, 256, 1024), 4, True, True),
        ("cl", (4, 256, 1024), 4, False, True),
        ("cf", (2, 64, 300), 33, True, True),
        ("cf", (4, 128, 512), 3, False, False),
    ],
)
def test_backward_bitwise_reproducible(device, layout, shape, W, silu, det):  # noqa: N803
    B, D, L = shape  # noqa: N806
    rng = np.random.default_rng(7)
    x, dout = rand(rng, shape), rand(rng, shape)
    w, b = rand(rng, (D, W)), rand(rng, (D,))
    cl = (L * D, 1, D)
    descs = {}
    if layout == "cl":
        x, dout = [np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1) for a in (x, dout)]
        descs = {n: td(shape, F32, cl) for n in ("x", "dout", "dx")}
    outs = {"dx": (shape, F32), "dweight": ((D, W), F32), "dbias": ((D,), F32)}
    attrs = {"activation": "silu" if silu else "none", "deterministic": det}
    args = {"x": _flat(x, layout), "dout": _flat(dout, layout), "weight": w, "bias": b}
    first = run("causal_conv1d_backward", device, args, outs, attrs, descs)
    for _ in range(2):
        again = run("causal_conv1d_backward", device, args, outs, attrs, descs)
        for n in outs:
            np.testing.assert_array_equal(again[n].view(np.uint32), first[n].view(np.uint32), err_msg=n)


def _flat(a, layout):
    """The buffer holding ``a`` in ``layout`` (channel-last: (B, L, D) storage)."""
    return np.ascontiguousarray(a.transpose(0, 2, 1)) if layout == "cl" else np.ascontiguousarray(a)


# -- the seed report's error bars ----------------------------------------------------------------------
SEED_BARS = {F32: {"dx": 1e-4, "dweight": 1.2e-3, "dbias": 1.2e-3}, F16: {"dx": 1e-2, "dweight": 1.2e-1, "dbias": 1.2e-1}}
SEED_CASES = [
    pytest.param(c, dt, id=f"{c.description.split(' (')[0].replace(' ', '_')}-{dt.name}")
    for c in get_cases("causal_conv1d_backward")
    if c.description.split(" ")[0] in ("Small", "Medium", "Large", "Long", "Wide") and (FULL or "quick" in c.suites)
    for dt in (F32, F16)
    if dt in c.dtypes
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case,dt", SEED_CASES)
def test_seed_configurations_within_the_seed_reports_bars(device, case, dt):
    from infiniop_py.testing.run import make_inputs

    spec = get_spec("causal_conv1d_backward")
    rng = np.random.default_rng(3)
    layouts, data = make_inputs(spec, case, dt, rng)
    out_dt = {r.name: layouts[r.name][2] for r in spec.outputs if r.name in layouts}
    ins = {n: data.get(n) for n in ("x", "weight", "bias", "dout", "initial_states", "seq_idx")}
    want = reference(spec, ins, case.attrs, {}, out_dt)
    strides = {n: layouts[n][1] for n in layouts}
    descs = {n: td(layouts[n][0], layouts[n][2], strides[n]) for n in layouts}
    lay = "cl" if strides["x"][1] == 1 else "cf"
    args = {n: (_flat(v, lay) if n in ("x", "dout") else v) for n, v in ins.items() if v is not None}
    got = run("causal_conv1d_backward", device, args, {n: (layouts[n][0], out_dt[n]) for n in out_dt}, case.attrs, descs)
    if lay == "cl":
        got["dx"] = got["dx"].reshape(layouts["dx"][0][0], layouts["dx"][0][2], -1).transpose(0, 2, 1)
    half_ulp = {F32: 2.0**-24, F16: 2.0**-11}[dt]  # the rounding of the stored result itself
    for n, bar in SEED_BARS[dt].items():
        if not got[n].size:
            continue
        err = np.abs(got[n].astype(np.float64) - want[n])
        allowed = np.maximum(bar, half_ulp * np.abs(want[n]))  # the report's bars are adaptive for sums
        worst = int(np.argmax(err - allowed))
        assert (err <= allowed).all(), (
            f"{n}: error {err.flat[worst]:.3g} > {allowed.flat[worst]:.3g} (max abs error {err.max():.3g})"
        )


# -- bad input -------------------------------------------------------------------------------------
def expect(device, status, word, op, *descs, **attrs):
    h = iop.create_handle(device)
    with pytest.raises(InfiniopError) as ei:
        iop.create_descriptor(op, h, *descs, **attrs)
    assert ei.value.status == status, str(ei.value)
    assert word in str(ei.value), str(ei.value)


def fwd_descs(B=2, D=8, L=16, W=4, xdt=F32, wdt=F32, final=False, init=False, seq=None, w_shape=None):  # noqa: N803
    """(out, final_states, x, weight, bias, initial_states, seq_idx) descriptors."""
    return [
        td((B, D, L), xdt),
        td((B, D, W - 1), xdt) if final else None,
        td((B, D, L), xdt),
        td(w_shape or (D, W), wdt),
        td((D,), wdt),
        td((B, D, W - 1), xdt) if init else None,
        td((B, L), seq) if seq else None,
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_forward_bad_input(device):
    S, P, D_ = Status.BAD_TENSOR_SHAPE, Status.BAD_PARAM, Status.BAD_TENSOR_DTYPE  # noqa: N806
    expect(device, S, "'weight'", "causal_conv1d", *fwd_descs(W=1))
    expect(device, S, "'weight'", "causal_conv1d", *fwd_descs(W=65))
    expect(device, S, "'weight'", "causal_conv1d", *fwd_descs(w_shape=(9, 4)))  # mismatched D
    d = fwd_descs()
    d[4] = td((7,))
    expect(device, S, "'bias'", "causal_conv1d", *d)
    d = fwd_descs(init=True)
    d[5] = td((2, 8, 4))
    expect(device, S, "'initial_states'", "causal_conv1d", *d)
    expect(device, P, "'seq_idx'", "causal_conv1d", *fwd_descs(init=True, seq=I32))
    expect(device, P, "'final_states'", "causal_conv1d", *fwd_descs(final=True, seq=I32))
    expect(device, D_, "'seq_idx'", "causal_conv1d", *fwd_descs(seq=F32))
    d = fwd_descs(seq=I32)
    d[6] = td((2, 15), I32)
    expect(device, S, "'seq_idx'", "causal_conv1d", *d)
    expect(device, D_, "'x'", "causal_conv1d", *fwd_descs(xdt=F64))
    expect(device, D_, "'weight'", "causal_conv1d", *fwd_descs(wdt=F64))
    d = fwd_descs(wdt=F16)
    d[4] = td((8,), F32)
    expect(device, D_, "'bias'", "causal_conv1d", *d)
    d = fwd_descs()
    d[0] = td((2, 8, 16), F16)
    expect(device, D_, "'out'", "causal_conv1d", *d)
    d = fwd_descs()
    d[2] = td((2, 8))
    expect(device, S, "'x'", "causal_conv1d", *d)
    expect(device, P, "activation", "causal_conv1d", *fwd_descs(), activation="relu")
    expect(device, P, "activation", "causal_conv1d", *fwd_descs(), activation=1)
    d = fwd_descs()
    d[0] = td((2, 8, 16), F32, (0, 16, 1))
    expect(device, Status.BAD_TENSOR_STRIDES, "'out'", "causal_conv1d", *d)
    h = iop.create_handle(device)
    for act in (None, "none", "silu", "swish"):  # the aliases are accepted
        iop.create_descriptor("causal_conv1d", h, *fwd_descs(), activation=act).destroy()
    iop.create_descriptor("causal_conv1d", h, *fwd_descs(W=64, xdt=BF16, wdt=F16)).destroy()


def bwd_descs(B=2, D=8, L=16, W=4, bias=True, dbias=True, init=False, dinit=False, seq=None, ddt=F32):  # noqa: N803
    """(dx, dweight, dbias, dinitial_states, x, weight, bias, dout, initial_states, seq_idx)."""
    return [
        td((B, D, L)),
        td((D, W), ddt),
        td((D,)) if dbias else None,
        td((B, D, W - 1)) if dinit else None,
        td((B, D, L)),
        td((D, W)),
        td((D,)) if bias else None,
        td((B, D, L)),
        td((B, D, W - 1)) if init else None,
        td((B, L), seq) if seq else None,
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_backward_bad_input(device):
    op = "causal_conv1d_backward"
    expect(device, Status.BAD_TENSOR_SHAPE, "'weight'", op, *bwd_descs(W=1))
    expect(device, Status.BAD_PARAM, "'dbias'", op, *bwd_descs(bias=False))
    expect(device, Status.BAD_PARAM, "'dbias'", op, *bwd_descs(dbias=False))
    expect(device, Status.BAD_PARAM, "'dinitial_states'", op, *bwd_descs(dinit=True))
    expect(device, Status.BAD_PARAM, "'seq_idx'", op, *bwd_descs(init=True, seq=I64))
    expect(device, Status.BAD_TENSOR_DTYPE, "'dweight'", op, *bwd_descs(ddt=F16))
    expect(device, Status.BAD_TENSOR_DTYPE, "'seq_idx'", op, *bwd_descs(seq=DType.I16))
    d = bwd_descs()
    d[7] = td((2, 8, 15))
    expect(device, Status.BAD_TENSOR_SHAPE, "'dout'", op, *d)
    expect(device, Status.BAD_PARAM, "deterministic", op, *bwd_descs(), deterministic="yes")
    h = iop.create_handle(device)
    iop.create_descriptor(op, h, *bwd_descs(init=True), deterministic=False).destroy()  # no dinitial_states: fine


def upd_descs(B=4, D=8, T=2, W=4, S=None, idx=None, xdt=F32):  # noqa: N803
    """(out, conv_state, x, weight, bias, conv_state_indices)."""
    shape = (B, D, T) if T is not None else (B, D)
    return [td(shape, xdt), td((S or B, D, W - 1), xdt), td(shape, xdt), td((D, W)), td((D,)), td((B,), idx) if idx else None]


@pytest.mark.parametrize("device", DEVICES)
def test_update_bad_input(device):
    op = "causal_conv1d_update"
    expect(device, Status.BAD_TENSOR_SHAPE, "'x'", op, *upd_descs(T=9))
    expect(device, Status.BAD_TENSOR_SHAPE, "'x'", op, *upd_descs(T=0))
    expect(device, Status.BAD_TENSOR_SHAPE, "'weight'", op, *upd_descs(W=9))
    expect(device, Status.BAD_TENSOR_SHAPE, "'weight'", op, *upd_descs(W=1))
    expect(device, Status.BAD_TENSOR_SHAPE, "'conv_state'", op, *upd_descs(S=5))  # S != B without indices
    d = upd_descs()
    d[1] = td((4, 8, 4))
    expect(device, Status.BAD_TENSOR_SHAPE, "'conv_state'", op, *d)
    expect(device, Status.BAD_TENSOR_DTYPE, "'conv_state_indices'", op, *upd_descs(S=6, idx=F32))
    d = upd_descs(S=6, idx=I32)
    d[5] = td((3,), I32)
    expect(device, Status.BAD_TENSOR_SHAPE, "'conv_state_indices'", op, *d)
    d = upd_descs()
    d[1] = td((4, 8, 3), F16)
    expect(device, Status.BAD_TENSOR_DTYPE, "'conv_state'", op, *d)
    h = iop.create_handle(device)
    for S, idx in ((4, None), (9, I32), (1, I64), (0, I32)):  # noqa: N806
        iop.create_descriptor(op, h, *upd_descs(S=S, idx=idx) if S else upd_descs(idx=idx)).destroy()
    iop.create_descriptor(op, h, *upd_descs(T=None)).destroy()


# -- state indices are data: outside conv_state, or shared by rows, they are padding slots ----------
@pytest.mark.parametrize("device", DEVICES)
def test_update_out_of_range_and_shared_indices_are_padding_slots(device):
    rng = np.random.default_rng(5)
    B, D, T, W, S = 8, 16, 3, 4, 3  # noqa: N806
    x, w, b = rand(rng, (B, D, T)), rand(rng, (D, W)), rand(rng, (D,))
    idx = np.array([2, 3, -1, 1 << 30, -(1 << 30), 0, 1, 1], np.int32)  # rows 6 and 7 share slot 1
    guard = 7
    # conv_state lives inside a larger poisoned buffer: nothing outside its S rows may change
    buf = np.full((S + 2 * guard, D, W - 1), np.nan, np.float32)
    state = rand(rng, (S, D, W - 1))
    buf[guard : guard + S] = state
    be = backend_for(device)
    h = iop.create_handle(device)
    dbuf = be.upload(buf)
    out = be.upload(np.full((B, D, T), np.nan, np.float32))
    bufs = [out, None, be.upload(x), be.upload(w), be.upload(b), be.upload(idx)]
    base = _address(dbuf) + guard * D * (W - 1) * 4
    bufs[1] = base
    d = iop.create_descriptor("causal_conv1d_update", h, *upd_descs(B, D, T, W, S, I32))
    d.calculate(None, *bufs)
    be.synchronize()
    got = be.download(out, np.float32).reshape(B, D, T)
    after = be.download(dbuf, np.float32).reshape(buf.shape)
    ref = reference(
        get_spec("causal_conv1d_update"),
        {"x": x, "conv_state": state, "weight": w, "bias": b, "conv_state_indices": idx},
        {},
        {},
        {"out": F32, "conv_state": F32},
    )
    for r in (1, 2, 3, 4, 6, 7):  # index S (out of range), -1, 2^30, -2^30, a shared slot: padding
        assert not got[r].any(), r
    np.testing.assert_array_equal(after[guard + 1], state[1])  # the shared slot is untouched
    np.testing.assert_allclose(got, ref["out"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(after[guard : guard + S], ref["conv_state"], rtol=0, atol=0)
    assert np.isnan(after[:guard]).all() and np.isnan(after[guard + S :]).all()
    d.destroy()


def _address(buf) -> int:
    if isinstance(buf, np.ndarray):
        return buf.__array_interface__["data"][0]
    return buf.data.ptr


# -- GGUF -------------------------------------------------------------------------------------------
def test_gguf_forward_ans_and_bool_silu(tmp_path):
    from gguf_cases.causal_conv1d import GENERATOR
    from infiniop_py.gguf import GGUFFile, load_test, write_file

    case = next(c for c in get_cases("causal_conv1d") if c.description == "seq_idx i32")
    rec = GENERATOR.record(case, F32, 1)
    assert "ans" in rec.tensors and "ans_out" not in rec.tensors
    assert rec.keys["activation"][1] == "silu"
    del rec.keys["activation"]
    rec.set("silu", True, "bool")
    write_file(tmp_path / "c.gguf", [rec], "causal_conv1d")
    with GGUFFile(str(tmp_path / "c.gguf")) as f:
        t = load_test(f, 0)
    assert t.attrs["activation"] == "silu"
    assert "out" in t.expected


# -- NVIDIA planning, checked on a fake device --------------------------------------------------------
OPS = ("causal_conv1d", "causal_conv1d_backward", "causal_conv1d_update")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("tune", ["default", "long runs", "short runs"])
def test_planners_request_only_listed_kernels(op, tune):
    from infiniop_py.causal import plan
    from infiniop_py.testing.cases import instances

    consts = {"default": {"CF_TASKS_PER_SM": plan.CF_TASKS_PER_SM}, "long runs": {"CF_TASKS_PER_SM": 0, "CL_THREADS_PER_SM": 0}}
    consts["short runs"] = {"CF_TASKS_PER_SM": 1 << 40, "CL_THREADS_PER_SM": 1 << 40}
    spec = get_spec(op)
    listed = {n for _, names in spec.nvidia.compile_units() for n in names}
    with fake_nvidia() as requested, mock.patch.multiple(plan, **consts[tune]):
        h = iop.create_handle("nvidia")
        for case, dt in instances(get_cases(op)):
            descs = {n: None if tc is None else td(*_lay(tc, dt)) for n, tc in case.tensors.items()}
            d = iop.create_descriptor(op, h, **descs, **case.attrs)
            assert d.workspace_size >= 0
            d.destroy()
    assert requested, "no kernel requested"
    assert set(requested) <= listed, sorted(set(requested) - listed)


def _lay(tc, dt):
    shape, strides, d = tc.resolved(dt)
    return shape, d, strides


@pytest.mark.parametrize(
    "op,layout,want",
    [
        ("causal_conv1d", "cf", "cf"),
        ("causal_conv1d", "cl", "cl"),
        ("causal_conv1d_backward", "cf", "cf"),
        ("causal_conv1d_backward", "cl", "cl"),
    ],
)
def test_seed_layouts_take_the_fast_paths(op, layout, want):
    B, D, L = 8, 2048, 1024  # noqa: N806
    st = None if layout == "cf" else (L * D, 1, D)
    with fake_nvidia():
        h = iop.create_handle("nvidia")
        row = td((B, D, L), BF16, st)
        if op == "causal_conv1d":
            d = iop.create_descriptor(op, h, out=row, x=row, weight=td((D, 4)), bias=td((D,)))
        else:
            d = iop.create_descriptor(
                op, h, dx=row, dweight=td((D, 4)), dbias=td((D,)), x=row, weight=td((D, 4)), bias=td((D,)), dout=row
            )
        assert d._kernel.path == want
        if op != "causal_conv1d":  # partial rows: a small fraction of the data moved
            assert 0 < d.workspace_size <= B * D * L * 2 // 16
        d.destroy()


# -- NVIDIA only -----------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_gpu_unaligned_buffers_and_run_lengths_agree(layout):
    """Buffers one element off 16 bytes take the unaligned launches; longer warp runs and tiles
    (plan constants) give the same bits."""
    import cupy as cp

    from infiniop_py.causal import plan

    B, D, L, W = 2, 64, 1000, 4  # noqa: N806
    rng = np.random.default_rng(11)
    x, dout = rand(rng, (B, D, L), BF16), rand(rng, (B, D, L), BF16)
    w, b = rand(rng, (D, W)), rand(rng, (D,))
    st = None if layout == "cf" else (L * D, 1, D)
    h = iop.create_handle("nvidia")

    def once(offset: int):
        row = td((B, D, L), BF16, st)
        d = iop.create_descriptor(
            "causal_conv1d_backward", h, row, td((D, W)), td((D,)), None, row, td((D, W)), td((D,)), row, activation="silu"
        )
        bufs = []
        for a in (None, None, None, x, w, b, dout):
            if a is None:
                bufs.append(None)
                continue
            flat = _flat(a, layout).reshape(-1).view(np.uint16) if a.dtype.itemsize == 2 else a.reshape(-1)
            big = cp.zeros(flat.size + 8, dtype=flat.dtype)
            big[offset : offset + flat.size] = cp.asarray(flat)
            bufs.append(big[offset:])
        dx = cp.zeros(B * D * L + 8, cp.uint16)[offset:]
        dw, db = cp.zeros((D, W), cp.float32), cp.zeros((D,), cp.float32)
        ws = cp.empty(d.workspace_size, cp.uint8)
        d.calculate(ws, dx, dw, db, None, bufs[3], bufs[4], bufs[5], bufs[6])
        cp.cuda.get_current_stream().synchronize()
        d.destroy()
        return cp.asnumpy(dx[: B * D * L]), cp.asnumpy(dw), cp.asnumpy(db)

    base = once(0)
    for r in (once(1),):
        for a, c in zip(base, r):
            np.testing.assert_array_equal(a, c)
    with mock.patch.multiple(plan, CF_TASKS_PER_SM=0, CL_THREADS_PER_SM=0):
        longer = once(0)
    np.testing.assert_array_equal(base[0], longer[0])  # dx does not depend on the run length
    for a, c in zip(base[1:], longer[1:]):
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-4)  # the partial rows differ
