"""conv, conv_transpose, conv_backward beyond the generic case tables: bad input, the C-style
create, CPU plan names, determinism, the f32 accuracy claim, pinned and measured NVIDIA plans, the
workspace check, and upstream-style named-output GGUF files for conv_backward. The NVIDIA
planners on a faked device: test_conv_plans.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DEVICES, requires_gpu

import infiniop_py as iop
from infiniop_py.cpu import jit
from infiniop_py.descriptor import create_descriptor
from infiniop_py.devices import create_handle
from infiniop_py.dtypes import DType
from infiniop_py.registry import get_spec
from infiniop_py.status import InfiniopError, Status
from infiniop_py.tensor import create_tensor_descriptor as td
from infiniop_py.testing.cases import Case
from infiniop_py.testing.device import backend_for
from infiniop_py.testing.run import run_case

F32 = DType.F32
OPS = ("conv", "conv_transpose", "conv_backward")


# -- bad input ----------------------------------------------------------------------------------
def conv_descs(x=(2, 4, 7, 8), w=(6, 4, 3, 3), y=(2, 6, 5, 6), b=(6,), dt=F32, bdt=None):
    return dict(y=td(y, None, dt), x=td(x, None, dt), w=td(w, None, dt), b=None if b is None else td(b, None, bdt or dt))


BAD_CONV = [
    ("channels not divisible by groups", conv_descs(x=(2, 6, 7, 8), w=(4, 2, 3, 3), y=(2, 4, 5, 6), b=None), {"groups": 4},
     Status.BAD_TENSOR_SHAPE, "not divisible by groups"),
    ("out channels not divisible by groups", conv_descs(x=(2, 4, 7, 8), w=(6, 2, 3, 3), y=(2, 6, 5, 6)), {"groups": 4},
     Status.BAD_TENSOR_SHAPE, "not divisible by groups"),
    ("output shape off the formula", conv_descs(y=(2, 6, 6, 6)), {}, Status.BAD_TENSOR_SHAPE, "tensor 'y' shape"),
    ("kernel larger than the padded input", conv_descs(x=(1, 4, 3, 3), w=(6, 4, 5, 5), y=(1, 6, 1, 1)), {"pads": (0,)},
     Status.BAD_TENSOR_SHAPE, "larger than the padded input"),
    ("rank 2", conv_descs(x=(2, 4), w=(6, 4), y=(2, 6), b=None), {}, Status.BAD_TENSOR_SHAPE, "tensor 'x'"),
    ("rank 6", conv_descs(x=(1, 1, 2, 2, 2, 2), w=(1, 1, 1, 1, 1, 1), y=(1, 1, 2, 2, 2, 2), b=None), {},
     Status.BAD_TENSOR_SHAPE, "tensor 'x'"),
    ("bias dtype differs", conv_descs(bdt=DType.F16), {}, Status.BAD_TENSOR_DTYPE, "tensor 'b'"),
    ("weight dtype differs", {**conv_descs(), "w": td((6, 4, 3, 3), None, DType.F64)}, {}, Status.BAD_TENSOR_DTYPE, "tensor 'w'"),
    ("integer dtype", conv_descs(dt=DType.I32), {}, Status.BAD_TENSOR_DTYPE, "tensor 'x'"),
    ("weight channels wrong", conv_descs(w=(6, 3, 3, 3)), {}, Status.BAD_TENSOR_SHAPE, "tensor 'w'"),
    ("weight rank wrong", conv_descs(w=(6, 4, 3)), {}, Status.BAD_TENSOR_SHAPE, "tensor 'w'"),
    ("bias shape wrong", conv_descs(b=(5,)), {}, Status.BAD_TENSOR_SHAPE, "tensor 'b'"),
    ("strides of 3 ints for 2-d", conv_descs(), {"strides": (1, 1, 1)}, Status.BAD_PARAM, "'strides'"),
    ("stride 0", conv_descs(), {"strides": (0,)}, Status.BAD_PARAM, "'strides'"),
    ("negative padding", conv_descs(), {"pads": (-1,)}, Status.BAD_PARAM, "'pads'"),
    ("dilation 0", conv_descs(), {"dilations": (0,)}, Status.BAD_PARAM, "'dilations'"),
    ("groups 0", conv_descs(), {"groups": 0}, Status.BAD_PARAM, "'groups'"),
    ("n disagrees", conv_descs(), {"n": 3}, Status.BAD_PARAM, "'n'"),
    ("unknown plan", conv_descs(), {"plan": "fastest"}, Status.BAD_PARAM, "'plan'"),
    ("output with a zero stride", {**conv_descs(), "y": td((2, 6, 5, 6), (0, 30, 6, 1), F32)}, {}, Status.BAD_TENSOR_STRIDES, "'y'"),
]  # fmt: skip


def ct_descs(x=(1, 4, 5, 5), w=(4, 3, 3, 3), y=(1, 3, 11, 11), dt=F32):
    return dict(y=td(y, None, dt), x=td(x, None, dt), w=td(w, None, dt), b=None)


BAD_TRANSPOSE = [
    ("output_padding = stride", ct_descs(y=(1, 3, 12, 12)), {"strides": (2,), "output_padding": (2,)}, Status.BAD_PARAM,
     "'output_padding'"),
    ("output_padding above max(stride, dilation)", ct_descs(y=(1, 3, 14, 14)), {"strides": (2,), "dilations": (1,),
     "output_padding": (3,)}, Status.BAD_PARAM, "'output_padding'"),
    ("output shape off the formula", ct_descs(y=(1, 3, 11, 12)), {"strides": (2,)}, Status.BAD_TENSOR_SHAPE, "tensor 'y' shape"),
    ("x channels not divisible by groups", ct_descs(x=(1, 3, 5, 5), w=(3, 3, 3, 3), y=(1, 6, 7, 7)), {"groups": 2},
     Status.BAD_TENSOR_SHAPE, "not divisible by groups"),
    ("weight rows differ from x channels", ct_descs(w=(3, 3, 3, 3)), {"strides": (2,)}, Status.BAD_TENSOR_SHAPE, "tensor 'w'"),
    ("padding leaves no output", ct_descs(x=(1, 4, 1, 1), w=(4, 3, 1, 1), y=(1, 3, 1, 1)), {"pads": (1,)},
     Status.BAD_TENSOR_SHAPE, "leaves no output"),
]  # fmt: skip


def bw_descs(gi=(2, 4, 7, 8), gw=(6, 4, 3, 3), gb=(6,), go=(2, 6, 5, 6), x=(2, 4, 7, 8), w=(6, 4, 3, 3), dt=F32):
    d = dict(grad_input=gi, grad_weight=gw, grad_bias=gb, grad_output=go, input=x, weight=w)
    return {k: None if v is None else td(v, None, dt) for k, v in d.items()}


BAD_BACKWARD = [
    ("grad_input shape differs", bw_descs(gi=(2, 4, 7, 7)), {}, Status.BAD_TENSOR_SHAPE, "'grad_input'"),
    ("grad_weight shape differs", bw_descs(gw=(6, 4, 3, 2)), {}, Status.BAD_TENSOR_SHAPE, "'grad_weight'"),
    ("grad_bias shape wrong", bw_descs(gb=(4,)), {}, Status.BAD_TENSOR_SHAPE, "'grad_bias'"),
    ("grad_output off the formula", bw_descs(go=(2, 6, 7, 8)), {}, Status.BAD_TENSOR_SHAPE, "'grad_output'"),
    ("groups", bw_descs(), {"groups": 3}, Status.BAD_TENSOR_SHAPE, "not divisible by groups"),
    ("grad_bias dtype", {**bw_descs(), "grad_bias": td((6,), None, DType.F16)}, {}, Status.BAD_TENSOR_DTYPE, "'grad_bias'"),
]  # fmt: skip


BAD = [("conv", *b) for b in BAD_CONV] + [("conv_transpose", *b) for b in BAD_TRANSPOSE]
BAD += [("conv_backward", *b) for b in BAD_BACKWARD]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,label,descs,attrs,status,text", BAD, ids=[f"{b[0]}: {b[1]}" for b in BAD])
def test_bad_input(device, op, label, descs, attrs, status, text):
    with pytest.raises(InfiniopError) as e:
        create_descriptor(op, create_handle(device), **descs, **attrs)
    assert e.value.status == status and text in str(e.value), str(e.value)


# -- C-style create ---------------------------------------------------------------------------
def test_c_style_upstream_order():
    """infiniopCreateConvDescriptor(handle, y, x, w, b, pads*, strides*, dilations*, n[, groups])
    with int64 arrays, as upstream; the result equals the Pythonic create's."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    y = np.zeros((2, 6, 5, 3), np.float32)
    h = iop.create_handle("cpu")
    pads, strides, dil = (np.array(v, np.int64) for v in ((1, 0), (2, 2), (1, 2)))
    d = iop.infiniopCreateConvDescriptor(h, td(y.shape), td(x.shape), td(w.shape), td(b.shape), pads, strides, dil, 2, 2)
    n = iop.infiniopGetConvWorkspaceSize(d)
    iop.infiniopConv(d, None, n, y, x, w, b, None)
    iop.infiniopDestroyConvDescriptor(d)
    ref = F.conv2d(*(torch.from_numpy(a).double() for a in (x, w, b)), stride=2, padding=(1, 0), dilation=(1, 2), groups=2)
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(InfiniopError) as e:
        iop.infiniopCreateConvDescriptor(h, td(y.shape), td(x.shape), td(w.shape), td(b.shape), pads, strides, dil, 3, 2)
    assert e.value.status == Status.BAD_PARAM and "'n'" in str(e.value)


