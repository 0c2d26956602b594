"""The cuDNN candidate (infiniop_py.cuda.cudnn): availability, and on a GPU with cuDNN its results
against torch float64. The create-time chooser and CudnnConv's plumbing against a stand-in
frontend are in test_cudnn_plans.py.

On a machine without a GPU: availability never raises and the smoke script's help runs. The GPU
tests check results against torch float64 where cuDNN and a GPU are present.
"""

from __future__ import annotations

import pytest
from conftest import gpu_available
from cudnn_support import _fresh_autotune  # noqa: F401 - autouse: a fresh autotune cache per test

from infiniop_py.cuda import cudnn as icudnn
from infiniop_py.dtypes import DType
from infiniop_py.status import InfiniopError, Status
from infiniop_py.tensor import TensorDescriptor

# -- availability ---------------------------------------------------------------------------------


def test_available_is_a_bool_and_never_raises():
    ok = icudnn.available()
    assert isinstance(ok, bool)
    info = icudnn.info()
    assert set(info) == {"frontend", "backend", "library", "error"}
    if not ok:
        assert isinstance(info["error"], str) and info["error"]
    assert isinstance(icudnn.libcudnn_candidates(), list)


@pytest.mark.skipif(icudnn.available(), reason="cuDNN is available here")
def test_unavailable_construction_is_not_implemented():
    t = TensorDescriptor((1, 4, 8, 8), None, DType.F32)
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", t, TensorDescriptor((4, 4, 3, 3), None, DType.F32), t, (1, 1), (1, 1), (1, 1))
    assert ei.value.status is Status.NOT_IMPLEMENTED
    assert "unavailable" in str(ei.value)


def test_libcudnn_candidates_finds_the_wheel_layout(tmp_path, monkeypatch):
    lib = tmp_path / "site-packages" / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudnn.so.9").write_bytes(b"")
    (lib / "libcudnn.so.9.10.2").write_bytes(b"")
    other = tmp_path / "ld"
    other.mkdir()
    (other / "libcudnn.so.9.1.0").write_bytes(b"")
    monkeypatch.setattr(icudnn, "_site_roots", lambda: [str(tmp_path / "site-packages")])
    monkeypatch.setenv("LD_LIBRARY_PATH", str(other))
    found = icudnn.libcudnn_candidates()
    assert found == [str(lib / "libcudnn.so.9"), str(other / "libcudnn.so.9.1.0")]


# -- on a GPU with cuDNN --------------------------------------------------------------------------

needs_cudnn = pytest.mark.skipif(
    not (gpu_available() and icudnn.available()), reason="needs an NVIDIA GPU, CuPy and the cuDNN frontend"
)

TOL = {DType.F32: 1e-5, DType.F16: 2e-3, DType.BF16: 1e-2}
TORCH = {DType.F32: "float32", DType.F16: "float16", DType.BF16: "bfloat16"}


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def _desc(t, dt):
    return TensorDescriptor(tuple(t.shape), tuple(t.stride()), dt)


