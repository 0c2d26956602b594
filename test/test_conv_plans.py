"""The NVIDIA planners of conv, conv_transpose and conv_backward, without a GPU: the rule tables'
choices over the case tables and a grid of sizes (every planned kernel compiled, the tables' ends,
the device's SM count in the grid rules), and every candidate built on a faked device (cuDNN
faked too); the CPU backends' workspace."""

from __future__ import annotations

import itertools

import pytest

from infiniop_py.descriptor import create_descriptor
from infiniop_py.devices import create_handle
from infiniop_py.dtypes import DType
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.tensor import create_tensor_descriptor as td

F32 = DType.F32
OPS = ("conv", "conv_transpose", "conv_backward")
H100_SMS = 132  # the fake device of the CPU-side planner tests


def _infos(op):
    """(case, dtype, Info) of every case of the op's table on the GPU dtypes (validated on the CPU)."""
    from infiniop_py.conv.problem import GPU_DTYPES

    h = create_handle("cpu")
    spec = get_spec(op)
    for case in get_cases(op):
        for dt in case.dtypes:
            if dt not in GPU_DTYPES:
                continue
            descs = {r.name: None for r in spec.tensors}
            for name, tc in case.tensors.items():
                if tc is not None:
                    shape, strides, d = tc.resolved(dt)
                    descs[name] = td(shape, strides, d)
            with create_descriptor(op, h, **descs, **case.attrs) as desc:
                yield case, dt, desc.info


BENCH_SHAPES = [  # (x, w, attrs): the benchmark suite's convolutions
    ((32, 512, 7, 7), (512, 512, 3, 3), {"pads": (1,)}),
    ((32, 64, 56, 56), (64, 64, 3, 3), {"pads": (1,)}),
    ((32, 256, 56, 56), (64, 256, 1, 1), {}),
    ((32, 128, 28, 28), (128, 128, 3, 3), {"pads": (1,), "strides": (2,)}),
    ((32, 256, 56, 56), (256, 1, 3, 3), {"pads": (1,), "groups": 256}),
    ((2, 4, 128, 128), (8, 4, 7, 7), {"pads": (3,)}),
    ((2, 4, 32, 32), (8, 4, 3, 3), {"pads": (1,)}),
]


@pytest.mark.parametrize("op", OPS)
def test_planned_kernels_are_compiled(op):
    """Every kernel the rule tables select for the case tables and the benchmark shapes is in
    compile_units(), which the CI compile check builds."""
    mod = __import__(f"ops.{op}.cuda", fromlist=["cuda"])
    compiled = {n for _, names in mod.compile_units() for n in names}
    seen = set()
    for _, _, info in _infos(op):
        name, kernels = mod.planned(info, H100_SMS)
        assert set(kernels) <= compiled, (name, set(kernels) - compiled)
        seen.add(name)
    if op == "conv":
        from infiniop_py.testing.conv_cases import out_shape

        h = create_handle("cpu")
        for dt in (DType.F16, DType.BF16, F32):
            for x, w, attrs in BENCH_SHAPES:
                y = out_shape(x, w, attrs)
                with create_descriptor("conv", h, td(y, None, dt), td(x, None, dt), td(w, None, dt), None, **attrs) as d:
                    name, kernels = mod.planned(d.info, H100_SMS)
                    assert set(kernels) <= compiled, (name, set(kernels) - compiled)
                    seen.add(name)
        from infiniop_py.conv.cudnn_plans import cudnn_available

        dense = {"cudnn"} if cudnn_available() else {"igemm64x64", "igemm128x64"}
        assert {"dwreg", "dw2d", "direct"} | dense <= seen, seen
    assert len(seen) >= 2, seen


@pytest.mark.parametrize("op", OPS)
def test_rule_tables_end_unconditionally(op):
    mod = __import__(f"ops.{op}.cuda", fromlist=["cuda"])
    tables = [mod.RULES] if hasattr(mod, "RULES") else [mod.DGRAD_RULES, mod.WGRAD_RULES]
    for rules in tables:
        assert rules[-1][0] == "default" and rules[-1][1](None) is True
        assert len({r[0] for r in rules}) == len(rules)