# -- plans ------------------------------------------------------------------------------------
def test_cpu_plan_names_and_pinning():
    h = create_handle("cpu")
    with create_descriptor("conv", h, **conv_descs(), plan="cpu-im2col") as d:
        assert d.info.attrs["plan"] == "cpu-im2col"
    depthwise = conv_descs(x=(2, 4, 7, 8), w=(4, 1, 3, 3), y=(2, 4, 5, 6), b=None)
    with create_descriptor("conv", h, **depthwise, groups=4) as d:
        assert d.plan == ("cpu-direct" if jit.kernels() is not None else "cpu-depthwise")
        assert d.workspace_size == 0
    with jit.pure_numpy(), create_descriptor("conv", h, **depthwise, groups=4) as d:
        assert d.plan == "cpu-depthwise"
    with create_descriptor("conv_backward", h, **bw_descs()) as d:
        assert d.plan == "cpu-im2col-col2im"
    with create_descriptor("conv_backward", h, **bw_descs(), plan="cpu-im2col-col2im-f64") as d:
        assert d.plan == "cpu-im2col-col2im-f64"
    a = td((3,), None, F32)
    d = create_descriptor("add", h, a, a, a)
    assert d.plan is None  # an operator whose backends do not name plans
    d.destroy()
    with pytest.raises(InfiniopError) as e:
        d.plan  # noqa: B018
    assert e.value.status == Status.BAD_PARAM


