"""The create-time chooser (infiniop_py.cuda.autotune) and the cuDNN candidate's plan selection.

On a machine without a GPU: the chooser's logic runs on a fake clock, and CudnnConv's plumbing
(plan filtering and choice, operand order, the raw-pointer fast path and its fallback) runs
against a stand-in for the frontend and CuPy.
"""

from __future__ import annotations

import ctypes
import itertools
import types

import numpy as np
import pytest
from cudnn_support import _fresh_autotune  # noqa: F401 - autouse: a fresh autotune cache per test

from infiniop_py.cuda import autotune, runtime
from infiniop_py.cuda import cudnn as icudnn
from infiniop_py.dtypes import DType
from infiniop_py.status import InfiniopError, Status
from infiniop_py.tensor import TensorDescriptor, contiguous_strides

# -- autotune -------------------------------------------------------------------------------------


class FakeClock:
    """timer(run): runs the candidate and returns its preset time; counts samples per name."""

    def __init__(self, times):
        self.times = times
        self.calls = {k: 0 for k in times}

    def __call__(self, run):
        name = run(0)
        self.calls[name] += 1
        return self.times[name]


def cands(*names, fail=()):
    def make(n):
        def run(stream):
            if n in fail:
                raise InfiniopError(f"{n} cannot run", Status.NOT_IMPLEMENTED)
            return n

        return run

    return [(n, make(n)) for n in names]


def test_autotune_picks_fastest_and_caches_per_key_and_device():
    clock = FakeClock({"ours": 2.0, "cudnn": 1.0, "other": 3.0})
    c = cands("ours", "cudnn", "other")
    assert autotune.choose("k", c, device_id=0, timer=clock, reps=3) == "cudnn"
    assert clock.calls == {"ours": 4, "cudnn": 4, "other": 4}  # 1 warm-up + 3 samples each
    assert autotune.choose("k", c, device_id=0, timer=clock) == "cudnn"
    assert clock.calls["cudnn"] == 4  # cached: not measured again
    assert autotune.last_times("k", 0) == {"ours": 2.0, "cudnn": 1.0, "other": 3.0}
    autotune.choose("k", c, device_id=1, timer=clock, reps=3)  # another device measures again
    assert clock.calls["cudnn"] == 8
    clock.times["ours"] = 0.5  # a different candidate list for the same key is measured again
    assert autotune.choose("k", c[:2], device_id=0, timer=clock) == "ours"
    assert autotune.last_times("missing", 0) is None


def test_autotune_tie_goes_to_the_first_within_two_percent():
    clock = FakeClock({"ours": 1.015, "cudnn": 1.0})
    assert autotune.choose("tie", cands("ours", "cudnn"), device_id=0, timer=clock) == "ours"
    clock2 = FakeClock({"ours": 1.03, "cudnn": 1.0})
    assert autotune.choose("no tie", cands("ours", "cudnn"), device_id=0, timer=clock2) == "cudnn"
    assert autotune.pick(["a", "b", "c"], [1.0, 0.99, 0.5]) == "c"


def test_autotune_pin_is_validated_and_never_measures():
    clock = FakeClock({"ours": 1.0, "cudnn": 2.0})
    assert autotune.choose("p", cands("ours", "cudnn"), pin="cudnn", device_id=0, timer=clock) == "cudnn"
    assert clock.calls == {"ours": 0, "cudnn": 0}
    with pytest.raises(InfiniopError) as ei:
        autotune.choose("p", cands("ours", "cudnn"), pin="nope", device_id=0, timer=clock)
    assert ei.value.status is Status.BAD_PARAM


@pytest.mark.parametrize(
    "bad",
    [[], "ours", [("ours",)], [("ours", 3)], [(1, lambda s: 0)], cands("a", "a"), None],
    ids=["empty", "str", "short", "not-callable", "int-name", "duplicate", "none"],
)
def test_autotune_rejects_bad_candidates(bad):
    with pytest.raises(InfiniopError) as ei:
        autotune.choose("b", bad, device_id=0, timer=FakeClock({}))
    assert ei.value.status is Status.BAD_PARAM