def _sweep_infos(op):
    """Info of the op's case tables and of a grid of sizes (f16, f32, f64)."""
    yield from (info for _, _, info in _infos(op))
    from infiniop_py.testing import conv_cases

    h = create_handle("cpu")
    spec = get_spec(op)
    make = {"conv": conv_cases.conv, "conv_transpose": conv_cases.ct, "conv_backward": conv_cases.bw}[op]
    for n, c, k, size, kk, s in itertools.product((1, 8, 32), (16, 64, 512), (16, 64, 512), (7, 28, 56), (1, 3), (1, 2)):
        w = (k, c, kk, kk) if op != "conv_transpose" else (c, k, kk, kk)
        case = make((n, c, size, size), w, True, (DType.F16, F32, DType.F64), "sweep", {"pads": (kk // 2,), "strides": (s,)})[0]
        for dt in case.dtypes:
            descs = {r.name: None for r in spec.tensors}
            for name, tc in case.tensors.items():
                if tc is not None:
                    descs[name] = td(*tc.resolved(dt))
            with create_descriptor(op, h, **descs, **case.attrs) as desc:
                yield desc.info


def _h100_tables(mod):
    """The op's rule tables as they were with the wave fixed at 264 blocks (an H100's 132 SMs,
    two blocks each): the rules that size grids restated with that constant."""
    from infiniop_py.conv.configs import CONFIGS, blocks

    old = {
        "large": lambda c: CONFIGS["igemm128x128"].applies(c) and blocks("igemm128x128", c) >= 264,
        "medium": lambda c: blocks("igemm128x64", c) >= 264,
    }
    if hasattr(mod, "RULES"):
        return [(mod.RULES, tuple((r, old.get(r, cond), cfg) for r, cond, cfg in mod.RULES))]
    wgrad_large = lambda p: mod._wgrad_tiles("wgrad128x64", p) >= 264  # noqa: E731
    wgrad = tuple((r, wgrad_large if r == "large" else cond, cfg) for r, cond, cfg in mod.WGRAD_RULES)
    dgrad = tuple((r, old.get(r, cond), cfg) for r, cond, cfg in mod.DGRAD_RULES)
    return [(mod.DGRAD_RULES, dgrad), (mod.WGRAD_RULES, wgrad)]


@pytest.mark.parametrize("cudnn_loads", [False, True])
@pytest.mark.parametrize("op", OPS)
def test_plans_on_132_sms_are_the_h100_constants(op, cudnn_loads, monkeypatch):
    """The rules size grids against the device's SM count: with 132 SMs (an H100) every table
    picks, and orders its fallbacks, as it did with the wave fixed at 264 blocks, over the case
    tables and a grid of sizes; with half the SMs some problems take, or fall back to, larger
    tiles."""
    from infiniop_py.conv.configs import wave
    from infiniop_py.cuda import cudnn
    from infiniop_py.planner import first_match, matching

    monkeypatch.setattr(cudnn, "available", lambda: cudnn_loads)
    mod = __import__(f"ops.{op}.cuda", fromlist=["cuda"])
    tables = _h100_tables(mod)
    changed = 0
    for info in _sweep_infos(op):
        probs = (mod.problem(info, H100_SMS),) if hasattr(mod, "RULES") else mod.problems(info, H100_SMS)
        halves = (mod.problem(info, 66),) if hasattr(mod, "RULES") else mod.problems(info, 66)
        for (rules, h100), p, half in zip(tables, probs, halves):
            assert wave(p) == 264
            assert first_match(rules, p) == first_match(h100, p), (op, p)
            assert matching(rules, p) == matching(h100, p), (op, p)
            changed += matching(rules, half) != matching(rules, p)
    assert changed, "no plan depends on the SM count"


def test_create_plans_for_the_devices_sm_count(monkeypatch):
    """create reads the SM count of the handle's device: a problem of 196 128-row tiles takes
    igemm64x64 on 132 SMs and igemm128x64 (two waves) on 66 (a faked device, no GPU)."""
    import collections
    import types

    from infiniop_py.conv import kernels
    from infiniop_py.cuda import compiler, cudnn, runtime
    from ops.conv import cuda

    monkeypatch.setattr(cudnn, "available", lambda: False)
    monkeypatch.setattr(kernels, "_module", lambda names, dev: types.SimpleNamespace(ptr=collections.defaultdict(int)))
    monkeypatch.setattr(compiler, "_launch_fn", lambda: lambda *a: None)
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    descs = dict(y=td((32, 64, 28, 28), None, F32), x=td((32, 64, 28, 28), None, F32), w=td((64, 64, 3, 3), None, F32), b=None)
    with create_descriptor("conv", create_handle("cpu"), **descs, pads=(1,)) as d:
        info = d.info
    for sms, want in ((132, "igemm64x64"), (66, "igemm128x64")):
        monkeypatch.setattr(runtime, "properties", lambda dev, sms=sms: {"sm_count": sms, "cc": 90, "name": "fake"})
        assert cuda.planned(info, sms)[0] == want
        assert cuda.create(info, types.SimpleNamespace(device_id=0)).plan_name == want


class _FakeCudnnConv:
    """Stands in for infiniop_py.cuda.cudnn.CudnnConv: records its construction and calls."""

    made: list = []

    def __init__(
        self, kind, x, w, y, pads, strides, dilations, groups=1, *, bias=None, allow_tf32=False, deterministic=True, device_id=0
    ):
        assert kind in ("fprop", "dgrad", "wgrad") and deterministic
        if kind == "wgrad":
            assert bias is None and x.shape[1] == w.shape[1] * groups and y.shape[1] == w.shape[0]
        else:  # its x is the data gradient / forward input, y the forward output
            assert x.shape[1] == w.shape[1] * groups and y.shape[1] == w.shape[0]
        self.kind, self.workspace_size, self.calls = kind, 1000, []
        _FakeCudnnConv.made.append(self)

    def __call__(self, x_ptr, w_ptr, y_ptr, ws_ptr, stream, bias_ptr=None):
        self.calls.append((x_ptr, w_ptr, y_ptr, ws_ptr, bias_ptr))


@pytest.mark.parametrize("op", OPS)
def test_every_candidate_builds_with_faked_gpu(op, monkeypatch):
    """The NVIDIA planners' plumbing without a GPU: for every case of the op's table, every
    candidate (our kernels and cuDNN, faked) builds, packs its launch arguments, places its
    workspace slices inside the workspace it reports and launches (driver faked)."""
    import collections
    import types

    from infiniop_py.conv import kernels, problem
    from infiniop_py.cuda import compiler, cudnn, runtime

    launched = []
    monkeypatch.setattr(kernels, "_module", lambda names, dev: types.SimpleNamespace(ptr=collections.defaultdict(int)))
    monkeypatch.setattr(compiler, "_launch_fn", lambda: lambda *a: launched.append(a))
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    monkeypatch.setattr(
        runtime, "properties", lambda d: {"sm_count": 132, "cc": 90, "name": "fake", "max_shared_per_block_optin": 232448}
    )
    monkeypatch.setattr(cudnn, "available", lambda: True)
    monkeypatch.setattr(cudnn, "CudnnConv", _FakeCudnnConv)
    mod = __import__(f"ops.{op}.cuda", fromlist=["cuda"])
    handle = types.SimpleNamespace(device_id=0)
    names = set()
    for _, _, info in _infos(op):
        for name, make in mod.candidates(info, handle):
            kernel = make()
            names.add(kernel.plan_name)
            assert kernel.plan_name == name
            ws = kernel.workspace_size
            for launch in kernel.launches:
                if isinstance(launch, compiler.Launch):
                    for _, idx, off in launch.slots:
                        assert idx != "ws" or off <= problem.align(ws), (name, off, ws)  # at the end: nothing written there
                else:
                    assert launch.ws_offset <= ws, (name, launch.ws_offset, ws)
            ptrs = [0x1000 * (i + 1) for i in range(len(get_spec(op).tensors))]
            kernel.launch(ptrs, 0x900000 if ws else 0, (), 0)
        assert (
            mod.create(info, handle).plan_name == mod.planned(info, runtime.properties(0)["sm_count"])[0]
        )  # the rule table's choice is built
    assert any("cudnn" in n for n in names) and len(names) >= 3, names


# -- CPU: no Python loop over elements; workspace 0 ----------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_cpu_workspace_is_zero(op):
    run = get_spec(op).cpu
    for _, _, info in _infos(op):
        assert getattr(run(info), "workspace_size", 0) == 0