# -- determinism --------------------------------------------------------------------------------
def _run_raw(device, op, arrays: dict, attrs: dict, ws_fill: int = 0xA5, ws_short: int = 0):
    """Run ``op`` on contiguous ``arrays`` (outputs given as shapes); returns (outputs, workspace size)."""
    backend = backend_for(device)
    spec = get_spec(op)
    h = create_handle(device)
    descs, bufs = {}, {}
    dt = next(a for a in arrays.values() if isinstance(a, np.ndarray)).dtype
    dtype = DType.F32 if dt == np.float32 else DType.F64
    for r in spec.tensors:
        a = arrays.get(r.name)
        if a is None:
            descs[r.name], bufs[r.name] = None, None
        elif isinstance(a, np.ndarray):
            descs[r.name] = td(a.shape, None, dtype)
            bufs[r.name] = backend.upload(a.reshape(-1))
        else:
            descs[r.name] = td(a, None, dtype)
            bufs[r.name] = backend.upload(np.full(int(np.prod(a)), np.nan, dt))
    with create_descriptor(op, h, **descs, **attrs) as d:
        need = d.workspace_size
        ws = backend.empty_bytes(max(need - ws_short, 0), ws_fill) if need else None
        d.calculate(ws, *(bufs[r.name] for r in spec.tensors), workspace_size=need - ws_short)
        backend.synchronize()
    out = {}
    for r in spec.outputs:
        if bufs.get(r.name) is not None:
            out[r.name] = backend.download(bufs[r.name], dt).reshape(arrays[r.name])
    return out, need


def _backward_arrays(rng, x=(4, 32, 28, 28), w=(48, 32, 1, 1), go=(4, 48, 28, 28), dtype=np.float32):
    return {
        "grad_input": x,
        "grad_weight": w,
        "grad_bias": (w[0],),
        "grad_output": rng.standard_normal(go).astype(dtype),
        "input": rng.standard_normal(x).astype(dtype),
        "weight": rng.standard_normal(w).astype(dtype),
    }