def test_autotune_unhashable_key_is_bad_param():
    with pytest.raises(InfiniopError) as ei:
        autotune.choose(["list"], cands("a", "b"), device_id=0, timer=FakeClock({"a": 1, "b": 1}))
    assert ei.value.status is Status.BAD_PARAM


def test_autotune_single_candidate_does_not_measure():
    clock = FakeClock({"ours": 2.0, "cudnn": 1.0})
    assert autotune.choose("one", cands("ours"), device_id=0, timer=clock) == "ours"
    assert clock.calls == {"ours": 0, "cudnn": 0}


def test_autotune_failing_candidates():
    clock = FakeClock({"ours": 1.0, "cudnn": 2.0})
    assert autotune.choose("f", cands("ours", "cudnn", fail=("ours",)), device_id=0, timer=clock) == "cudnn"
    assert autotune.last_times("f", 0)["ours"] == float("inf")
    with pytest.raises(InfiniopError) as ei:  # all fail: the first one's error, status kept
        autotune.choose("g", cands("ours", "cudnn", fail=("ours", "cudnn")), device_id=0, timer=clock)
    assert ei.value.status is Status.NOT_IMPLEMENTED

    def boom(stream):
        raise ValueError("plain")

    with pytest.raises(InfiniopError) as ei:
        autotune.choose("h", [("a", boom), ("b", boom)], device_id=0, timer=clock)
    assert ei.value.status is Status.INTERNAL_ERROR


def test_autotune_measure_interleaves_and_takes_the_median():
    order = []
    samples = {"a": iter([9.0, 1.0, 2.0, 3.0]), "b": iter([9.0, 5.0, 4.0, 6.0])}

    def timer(run):
        name = run(0)
        order.append(name)
        return next(samples[name])

    times, errors = autotune.measure([lambda s: "a", lambda s: "b"], timer, reps=3, warmup=1)
    assert times == [2.0, 5.0] and errors == {}
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-ups, then rotating rounds


def test_autotune_imports_no_cupy():
    import subprocess
    import sys

    code = "import sys, infiniop_py.cuda.autotune, infiniop_py.cuda.cudnn; assert 'cupy' not in sys.modules; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent))


# -- CudnnConv plumbing against a stand-in frontend -----------------------------------------------


class FakeTensor:
    def __init__(self, g, name, dim=None, stride=None, data_type=None, virtual=False):
        self.uid = next(g.uids)
        self.name, self.dim, self.stride, self.data_type = name, dim, stride, data_type
        self.is_virtual, self.output = virtual, False
        g.all.append(self)

    def set_output(self, v):
        self.output = v
        return self

    def set_data_type(self, v):
        self.data_type = v
        return self

    def set_dim(self, v):
        self.dim = list(v)
        return self

    def set_stride(self, v):
        self.stride = list(v)
        return self


def _signature(g, by_name, cpp):
    """What the fake 'kernel' writes: the first byte of each input (X, W, Y, B order) and the plan."""
    return bytes([ctypes.c_uint8.from_address(by_name[n]).value for n in "XWYB" if n in by_name] + [cpp])


class FakeLowered:
    def __init__(self, g):
        self.g = g

    def _execute_with_raw_ptrs(self, addr, n, ws, handle, cpp):
        g = self.g
        if g.cfg.get("raw_fails"):
            raise TypeError("incompatible function arguments")
        assert handle == 1234 and n == len(g.operands())
        ptrs = (ctypes.c_void_p * n).from_address(addr)
        g.run(dict(zip(sorted(t.uid for t in g.operands()), ptrs)), cpp, garble=g.cfg.get("garble_raw", False))


