"""Hardening of the compile cache and of per-call host state: the bounded module cache and its
lock (with a stand-in compiler; with NVRTC on the GPU), launches keeping their module alive, one
call at a time per descriptor, per-stream tickets and cuBLASLt workspaces (stand-in CuPy), and
the 64-bit metadata packing. GPU tests skip without CuPy and a GPU.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import weakref

import numpy as np
import pytest
from conftest import requires_gpu
from hardening_support import THREADS, cupy_or_skip

import infiniop_py as iop
from infiniop_py.cuda import compiler
from infiniop_py.layout import pack_strided_meta
from infiniop_py.lru import LRU
from infiniop_py.status import Status, error


# --------------------------------------------------------------------------------------------
# CPU: the compile cache (stand-in compiler), one call at a time, 64-bit meta
# --------------------------------------------------------------------------------------------
class _StandIn:
    """A stand-in for compiler.Module: counts constructions, optionally waits or fails."""

    made: list = []
    hook = None

    def __init__(self, source, names, device_id):
        if _StandIn.hook is not None:
            _StandIn.hook(source)
        _StandIn.made.append(source)
        self.ptr = {n: compiler.KernelPtr(1000 + i) for i, n in enumerate(names)}
        for p in self.ptr.values():
            p.module = self


@pytest.fixture
def stand_in(monkeypatch):
    """compiler.Module replaced by _StandIn, and an empty cache of 4 modules."""
    monkeypatch.setattr(compiler, "Module", _StandIn)
    monkeypatch.setattr(compiler, "_modules", LRU(4))
    monkeypatch.setattr(compiler, "_compiling", {})
    _StandIn.made, _StandIn.hook = [], None
    yield _StandIn
    _StandIn.made, _StandIn.hook = [], None


def test_module_cache_is_a_bounded_lru(stand_in):
    assert isinstance(compiler.MODULE_CACHE_LIMIT, int) and compiler.MODULE_CACHE_LIMIT >= 1
    first = compiler.get_module("src0", ["k"], 0)
    held = first.ptr["k"]  # what a Launch keeps
    refs = [weakref.ref(first)]
    del first
    for i in range(1, 40):
        m = compiler.get_module(f"src{i}", ["k"], 0)
        refs.append(weakref.ref(m))
        del m
        assert compiler.cached_modules() <= 4
    gc.collect()
    alive = [r() is not None for r in refs]
    assert alive[0] and held.module is refs[0]()  # evicted, but kept loaded by its pointer
    assert sum(alive) == 5 and all(alive[-4:])  # the 4 most recent and the held one; the rest freed
    # a hit does not compile again and counts as recent use
    n = len(stand_in.made)
    assert compiler.get_module("src39", ["k"], 0) is refs[-1]()
    assert len(stand_in.made) == n
    # an evicted module is compiled again when asked for
    compiler.get_module("src1", ["k"], 0)
    assert len(stand_in.made) == n + 1 and stand_in.made[-1] == "src1"
    # names and device are part of the key
    a = compiler.get_module("x", ["k1"], 0)
    assert compiler.get_module("x", ["k2"], 0) is not a and compiler.get_module("x", ["k1"], 1) is not a


def test_module_compiled_once_under_threads(stand_in):
    stand_in.hook = lambda source: time.sleep(0.05)  # a slow compile: the others must wait for it
    barrier = threading.Barrier(THREADS)
    got = [None] * THREADS

    def ask(i):
        barrier.wait()
        got[i] = compiler.get_module("same", ["k<1>", "k<2>"], 0)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stand_in.made == ["same"] and all(g is got[0] for g in got)
    assert compiler._compiling == {}


def test_distinct_modules_compile_in_parallel(stand_in):
    """Two different modules compile at the same time (neither waits for the other's compile)."""
    meet = threading.Barrier(2, timeout=10)
    failures = []

    def hook(source):
        try:
            meet.wait()  # both compiles must be running at once to pass this
        except threading.BrokenBarrierError:
            failures.append(source)

    stand_in.hook = hook
    threads = [threading.Thread(target=compiler.get_module, args=(s, ["k"], 0)) for s in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and sorted(stand_in.made) == ["a", "b"]


def test_failed_compile_is_not_cached_and_every_caller_sees_it(stand_in):
    def fail(source):
        time.sleep(0.02)
        raise error(Status.INTERNAL_ERROR, "CUDA compilation failed: stand-in")

    stand_in.hook = fail
    errors = []

    def ask():
        try:
            compiler.get_module("bad", ["k"], 0)
        except iop.InfiniopError as exc:
            errors.append(exc.status)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [Status.INTERNAL_ERROR] * 4 and compiler.cached_modules() == 0 and compiler._compiling == {}
    stand_in.hook = None
    assert compiler.get_module("bad", ["k"], 0).ptr["k"] == 1000  # compiles once it can


def test_launch_keeps_its_kernel_pointer_and_module(monkeypatch):
    monkeypatch.setattr(compiler, "_launch_fn", lambda: lambda *a: None)

    class Owner:
        pass

    owner = Owner()
    p = compiler.KernelPtr(1234)
    p.module = owner
    ref = weakref.ref(owner)
    launch = compiler.Launch(p, (1,), (32,), [compiler.Slot(0)])
    del p, owner
    gc.collect()
    assert ref() is not None and launch.fn_ptr.module is ref() and launch._fn == 1234 and type(launch._fn) is int
    del launch
    gc.collect()
    assert ref() is None


class _StubKernel:
    """A CPU kernel stand-in with both entry points: raw pointers and the NumPy-view fast path."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, ptrs, ws_ptr, rt, stream):
        self.fn(ptrs, ws_ptr, rt, stream)

    def call_views(self, views, rt):
        self.fn(views, None, rt, None)


def test_one_call_at_a_time_per_descriptor(cpu_handle):
    """Calls of one descriptor from several threads enter its kernel one at a time (kernels keep
    per-call host state: packed pointers, parameter blocks, per-stream tickets)."""
    t = iop.create_tensor_descriptor((4,), None, iop.float32)
    d = iop.create_descriptor("add", cpu_handle, t, t, t)
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def kernel(ptrs, ws_ptr, rt, stream):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.002)
        with lock:
            state["now"] -= 1

    d._kernel = _StubKernel(kernel)
    bufs = [np.zeros(4, np.float32) for _ in range(3)]
    barrier = threading.Barrier(THREADS)

    def work():
        barrier.wait()
        for _ in range(5):
            d.calculate(None, *bufs)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert state == {"now": 0, "most": 1}

    def boom(*a):
        raise RuntimeError("kernel failed")

    d._kernel = _StubKernel(boom)
    with pytest.raises(RuntimeError):
        d.calculate(None, *bufs)
    d._kernel = _StubKernel(kernel)
    d.calculate(None, *bufs)  # a failed call leaves the descriptor usable (its turn is released)


def test_random_sample_ticket_arrays_are_bounded_per_stream(monkeypatch):
    """random_sample's one-launch greedy path keeps a ticket per stream for the most recent
    TICKET_STREAMS streams only; an evicted stream's ticket is freed after that stream is
    synchronised (NVIDIA planning on the CPU: stand-in compiler, runtime and CuPy)."""
    import types

    from infiniop_py import reduce as red
    from infiniop_py.cuda import runtime

    synced, freed = [], []

    class Mem:
        ptr = 4096

        def __del__(self):
            freed.append(self)

    fake_rt = types.SimpleNamespace(
        memsetAsync=lambda *a: None, streamSynchronize=synced.append, deviceSynchronize=lambda: synced.append("device")
    )
    fake_cp = types.SimpleNamespace(cuda=types.SimpleNamespace(alloc=lambda n: Mem(), runtime=fake_rt))

    def fake_module(self, source, names, device_id):
        self.ptr = {n: 1000 + i for i, n in enumerate(names)}
        self.kernels = {}

    monkeypatch.setattr(runtime, "cupy", lambda: fake_cp)
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    monkeypatch.setattr(runtime, "properties", lambda dev: {"sm_count": 4, "cc": 90, "name": "fake"})
    monkeypatch.setattr(compiler.Module, "__init__", fake_module)
    monkeypatch.setattr(compiler, "_modules", LRU(8))
    launched = []
    monkeypatch.setattr(compiler, "_launch_fn", lambda: None)
    monkeypatch.setattr(compiler.Launch, "__call__", lambda self, ptrs, ws, stream: launched.append(stream))
    rs = __import__("infiniop_ops.random_sample", fromlist=["x"])
    h = iop.create_handle("nvidia")
    d = iop.create_descriptor(
        "random_sample",
        h,
        iop.create_tensor_descriptor((), None, iop.int64),
        iop.create_tensor_descriptor((rs.GREEDY1_MAX + 1,), None, iop.float32),
    )
    k = d._kernel
    if not (k.multi and not k.greedy1):
        pytest.skip("this build plans no one-launch greedy finish")
    streams = list(range(1, 3 * red.TICKET_STREAMS + 1))
    for s in streams:
        for _ in range(2):  # the second call on a stream reuses its ticket
            k.launch([1 << 20, 1 << 21], 1 << 22, (0.0, 0.9, 1, 1.0), s)
    assert launched == [s for s in streams for _ in (0, 1)]
    assert len(k._tickets) == red.TICKET_STREAMS
    evicted = streams[: len(streams) - red.TICKET_STREAMS]
    gc.collect()
    assert synced == evicted and len(freed) == len(evicted)


def test_gemm_workspace_is_per_stream(monkeypatch):
    """cuBLASLt GEMMs on different streams never share a workspace: one per stream (allocated
    with that stream current, for CuPy's stream-ordered reuse), at most LT_WS_STREAMS kept, none
    allocated while the stream is being captured (the fallback workspace then); a plan asks
    again only when the stream changes (stand-in CuPy and runtime)."""
    import types

    from infiniop_py.blas import lt as blas
    from infiniop_py.cuda import runtime

    current, made = [0], []

    class Mem:
        def __init__(self, nbytes):
            self.ptr = (len(made) + 1) << 30
            self.stream = current[-1]
            made.append(self)

    class OnStream:
        def __init__(self, ptr, device_id):
            self.ptr = ptr

        def __enter__(self):
            current.append(self.ptr)

        def __exit__(self, *exc):
            current.pop()

    cuda = types.SimpleNamespace(ExternalStream=OnStream, Device=lambda d: contextlib.nullcontext(), alloc=Mem)
    monkeypatch.setattr(runtime, "cupy", lambda: types.SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(blas, "_RT", types.SimpleNamespace(streamIsCapturing=lambda s: s == 99))
    lt = object.__new__(blas.Lt)
    lt._ws, lt._ws_lock, lt.device_id, lt.ws_ptr = LRU(blas.LT_WS_STREAMS), threading.Lock(), 0, 7

    got = {}
    barrier = threading.Barrier(THREADS)

    def first_call(s):
        barrier.wait()
        got[s] = lt.stream_workspace(s)

    threads = [threading.Thread(target=first_call, args=(s,)) for s in range(1, THREADS + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({hit[1] for hit in got.values()}) == THREADS  # one workspace per stream
    assert all(hit[0].stream == s for s, hit in got.items())  # allocated on its own stream
    assert lt.stream_workspace(3) is got[3] and len(made) == THREADS
    assert lt.stream_workspace(99) is None and len(made) == THREADS  # capturing: nothing allocated
    for s in range(100, 120):
        lt.stream_workspace(s)
    assert len(lt._ws) == blas.LT_WS_STREAMS

    plan = object.__new__(blas.LtPlan)
    plan.lt, plan._ws_last = lt, (None, None)
    asked = []
    real = lt.stream_workspace
    lt.stream_workspace = lambda s: asked.append(s) or real(s)
    w = plan._workspace(5)
    assert plan._workspace(5) == w and asked == [5]
    assert plan._workspace(99) == 7 and plan._workspace(5) == w  # a capture leaves the last stream's
    assert plan._workspace(6) != w and asked == [5, 99, 6]


@pytest.mark.parametrize("n", [2**31 - 1, 2**31 + 5, 2**32 + 24, 2**40])
def test_strided_meta_packs_dims_beyond_32_bits(n):
    """A collapsed dim of 2^32 elements or more (e.g. a 1-D strided copy) packs; the 32-bit
    fast-division fields are unused there (the 64-bit index path divides)."""
    import struct

    blob = pack_strided_meta((n,), [(1,), (2,)])
    assert struct.unpack_from("<q", blob, 0)[0] == n
    nd = 8
    n_off = nd * 8 + 4 * nd * 8 + nd * 12
    assert struct.unpack_from("<q", blob, n_off)[0] == n


# --------------------------------------------------------------------------------------------
# GPU: the compile cache with NVRTC
# --------------------------------------------------------------------------------------------
PROBE = "template <int K> __global__ void iop_probe(int* out) {{ out[threadIdx.x] = K + {salt}; }}\n"


def _probe_run(cp, mod, k: int, salt: int) -> None:
    out = cp.zeros(32, cp.int32)
    launch = compiler.Launch(mod.ptr[f"iop_probe<{k}>"], (1,), (32,), [compiler.Slot(0)])
    launch([out.data.ptr], 0, cp.cuda.get_current_stream().ptr)
    cp.cuda.get_current_stream().synchronize()
    assert cp.asnumpy(out).tolist() == [k + salt] * 32


@requires_gpu
@pytest.mark.gpu
def test_real_compile_once_under_threads(monkeypatch):
    cp = cupy_or_skip()
    real = compiler._cupy_compile
    assert real() is not None, "CuPy's compile_with_cache is missing: modules go through RawModule's unbounded memo"
    calls = []

    def counting():
        fn = real()

        def compile_with_cache(*a, **kw):
            calls.append(1)
            return fn(*a, **kw)

        return compile_with_cache

    monkeypatch.setattr(compiler, "_cupy_compile", counting)
    salt = time.time_ns() % 100000  # a source no earlier run compiled in this process
    src = PROBE.format(salt=salt)
    barrier = threading.Barrier(THREADS)
    got = [None] * THREADS

    def ask(i):
        barrier.wait()
        got[i] = compiler.get_module(src, ["iop_probe<3>"], 0)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(g is got[0] for g in got)
    _probe_run(cp, got[0], 3, salt)


@requires_gpu
@pytest.mark.gpu
def test_real_module_cache_bound_and_lifetime(monkeypatch):
    """Many distinct sources: the cache stays within its bound, evicted modules no one uses are
    freed (so unloaded), and an evicted module that a launch still holds keeps working."""
    cp = cupy_or_skip()
    assert compiler._cupy_compile() is not None
    monkeypatch.setattr(compiler, "_modules", LRU(4))
    base = time.time_ns() % 1000000
    held = compiler.get_module(PROBE.format(salt=base), ["iop_probe<1>"], 0)
    out = cp.zeros(32, cp.int32)
    launch = compiler.Launch(held.ptr["iop_probe<1>"], (1,), (32,), [compiler.Slot(0)])
    held_ref = weakref.ref(held)
    del held
    refs = []
    for i in range(1, 25):
        m = compiler.get_module(PROBE.format(salt=base + i), ["iop_probe<1>", "iop_probe<2>"], 0)
        refs.append(weakref.ref(m))
        del m
        assert compiler.cached_modules() <= 4
    gc.collect()
    assert sum(r() is not None for r in refs) <= 4
    assert held_ref() is not None  # evicted, still loaded for its launch
    launch([out.data.ptr], 0, cp.cuda.get_current_stream().ptr)
    cp.cuda.get_current_stream().synchronize()
    assert cp.asnumpy(out).tolist() == [1 + base] * 32
    _probe_run(cp, compiler.get_module(PROBE.format(salt=base + 3), ["iop_probe<2>"], 0), 2, base + 3)


@requires_gpu
@pytest.mark.gpu
def test_kernel_attributes_through_the_driver():
    """The attributes planners read and set (as CuPy's RawKernel names them) work on Kernel."""
    cupy_or_skip()
    mod = compiler.get_module(PROBE.format(salt=0), ["iop_probe<5>"], 0)
    k = mod.kernels["iop_probe<5>"]
    assert k.num_regs > 0 and k.shared_size_bytes == 0 and k.local_size_bytes == 0
    k.max_dynamic_shared_size_bytes = 64 * 1024
    assert k.max_dynamic_shared_size_bytes == 64 * 1024
    k.preferred_shared_memory_carveout = 100
    with pytest.raises(AttributeError):
        k.no_such_attribute  # noqa: B018