@pytest.mark.parametrize("device", DEVICES)
def test_conv_backward_bitwise_reproducible(device):
    """Long row sums (N·H·W = 3136 per weight): several runs, workspace filled differently, give
    identical bits (split partials are summed in a fixed order; no atomics)."""
    rng = np.random.default_rng(1)
    arrays = _backward_arrays(rng)
    first, _ = _run_raw(device, "conv_backward", arrays, {})
    for fill in (0x00, 0xFF):
        again, _ = _run_raw(device, "conv_backward", arrays, {}, ws_fill=fill)
        for k in first:
            assert first[k].tobytes() == again[k].tobytes(), k


# -- the f32 accuracy claim ------------------------------------------------------------------------
def _accuracy(actual, x, w, groups, pads, reference_fn):
    """(max elementwise error / Σ|terms|, ‖error‖ / ‖reference‖) against float64."""
    import torch

    xt, wt = torch.from_numpy(x).double(), torch.from_numpy(w).double()
    ref = reference_fn(xt, wt).numpy()
    scale = reference_fn(xt.abs(), wt.abs()).numpy()
    err = np.abs(actual.astype(np.float64) - ref)
    return float(np.max(err / np.maximum(scale, 1e-300))), float(np.linalg.norm(err) / np.linalg.norm(ref))


ACCURACY = {  # device: (N, C, H, W, Cout): the seed case on the GPU, scaled down on the CPU
    "cpu": (4, 128, 7, 7, 64),
    "nvidia": (32, 512, 7, 7, 512),
}


# (plan for conv, plan for conv_backward, norm-relative bound): the default plans (f32 accumulated
# in f32, as torch: cuDNN on the GPU, the f32 BLAS on the CPU) and the exact plans pinned (our
# implicit-GEMM kernels on the GPU, the "-f64" plans on the CPU: f32 accumulated in f64, each
# result its exact sum rounded about once: the seed report's < 1e-7).
ACCURACY_PLANS = {
    "cpu": [(None, None, 4e-6), ("cpu-im2col-f64", "cpu-im2col-col2im-f64", 1e-7)],
    "nvidia": [(None, None, 4e-6), ("igemm128x64", "igemm128x64+wgrad128x64", 1e-7)],
}