class FakeGraph:
    """Enough of cudnn.pygraph for CudnnConv: tensors, the three convolutions, bias, plans."""

    instances: list = []

    def __init__(self, io_data_type=None, intermediate_data_type=None, compute_data_type=None, handle=None, cfg=None):
        self.uids = itertools.count(1)
        self.all, self.nodes, self.notes = [], [], []
        self.io, self.compute, self.handle = io_data_type, compute_data_type, handle
        self.cfg = cfg
        self._lowered_graph = FakeLowered(self)
        self.last_cpp = None
        FakeGraph.instances.append(self)

    def tensor(self, name, dim, stride, data_type):
        return FakeTensor(self, name, list(dim), list(stride), data_type)

    def _op(self, kind, inputs, attrs):
        self.nodes.append((kind, inputs, attrs))
        out = FakeTensor(self, f"{kind}::out", virtual=True)
        if "out_dims" in attrs:
            out.dim = attrs["out_dims"]
        return out

    def conv_fprop(self, image, weight, **attrs):
        return self._op("fprop", (image, weight), attrs)

    def conv_dgrad(self, loss, filter, **attrs):  # noqa: A002 - the frontend's keyword
        return self._op("dgrad", (loss, filter), attrs)

    def conv_wgrad(self, image, loss, **attrs):
        return self._op("wgrad", (image, loss), attrs)

    def bias(self, input, bias, **attrs):  # noqa: A002
        return self._op("bias", (input, bias), attrs)

    def validate(self):
        pass

    def build_operation_graph(self):
        pass

    def deselect_numeric_notes(self, notes):
        self.notes += notes

    def create_execution_plans(self, modes):
        self.modes = modes
        self.plans = [types.SimpleNamespace(cpp_index=10 + i) for i in range(self.cfg.get("plans", 3))]

    def check_support(self):
        if self.cfg.get("unsupported"):
            raise RuntimeError("no supported plan")

    def get_execution_plan_count(self):
        return len(self.plans)

    def build_plan_at_index(self, i):
        if i in self.cfg.get("refuse", ()):
            raise RuntimeError(f"plan {i} refused")

    def get_workspace_size_plan_at_index(self, i):
        return 4096 * i

    def get_plan_name_at_index(self, i):
        return f"eng{i}"

    def operands(self):
        return [t for t in self.all if not t.is_virtual or t.output]

    def _variant_pack_uids(self):
        uids = sorted(t.uid for t in self.operands())
        return uids[::-1] if self.cfg.get("unsorted") else uids

    def run(self, by_uid, cpp, garble=False):
        named = {t.name if not t.output else "OUT": by_uid[t.uid] for t in self.operands()}
        sig = _signature(self, named, cpp)
        if garble:
            sig = bytes(len(sig))
        ctypes.memmove(named["OUT"], sig, len(sig))
        self.last_cpp = cpp

    def execute_plan_at_index(self, pack, workspace, index, handle):
        if self.cfg.get("public_fails"):
            raise RuntimeError("public execute refused a bare address")
        assert handle.backend_handle == 1234 and isinstance(workspace, int)
        self.run({t.uid: p for t, p in pack.items()}, self.plans[index].cpp_index)


class FakeArray:
    def __init__(self, n):
        self.a = np.zeros(n, np.uint8)
        self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)

    def fill(self, v):
        self.a.fill(v)

    def copy(self):
        c = FakeArray(self.a.size)
        c.a[:] = self.a
        return c

    def __eq__(self, other):
        return self.a == other.a