def _run_case(kind, dt, n_sp, *, groups=1, stride=1, pad=1, dil=1, channels_last=False, c=8, k=8, size=9, ks=3, batch=2):
    torch = _torch()
    import torch.nn.functional as fn

    gen = torch.Generator(device="cuda").manual_seed(1)
    tdt = getattr(torch, TORCH[dt])
    xs = (batch, c) + (size,) * n_sp
    ws = (k, c // groups) + (ks,) * n_sp
    x = torch.randn(xs, device="cuda", generator=gen).to(tdt)
    w = (torch.randn(ws, device="cuda", generator=gen) / (c * ks**n_sp) ** 0.5).to(tdt)
    conv = {1: fn.conv1d, 2: fn.conv2d, 3: fn.conv3d}[n_sp]
    attrs = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    y_ref = conv(x.double(), w.double(), **attrs)
    dy = torch.randn(y_ref.shape, device="cuda", generator=gen).to(tdt)
    if channels_last and n_sp in (2, 3):
        fmt = torch.channels_last if n_sp == 2 else torch.channels_last_3d
        x, w, dy = (t.contiguous(memory_format=fmt) for t in (x, w, dy))
    grads = torch.ops.aten.convolution_backward(
        dy.double(),
        x.double(),
        w.double(),
        None,
        [stride] * n_sp,
        [pad] * n_sp,
        [dil] * n_sp,
        False,
        [0] * n_sp,
        groups,
        [True, True, False],
    )
    out = torch.empty_like({"fprop": dy, "dgrad": x, "wgrad": w}[kind])
    ref = {"fprop": y_ref, "dgrad": grads[0], "wgrad": grads[1]}[kind]
    args = {"fprop": (x, w, out), "dgrad": (out, w, dy), "wgrad": (x, out, dy)}[kind]
    cc = icudnn.CudnnConv(kind, *(_desc(t, dt) for t in args), [pad] * n_sp, [stride] * n_sp, [dil] * n_sp, groups)
    wsb = torch.empty(max(cc.workspace_size, 1), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def run():
        out.fill_(float("nan"))
        cc(*(t.data_ptr() for t in args), wsb.data_ptr(), stream)
        torch.cuda.synchronize()
        return out.clone()

    got = run()
    err = float((got.double() - ref).abs().max() / ref.abs().max())
    assert err <= TOL[dt], f"{kind} {dt.name} {n_sp}-d: relative error {err:.2e} (plan {cc.plan_name})"
    return cc, run, got


@needs_cudnn
@pytest.mark.gpu
@pytest.mark.parametrize("dt", [DType.F32, DType.F16, DType.BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("n_sp", [1, 2, 3])
def test_gpu_against_torch(kind, dt, n_sp):
    _run_case(kind, dt, n_sp)


@needs_cudnn
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize(
    "extra",
    [
        dict(groups=2),
        dict(groups=8, c=8, k=16),
        dict(dil=2, pad=2),
        dict(stride=2),
        dict(channels_last=True),
        dict(channels_last=True, stride=2, groups=2),
    ],
    ids=["groups2", "depthwise", "dilation", "stride2", "channels-last", "cl-stride-groups"],
)
@pytest.mark.parametrize("dt", [DType.F32, DType.BF16], ids=lambda d: d.name)
def test_gpu_layouts_and_attributes(kind, extra, dt):
    _run_case(kind, dt, 2, **extra)


@needs_cudnn
@pytest.mark.gpu
def test_gpu_wgrad_is_deterministic():
    _, run, first = _run_case(
        "wgrad", DType.F32, 2, c=64, k=64, size=28, batch=2
    )  # 1568-term sums: the 1e-5 max-relative bound holds for f32 rounding at this length
    torch = _torch()
    for _ in range(3):
        assert torch.equal(run(), first)


@needs_cudnn
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
def test_gpu_f32_is_not_tf32(kind):
    """512 input channels x 3x3: TF32's 10-bit mantissa would miss 1e-5 by two orders of magnitude."""
    _run_case(kind, DType.F32, 2, c=512, k=64, size=7, batch=4)


@needs_cudnn
@pytest.mark.gpu
def test_gpu_fprop_bias_fused():
    torch = _torch()
    import torch.nn.functional as fn

    x = torch.randn(2, 16, 10, 10, device="cuda")
    w = torch.randn(8, 16, 3, 3, device="cuda") / 12
    b = torch.randn(8, device="cuda")
    y = torch.empty(2, 8, 10, 10, device="cuda")
    try:
        cc = icudnn.CudnnConv(
            "fprop",
            _desc(x, DType.F32),
            _desc(w, DType.F32),
            _desc(y, DType.F32),
            [1, 1],
            [1, 1],
            [1, 1],
            bias=_desc(b, DType.F32),
        )
    except InfiniopError as exc:
        assert exc.status is Status.NOT_IMPLEMENTED  # cuDNN may refuse the fusion: callers add the bias themselves
        pytest.skip(f"cuDNN refused conv+bias: {exc}")
    ws = torch.empty(max(cc.workspace_size, 1), dtype=torch.uint8, device="cuda")
    cc(x.data_ptr(), w.data_ptr(), y.data_ptr(), ws.data_ptr(), torch.cuda.current_stream().cuda_stream, bias_ptr=b.data_ptr())
    ref = fn.conv2d(x.double(), w.double(), b.double(), padding=1)
    assert float((y.double() - ref).abs().max() / ref.abs().max()) <= 1e-5


def test_smoke_script_help_runs_without_a_gpu():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    r = subprocess.run(
        [sys.executable, str(root / "tools" / "cudnn_smoke.py"), "--help"], capture_output=True, text=True, cwd=root
    )
    assert r.returncode == 0 and "--reps" in r.stdout