@pytest.mark.parametrize("device", DEVICES)
def test_f32_accuracy_claim(device):
    """f32 convolution and its gradients against float64: within 1e-5 of the summed term
    magnitudes elementwise, and norm-relative under the plan's bound (ACCURACY_PLANS)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    n, c, hh, ww, cout = ACCURACY[device]
    rng = np.random.default_rng(2)
    x = rng.uniform(-2, 2, (n, c, hh, ww)).astype(np.float32)
    w = rng.uniform(-2, 2, (cout, c, 3, 3)).astype(np.float32)
    go = rng.uniform(-2, 2, (n, cout, hh, ww)).astype(np.float32)
    gi_fn = lambda a, b: torch.nn.grad.conv2d_input(x.shape, b, a, padding=1)  # noqa: E731
    gw_fn = lambda a, b: torch.nn.grad.conv2d_weight(b, w.shape, a, padding=1)  # noqa: E731
    for fwd_plan, bwd_plan, bound in ACCURACY_PLANS[device]:
        pin = {} if fwd_plan is None else {"plan": fwd_plan}
        out, _ = _run_raw(device, "conv", {"y": (n, cout, hh, ww), "x": x, "w": w}, {"pads": (1,), **pin})
        el, nr = _accuracy(out["y"], x, w, 1, 1, lambda a, b: F.conv2d(a, b, padding=1))
        assert el <= 1e-5 and nr < bound, ("y", fwd_plan, el, nr)
        pin = {} if bwd_plan is None else {"plan": bwd_plan}
        arrays = {"grad_input": x.shape, "grad_weight": w.shape, "grad_bias": None, "grad_output": go, "input": x, "weight": w}
        grads, _ = _run_raw(device, "conv_backward", arrays, {"pads": (1,), **pin})
        el, nr = _accuracy(grads["grad_input"], go, w, 1, 1, gi_fn)
        assert el <= 1e-5 and nr < bound, ("grad_input", bwd_plan, el, nr)
        el, nr = _accuracy(grads["grad_weight"], go, x, 1, 1, gw_fn)
        assert el <= 1e-5 and nr < bound, ("grad_weight", bwd_plan, el, nr)


# -- NVIDIA: every config, pinned, on problems that reach its special paths ------------------------
def _case(op, x, w, bias, attrs, dtypes=(DType.F16, DType.BF16, F32, DType.F64)):
    from infiniop_py.testing import conv_cases

    make = {"conv": conv_cases.conv, "conv_transpose": conv_cases.ct, "conv_backward": conv_cases.bw}[op]
    return make(x, w, bias, dtypes, f"{x} {w} {attrs}", attrs)[0]


PINNED = [  # (op, x, w, bias, attrs, plans)
    ("conv", (2, 8, 30, 37), (8, 1, 3, 3), True, {"pads": (1,), "groups": 8}, ("dwreg", "dw2d", "direct", "igemm64x16")),
    ("conv", (2, 6, 19, 23), (12, 1, 5, 5), True, {"pads": (2,), "groups": 6}, ("dwreg", "dw2d")),
    ("conv", (1, 3, 21, 9), (3, 1, 7, 7), False, {"pads": (3, 1), "groups": 3}, ("dwreg", "dw2d")),
    ("conv", (3, 4, 9, 40), (4, 1, 7, 7), False, {"pads": (3,), "strides": (2,), "groups": 4}, ("dw2d",)),
    ("conv", (2, 5, 11, 13), (5, 1, 3, 2), True, {"dilations": (2, 1), "groups": 5}, ("dw2d",)),
    ("conv", (2, 4, 70), (8, 1, 5), True, {"pads": (2,), "groups": 4}, ("dw2d", "direct")),
    ("conv", (2, 4, 33, 31), (8, 4, 7, 7), True, {"pads": (3,)}, ("direct", "igemm64x16")),
    ("conv", (2, 3, 9, 10, 11), (5, 3, 3, 3, 3), True, {"pads": (1,)}, ("direct", "igemm64x16", "igemm64x64")),
    ("conv", (3, 24, 13, 11), (150, 24, 3, 3), True, {"pads": (1,), "strides": (2, 1)},
     ("igemm64x64", "igemm128x64", "igemm128x128")),
    ("conv_transpose", (2, 20, 7, 6), (20, 70, 4, 4), True, {"strides": (2,), "pads": (1,)},
     ("igemm64x16", "igemm64x64", "igemm128x64", "igemm128x128")),
    ("conv_transpose", (2, 6, 5, 4), (6, 3, 3, 3), True, {"strides": (3, 2), "dilations": (2, 3), "output_padding": (1, 2),
     "groups": 3}, ("igemm64x16", "igemm64x64")),
    ("conv_backward", (3, 20, 17, 15), (40, 20, 3, 3), True, {"pads": (1,)},
     ("igemm64x16+wgrad16x64", "igemm64x64+wgrad64x64", "igemm128x64+wgrad128x64", "igemm128x128+wgrad64x64")),
    ("conv_backward", (8, 16, 30, 30), (24, 16, 1, 1), True, {}, ("igemm64x64+wgrad16x64", "igemm64x16+wgrad64x64")),
    ("conv", (2, 32, 9, 10), (40, 16, 3, 3), True, {"pads": (1,), "groups": 2}, ("cudnn",)),
    ("conv", (2, 16, 21), (24, 16, 3), True, {"strides": (2,), "dilations": (2,)}, ("cudnn",)),
    ("conv_transpose", (2, 24, 7, 6), (24, 16, 4, 4), True, {"strides": (2,), "pads": (1,)}, ("cudnn",)),
    ("conv_backward", (2, 24, 9, 8), (32, 24, 3, 3), True, {"pads": (1,)}, ("cudnn+cudnn", "cudnn+wgrad64x64", "igemm64x64+cudnn")),
]  # fmt: skip


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op,x,w,bias,attrs,plans", PINNED, ids=[f"{p[0]}-{i}" for i, p in enumerate(PINNED)])
def test_pinned_plans_match_reference(op, x, w, bias, attrs, plans):
    from infiniop_py.conv.cudnn_plans import cudnn_available
    from infiniop_py.conv.problem import acc_size

    if any("cudnn" in p for p in plans) and not cudnn_available():
        pytest.skip("cuDNN is not available")
    for plan in plans:
        ran = 0
        for dt in (DType.F16, DType.BF16, F32, DType.F64):
            if "128x128" in plan and acc_size(dt) == 8:
                continue
            case = _case(op, x, w, bias, {**attrs, "plan": plan}, (dt,))
            k = np.prod(w[1:]) * (w[1] if op == "conv_transpose" else 1)
            if dt is F32:
                case = Case(case.tensors, case.dtypes, case.description, attrs=case.attrs, atol=max(1e-5, 1e-6 * float(k) ** 0.5))
            try:
                r = run_case(op, case, dt, "nvidia")
            except InfiniopError as exc:  # cuDNN may decline a dtype (f64 engines are few)
                assert "cudnn" in plan and exc.status == Status.BAD_PARAM and "cannot run" in str(exc), (plan, dt.name, str(exc))
                continue
            assert r.ok, (plan, dt.name, r.messages)
            ran += 1
        assert ran >= 2 or (ran == 0 and "cudnn" in plan), (plan, ran)  # cuDNN may decline every dtype


@requires_gpu
@pytest.mark.gpu
def test_plan_reported_and_refused():
    from infiniop_py.cuda import runtime
    from ops.conv import cuda

    h = create_handle("nvidia")
    with create_descriptor("conv", h, **conv_descs(), plan="igemm64x64") as d:
        assert d.plan == "igemm64x64"
    with create_descriptor("conv", h, **conv_descs()) as d:
        assert d.plan == cuda.planned(d.info, runtime.properties(h.device_id)["sm_count"])[0]
    with pytest.raises(InfiniopError) as e:
        create_descriptor("conv", h, **conv_descs(), plan="dw2d")
    assert e.value.status == Status.BAD_PARAM and "cannot run" in str(e.value)
    tiny = conv_descs(x=(2, 4, 64, 64), w=(8, 4, 5, 5), y=(2, 8, 64, 64), b=(8,))
    with create_descriptor("conv", h, **tiny, pads=(2,)) as d:
        assert d.plan == "direct" and d.workspace_size == 0 and len(d._kernel.launches) == 1


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_measured_plan_runs(op):
    """plan="measure": every candidate is timed at create; the descriptor reports the winner,
    one of the candidates, and computes the right result."""
    case = {
        "conv": _case("conv", (4, 32, 14, 14), (32, 32, 3, 3), True, {"pads": (1,), "plan": "measure"}, (F32,)),
        "conv_transpose": _case(
            "conv_transpose", (4, 32, 7, 7), (32, 16, 4, 4), True, {"strides": (2,), "plan": "measure"}, (F32,)
        ),
        "conv_backward": _case("conv_backward", (4, 16, 14, 14), (16, 16, 3, 3), True, {"pads": (1,), "plan": "measure"}, (F32,)),
    }[op]
    case = Case(case.tensors, case.dtypes, case.description, attrs=case.attrs, atol=1e-4)
    assert run_case(op, case, F32, "nvidia").ok
    spec = get_spec(op)
    descs = {r.name: None for r in spec.tensors}
    for name, tc in case.tensors.items():
        if tc is not None:
            descs[name] = td(*tc.resolved(F32))
    with create_descriptor(op, create_handle("nvidia"), **descs, **case.attrs) as d:
        mod = __import__(f"ops.{op}.cuda", fromlist=["cuda"])
        assert d.plan in [n for n, _ in mod.candidates(d.info, create_handle("nvidia"))]


@requires_gpu
@pytest.mark.gpu
def test_workspace_one_byte_short_writes_nothing():
    rng = np.random.default_rng(3)
    arrays = _backward_arrays(rng)
    pin = {"plan": "igemm128x64+wgrad128x64"}  # our split-row weight gradient: a workspace to shorten
    _, need = _run_raw("nvidia", "conv_backward", arrays, pin)
    assert need > 0
    backend = backend_for("nvidia")
    spec = get_spec("conv_backward")
    h = create_handle("nvidia")
    descs, bufs = {}, {}
    for r in spec.tensors:
        a = arrays[r.name]
        descs[r.name] = td(a.shape if isinstance(a, np.ndarray) else a, None, F32)
        flat = a.reshape(-1) if isinstance(a, np.ndarray) else np.full(int(np.prod(a)), 7.0, np.float32)
        bufs[r.name] = backend.upload(flat)
    with create_descriptor("conv_backward", h, **descs, **pin) as d:
        ws = backend.empty_bytes(need - 1)
        with pytest.raises(InfiniopError) as e:
            d.calculate(ws, *(bufs[r.name] for r in spec.tensors))
        assert e.value.status == Status.INSUFFICIENT_WORKSPACE
        with pytest.raises(InfiniopError) as e:
            d.calculate(backend.empty_bytes(need), *(bufs[r.name] for r in spec.tensors), workspace_size=need - 1)
        assert e.value.status == Status.INSUFFICIENT_WORKSPACE
    backend.synchronize()
    for r in spec.outputs:
        got = backend.download(bufs[r.name], np.float32)
        assert np.all(got == 7.0), r.name


# -- upstream-style named-output GGUF files ------------------------------------------------------
BACKWARD_FIXTURES = [  # x, w, stride, padding, dilation (INT32 arrays as written), groups, bias
    ((2, 3, 7, 8), (4, 3, 3, 3), [1], [1], [1], 1, True),
    ((1, 4, 9, 7), (6, 2, 3, 2), [2, 3], [1, 0], [1, 2], 2, True),
    ((2, 3, 11), (5, 3, 3), [2], [0], [1], 1, False),
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), [1], [1], [2], 1, True),
    ((2, 6, 8, 8), (6, 1, 3, 3), [2], [1], [1], 6, False),
]


def write_conv_backward_fixture(path, rng) -> int:
    """conv_backward files in the named-output style as upstream's generators write them: every
    tensor with a ``<name>_shape`` INT32 array; inputs stored contiguous in their dtype; ``bias``
    (data unused) present only when grad_bias is requested; expected gradients stored under
    their own names as F64; ``stride``/``padding``/``dilation`` INT32 arrays of length 1 or n;
    ``groups`` int32; an ``output_padding`` key the operator ignores."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    import upstream_fixtures as up
    from gguf import GGMLQuantizationType as Q

    w = up.UpstreamStyleWriter(str(path))
    for dtype in (np.float32, np.float16):
        for xs, ws, stride, padding, dilation, groups, bias in BACKWARD_FIXTURES:
            nd = len(xs) - 2
            x, wt = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
            full = [tuple(v) * nd if len(v) == 1 else tuple(v) for v in (stride, padding, dilation)]
            fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
            xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
            wtt = torch.from_numpy(wt.astype(np.float64)).requires_grad_()
            bt = torch.zeros(ws[0], dtype=torch.float64, requires_grad=True)
            y = fn(xt, wtt, bt, stride=full[0], padding=full[1], dilation=full[2], groups=groups)
            gy = rng.standard_normal(tuple(y.shape)).astype(dtype)
            grads = torch.autograd.grad(y, (xt, wtt, bt), torch.from_numpy(gy.astype(np.float64)))
            answers = {"grad_input": grads[0].numpy(), "grad_weight": grads[1].numpy()}
            if bias:
                answers["grad_bias"] = grads[2].numpy()
            b = rng.standard_normal(ws[0]).astype(dtype) if bias else None

            @up._test("conv_backward")
            def t(w, x=x, wt=wt, gy=gy, b=b, answers=answers, stride=stride, padding=padding, dilation=dilation, groups=groups):
                w.array("stride", stride)
                w.array("padding", padding)
                w.array("dilation", dilation)
                w.array("output_padding", [0])
                w.w.add_int32(w.key("groups"), groups)
                inputs = {"grad_output": gy, "input": x, "weight": wt, "bias": b}
                for n, a in inputs.items():
                    if a is not None:
                        w.array(f"{n}_shape", a.shape)
                        w.tensor(n, a)
                for n, a in answers.items():
                    w.array(f"{n}_shape", a.shape)
                    w.tensor(n, a, Q.F64)

            w.add(t)
    w.save()
    return 2 * len(BACKWARD_FIXTURES)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_backward_named_output_fixture(tmp_path, capsys, device):
    import json

    from infiniop_py import cli

    path = tmp_path / "conv_backward.gguf"
    count = write_conv_backward_fixture(path, np.random.default_rng(4))
    out_json = tmp_path / "r.json"
    code = cli.main([str(path), f"--{device}", "--json", str(out_json)])
    out = capsys.readouterr().out
    data = json.loads(out_json.read_text())
    tests = data["files"][0]["tests"]
    assert code == 0 and len(tests) == count and all(t["status"] == "PASS" for t in tests), out