class _Ctx:
    def __init__(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


def fake_cupy(limit):
    """limit[0]: allocations of this many bytes or more fail (None: no limit)."""
    stream = types.SimpleNamespace(ptr=0, synchronize=lambda: None)
    cuda = types.SimpleNamespace(
        Device=_Ctx, get_current_stream=lambda: stream, runtime=types.SimpleNamespace(getDevice=lambda: 0)
    )

    def empty(n, dtype=None):
        if limit[0] is not None and n >= limit[0]:
            raise MemoryError(f"out of memory allocating {n} bytes")
        return FakeArray(n)

    return types.SimpleNamespace(cuda=cuda, uint8=np.uint8, empty=empty)


def fake_frontend(cfg):
    enum = types.SimpleNamespace
    handle = types.SimpleNamespace(backend_handle=1234, stream=None)

    def set_stream(h, s):
        h.stream = s

    return types.SimpleNamespace(
        pygraph=lambda **kw: FakeGraph(cfg=cfg, **kw),
        create_handle=lambda: handle,
        set_stream=set_stream,
        data_type=enum(HALF="half", BFLOAT16="bf16", FLOAT="float", DOUBLE="double"),
        heur_mode=enum(A="A", FALLBACK="FALLBACK"),
        numerical_note=enum(TENSOR_CORE="TC", NONDETERMINISTIC="ND", DOWN_CONVERT_INPUTS="DC", REDUCED_PRECISION_REDUCTION="RPR"),
        convolution_mode=enum(CROSS_CORRELATION="xcorr"),
    )


@pytest.fixture
def fake(monkeypatch):
    """Installs the stand-ins; returns the config dict the fake graphs read (set before create)."""
    cfg = {}
    state = {"module": fake_frontend(cfg), "library": "fake", "backend": 91000, "frontend": "fake", "error": None}
    monkeypatch.setattr(icudnn, "_state", lambda: state)
    monkeypatch.setattr(icudnn, "_handles", {})
    monkeypatch.setattr(icudnn, "_graphs", icudnn.LRU(8))
    cfg["alloc_limit"] = limit = [None]
    cp = fake_cupy(limit)
    monkeypatch.setattr(runtime, "cupy", lambda: cp)
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    times = {10: 3.0, 11: 1.0, 12: 2.0}

    def timer(run):
        run(0)
        return times[FakeGraph.instances[-1].last_cpp]

    monkeypatch.setattr(autotune, "event_timer", lambda device_id, inner=3: timer)
    FakeGraph.instances.clear()
    return cfg


def td(shape, dt=DType.F32, strides=None):
    return TensorDescriptor(tuple(shape), tuple(strides) if strides else contiguous_strides(shape), dt)


def buffers(*descs):
    """Host buffers standing in for device memory, each with a distinct first byte."""
    out = []
    for i, d in enumerate(descs):
        b = np.zeros(max(d.span_bytes, 16), np.uint8)
        b[0] = 17 * (i + 1)
        out.append(b)
    return out


def test_fake_fprop_picks_fastest_plan_and_passes_pointers_in_order(fake):
    x, w, y = td((2, 4, 8, 8)), td((6, 4, 3, 3)), td((2, 6, 8, 8))
    conv = icudnn.CudnnConv("fprop", x, w, y, (1, 1), (1, 1), (1, 1))
    g = FakeGraph.instances[0]
    assert conv.plan_name == "eng1" and conv.workspace_size == 4096  # plan 1 (cpp 11) is the fastest
    assert set(g.notes) == {"TC", "ND", "DC", "RPR"}  # f32 without TF32, deterministic
    assert g.modes == ["A", "FALLBACK"]
    kind, _, attrs = g.nodes[0]
    assert (
        kind == "fprop"
        and attrs["padding"] == [1, 1]
        and attrs["convolution_mode"] == "xcorr"
        and attrs["compute_data_type"] == "float"
    )
    bx, bw, by = buffers(x, w, y)
    conv(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 5)
    assert bytes(by[:3]) == bytes([bx[0], bw[0], 11])
    assert g.handle.stream == 5
    assert conv._built.raw is not None  # the raw path was checked against the public one and kept
    conv._multi = True  # the several-GPU path (device context around the call) writes the same
    by[:3] = 0
    conv(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 6)
    assert bytes(by[:3]) == bytes([bx[0], bw[0], 11]) and g.handle.stream == 6
    # a second descriptor of the same problem reuses the built graph
    icudnn.CudnnConv("fprop", x, w, y, (1, 1), (1, 1), (1, 1))
    assert len(FakeGraph.instances) == 1


def test_fake_dgrad_wgrad_bias_and_1d(fake):
    x, w, y = td((2, 4, 9), DType.BF16), td((6, 2, 3), DType.BF16), td((2, 6, 5), DType.BF16)  # 1-d, groups 2, stride 2
    b = td((4,), DType.BF16)
    d = icudnn.CudnnConv("dgrad", x, w, y, [1], [2], [1], 2, bias=b, tune=False)
    g = FakeGraph.instances[-1]
    kinds = [n[0] for n in g.nodes]
    assert kinds == ["dgrad", "bias"]
    assert g.nodes[0][2]["out_dims"] == [2, 4, 1, 9] and g.nodes[0][2]["stride"] == [1, 2]
    assert set(g.notes) == {"ND", "RPR"}  # bf16: tensor cores stay
    bx, bw, by, bb = buffers(x, w, y, b)
    d(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 0, bias_ptr=bb.ctypes.data)
    assert bytes(bx[:4]) == bytes([bw[0], by[0], bb[0], 10])  # W, Y, B in, X out; first plan (no tuning)
    with pytest.raises(InfiniopError) as ei:
        d(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 0)
    assert ei.value.status is Status.NULL_POINTER
    wg = icudnn.CudnnConv("wgrad", x, w, y, [1], [2], [1], 2, deterministic=False, allow_tf32=True)
    g = FakeGraph.instances[-1]
    assert g.nodes[0][0] == "wgrad" and g.notes == ["RPR"]
    wg(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 0)
    assert bytes(bw[:3]) == bytes([bx[0], by[0], 11])


def test_fake_falls_back_to_public_execute(fake):
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    fake["garble_raw"] = True  # the raw entry writes the wrong bytes: not used
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert c._built.raw is None
    bx, bw, by = buffers(x, w, y)
    c(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 0)
    assert bytes(by[:3]) == bytes([bx[0], bw[0], 11])
    fake.pop("garble_raw")
    fake["unsorted"] = True  # an operand order that is not ascending uids: public path
    c2 = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, max_plans=1)
    assert c2._built.raw is None and c2.plan_name == "eng0"