def test_named_output_fixture_binds_grad_bias_only_with_bias(tmp_path):
    from infiniop_py.gguf import GGUFFile, load_test

    path = tmp_path / "conv_backward.gguf"
    write_conv_backward_fixture(path, np.random.default_rng(5))
    with GGUFFile(str(path)) as f:
        for i, case in enumerate(BACKWARD_FIXTURES):
            t = load_test(f, i)
            assert t.style == "named"
            assert (t.tensors["grad_bias"] is not None) == case[-1]
            assert t.attrs["strides"] == tuple(case[2]) and t.attrs["groups"] == case[5]
            assert t.tensors["grad_input"].dtype is DType.F32


def test_cudnn_gets_only_packed_channel_orders():
    """cuDNN is offered channel-first or channel-last packed tensors only: a weight with its
    spatial axes swapped gave wrong results from one of its dgrad engines."""
    from infiniop_py.spatial import packed_channel_order as packed

    assert packed((2, 12, 7, 7), (588, 49, 7, 1))  # channel-first
    assert packed((2, 12, 7, 7), (588, 1, 84, 12))  # channel-last
    assert packed((1, 3, 1, 1), (5, 1, 9, 9))  # extent-1 axes: any stride
    assert packed((2, 5, 9), (45, 1, 5))  # 1-d channel-last
    assert not packed((40, 12, 3, 3), (108, 9, 1, 3))  # spatial axes swapped
    assert not packed((2, 12, 7, 7), (600, 49, 7, 1))  # padded batch stride
    assert not packed((2, 12, 7, 7), (588, 49, 7, 2))  # strided


@pytest.mark.parametrize("device", DEVICES)
def test_conv_transpose_nonfinite_weight(device):
    """A non-finite weight reaches exactly the outputs its products reach (inf, or NaN where
    +inf and -inf meet), as in torch: nothing leaks from the CPU backend's zero padding."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 2, (2, 3, 5, 6)).astype(np.float32)
    w = rng.uniform(-2, 2, (3, 4, 3, 4)).astype(np.float32)
    w[1, 2, 2, 3] = np.inf
    attrs = {"strides": (2,), "pads": (1,)}
    ref = F.conv_transpose2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), stride=2, padding=1).numpy()
    out, _ = _run_raw(device, "conv_transpose", {"y": ref.shape, "x": x, "w": w}, attrs)
    y = out["y"]
    assert np.array_equal(np.isnan(y), np.isnan(ref)) and np.array_equal(np.isinf(y), np.isinf(ref))
    fin = np.isfinite(ref)
    assert fin.any() and (~fin).any()
    np.testing.assert_allclose(y[fin], ref[fin], rtol=1e-5, atol=1e-4)


def test_cpu_batch_chunks(monkeypatch):
    """The CPU paths that cut the batch into chunks (im2col, col2im, Winograd) give the same
    results as in one piece: CHUNK_BYTES made small enough for one item per chunk."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    import infiniop_py.conv.cpu as conv_cpu

    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (5, 16, 9, 10)).astype(np.float32)
    w = rng.uniform(-2, 2, (12, 16, 3, 3)).astype(np.float32)
    b = rng.uniform(-2, 2, (12,)).astype(np.float32)
    ref = F.conv2d(*(torch.from_numpy(a).double() for a in (x, w, b)), padding=1).numpy()
    go = rng.uniform(-2, 2, ref.shape).astype(np.float32)
    gi_ref = torch.nn.grad.conv2d_input(x.shape, torch.from_numpy(w).double(), torch.from_numpy(go).double(), padding=1)
    whole, _ = _run_raw("cpu", "conv", {"y": ref.shape, "x": x, "w": w, "b": b}, {"pads": (1,)})
    monkeypatch.setattr(conv_cpu, "CHUNK_BYTES", 1 << 12)
    for plan in (None, "cpu-im2col-f64"):
        pin = {} if plan is None else {"plan": plan}
        out, _ = _run_raw("cpu", "conv", {"y": ref.shape, "x": x, "w": w, "b": b}, {"pads": (1,), **pin})
        np.testing.assert_allclose(out["y"], ref, rtol=1e-5, atol=1e-4)
        arrays = {"grad_input": x.shape, "grad_weight": w.shape, "grad_bias": None, "grad_output": go, "input": x, "weight": w}
        grads, _ = _run_raw("cpu", "conv_backward", arrays, {"pads": (1,), "strides": (1,), **pin})
        np.testing.assert_allclose(grads["grad_input"], gi_ref.numpy(), rtol=1e-5, atol=1e-4)
    out, _ = _run_raw("cpu", "conv", {"y": ref.shape, "x": x, "w": w, "b": b}, {"pads": (1,)})
    np.testing.assert_array_equal(out["y"], whole["y"])  # the same bits in chunks as in one piece
    wt = rng.uniform(-2, 2, (16, 6, 4, 4)).astype(np.float32)
    ct_ref = F.conv_transpose2d(torch.from_numpy(x).double(), torch.from_numpy(wt).double(), stride=2, padding=1).numpy()
    out, _ = _run_raw("cpu", "conv_transpose", {"y": ct_ref.shape, "x": x, "w": wt}, {"pads": (1,), "strides": (2,)})
    np.testing.assert_allclose(out["y"], ct_ref, rtol=1e-5, atol=1e-4)