def test_fake_one_failing_entry_leaves_the_other(fake):
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    bx, bw, by = buffers(x, w, y)
    fake["public_fails"] = True
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert c._built.raw is not None and c.plan_name == "eng1"
    fake["raw_fails"] = True  # both fail: NOT_IMPLEMENTED with the public path's reason
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, max_plans=2)
    assert ei.value.status is Status.NOT_IMPLEMENTED and "bare address" in str(ei.value)
    fake.pop("public_fails")  # the raw entry fails: the public one is timed and used
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, max_plans=3, workspace_limit=10**6)
    assert c._built.raw is None and c.plan_name == "eng1"
    c(bx.ctypes.data, bw.ctypes.data, by.ctypes.data, 0, 0)
    assert bytes(by[:3]) == bytes([bx[0], bw[0], 11])


def test_fake_plans_whose_workspace_cannot_be_allocated_are_dropped(fake):
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    fake["alloc_limit"][0] = 8192  # plan 2's 8 KiB workspace fails; plans 0 and 1 (and the scratch) remain
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert c.plan_name == "eng1" and set(c.plan_times) == {"0:eng0", "1:eng1"}
    fake["alloc_limit"][0] = 1  # nothing can be allocated
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, max_plans=2)
    assert ei.value.status is Status.NOT_IMPLEMENTED and "out of memory" in str(ei.value)


def test_fake_plan_refusals_and_limits(fake):
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    fake["refuse"] = (0, 1)
    fake["unsupported"] = True  # check_support's answer alone decides nothing
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert c.plan_name == "eng2"
    fake["refuse"] = (0, 1, 2)
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, workspace_limit=1)
    assert ei.value.status is Status.NOT_IMPLEMENTED and "no cuDNN plan builds" in str(ei.value)
    fake["refuse"] = ()
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, workspace_limit=4096)  # plan 2 needs 8192 bytes
    assert c.plan_name == "eng1"


def test_fake_frontend_exception_becomes_not_implemented(fake, monkeypatch):
    def broken(self):
        raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")

    monkeypatch.setattr(FakeGraph, "validate", broken)
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert ei.value.status is Status.NOT_IMPLEMENTED and "CUDNN_STATUS_NOT_SUPPORTED" in str(ei.value)


def test_fake_binding_without_convolution_mode_keyword(fake, monkeypatch):
    seen = []
    original = FakeGraph.conv_fprop

    def strict(self, image, weight, **attrs):
        seen.append("convolution_mode" in attrs)
        if "convolution_mode" in attrs:
            raise TypeError("conv_fprop(): incompatible function arguments")
        return original(self, image, weight, **attrs)

    monkeypatch.setattr(FakeGraph, "conv_fprop", strict)
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    c = icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert seen == [True, False] and c.plan_name == "eng1"


def test_fake_handle_failure_is_not_implemented(fake, monkeypatch):
    def no_handle():
        raise RuntimeError("cudnnCreate failed: CUDNN_STATUS_NOT_INITIALIZED")

    monkeypatch.setattr(icudnn._state()["module"], "create_handle", no_handle)
    x, w, y = td((1, 3, 5, 5)), td((2, 3, 1, 1)), td((1, 2, 5, 5))
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1)
    assert ei.value.status is Status.NOT_IMPLEMENTED and "cudnnCreate" in str(ei.value)


@pytest.mark.parametrize(
    "args, status",
    [
        (("conv", (1, 4, 5, 5), (2, 4, 1, 1), (1, 2, 5, 5)), Status.BAD_PARAM),
        (("fprop", (1, 4, 5, 5), (2, 3, 1, 1), (1, 2, 5, 5)), Status.BAD_TENSOR_SHAPE),
        (("fprop", (1, 4, 5), (2, 4, 1, 1), (1, 2, 5, 5)), Status.BAD_TENSOR_SHAPE),
        (("fprop", (1, 4, 5, 5, 5, 5), (2, 4, 1, 1, 1, 1), (1, 2, 5, 5, 5, 5)), Status.BAD_TENSOR_SHAPE),
        (("fprop", (0, 4, 5, 5), (2, 4, 1, 1), (0, 2, 5, 5)), Status.NOT_IMPLEMENTED),
    ],
    ids=["kind", "channels", "ranks", "rank-4-spatial", "empty"],
)
def test_fake_bad_problems(fake, args, status):
    kind, xs, ws, ys = args
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv(kind, td(xs), td(ws), td(ys), 0, 1, 1)
    assert ei.value.status is status


def test_fake_bad_dtype_pads_and_bias(fake):
    x, w, y = td((1, 4, 5, 5)), td((2, 4, 1, 1)), td((1, 2, 5, 5))
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, td((2, 4, 1, 1), DType.F16), y, 0, 1, 1)
    assert ei.value.status is Status.NOT_IMPLEMENTED
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", td((1, 4, 5, 5), DType.I32), td((2, 4, 1, 1), DType.I32), td((1, 2, 5, 5), DType.I32), 0, 1, 1)
    assert ei.value.status is Status.NOT_IMPLEMENTED
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, (0, 0, 0), 1, 1)
    assert ei.value.status is Status.BAD_PARAM
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("wgrad", x, w, y, 0, 1, 1, bias=td((2,)))
    assert ei.value.status is Status.BAD_PARAM
    with pytest.raises(InfiniopError) as ei:
        icudnn.CudnnConv("fprop", x, w, y, 0, 1, 1, bias=td((3,)))
    assert ei.value.status is Status.BAD_PARAM
