"""Hardening on the GPU: resources over many create/calculate/destroy cycles, the GGUF runner after
failures, the bounded compile cache, threads and streams, tensors of more than 2^31 elements, and
the per-operator subset that ``tools/sanitize.sh`` runs under compute-sanitizer.

GPU tests skip without CuPy and a GPU. What needs no GPU runs everywhere: the compile cache's bound
and lock (with a stand-in compiler), one call at a time per descriptor, per-stream tickets and
cuBLASLt workspaces (stand-in CuPy), the 64-bit metadata packing, the family table, and the CPU
side of the cycle, thread, GGUF-runner and large-tensor tests (small counts and sizes).

Operator families come from the registry, not from a list: an operator belongs to the shared
framework its NVIDIA factory comes from (``infiniop_py.elementwise``, ``infiniop_py.reduce.ops``,
``infiniop_py.reduce.softmax_ops``, ...) or, when its backend is its own, to its package (tril and
triu share one). The first operator of each family (by name) represents it.

Environment: ``IOP_HARDEN_CYCLES`` (default 10000) create/calculate/destroy cycles per family;
``IOP_HARDEN_REPORT=path`` appends one JSON line of measurements per measured test;
``IOP_SANITIZE=1`` turns on the sanitizer subset (marker ``sanitize``, see tools/sanitize.sh).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest
from conftest import DEVICES, requires_gpu

import infiniop_py as iop
from infiniop_py.cuda import compiler
from infiniop_py.dtypes import DType
from infiniop_py.layout import pack_strided_meta
from infiniop_py.lru import LRU
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.status import Status, error

CYCLES = int(os.environ.get("IOP_HARDEN_CYCLES", "10000"))
WARMUP = 100  # cycles before the first measurement
TRACED = 1000  # last cycles run under tracemalloc (it makes each cycle several times slower)
THREADS = 8
CALLS = 4  # calls per thread: a repeated gemm is replayed from a CUDA graph from its third call
MIB = 1 << 20
GIB = 1 << 30


def report(**fields) -> None:
    """Append one JSON line to IOP_HARDEN_REPORT (numbers for the record), if set."""
    path = os.environ.get("IOP_HARDEN_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")


# --------------------------------------------------------------------------------------------
# Families and small cases, from the registry
# --------------------------------------------------------------------------------------------
def family(spec) -> str:
    """The family of an operator's NVIDIA backend: the shared framework module its factory comes
    from (without a trailing ``cuda``), or its own package under ``infiniop_ops``."""
    parts = (getattr(spec.nvidia, "__module__", None) or type(spec.nvidia).__module__).split(".")
    if parts[0] == "infiniop_py":
        return ".".join(p for p in parts[1:] if p != "cuda") or "infiniop_py"
    return parts[1] if len(parts) > 1 else parts[0]


def nvidia_ops() -> list[str]:
    return [op for op in iop.list_ops() if get_spec(op).nvidia is not None]


def families() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for op in nvidia_ops():
        out.setdefault(family(get_spec(op)), []).append(op)
    return {k: sorted(v) for k, v in sorted(out.items())}


def representatives() -> list[str]:
    return [ops[0] for ops in families().values()]


def small_instance(op: str, prefer: DType = DType.F32):
    """(case index, case, dtype): the quick case of ``op`` with the fewest elements whose tensors
    are all non-empty (so kernels really run), in ``prefer`` when the case and the NVIDIA backend
    have it, else the case's first NVIDIA dtype."""
    spec = get_spec(op)
    allowed = spec.nvidia_dtypes or spec.dtypes
    best = None
    for index, case in enumerate(get_cases(op)):
        if "quick" not in case.suites:
            continue
        sizes = [math.prod(tc.shape) for tc in case.tensors.values() if tc is not None]
        if not sizes or min(sizes) == 0:
            continue
        dts = [d for d in case.dtypes if d in allowed]
        if not dts:
            continue
        dt = prefer if prefer in dts else dts[0]
        key = (dt is not prefer, sum(sizes), index)
        if best is None or key < best[0]:
            best = (key, index, case, dt)
    if best is None:
        pytest.skip(f"{op}: no non-empty quick case with an NVIDIA dtype")
    return best[1], best[2], best[3]


class Prepared:
    """One case instance's layouts and host data (inputs laid out with poisoned gaps, outputs
    poisoned), to upload as often as needed and run through the public API."""

    def __init__(self, op: str, index: int, case, dtype: DType, seed: int = 0):
        from infiniop_py.testing.cases import case_seed
        from infiniop_py.testing.data import layout, poisoned, span
        from infiniop_py.testing.run import make_inputs

        self.spec = spec = get_spec(op)
        self.case = case
        rng = np.random.Generator(np.random.PCG64(case_seed(seed, op, index)))
        self.layouts, data = make_inputs(spec, case, dtype, rng)
        self.flat = {}
        for role in spec.tensors:
            if role.name not in self.layouts or role.name in case.inplace:
                continue
            shape, strides, dt = self.layouts[role.name]
            if role.role == "out":
                self.flat[role.name] = poisoned(span(shape, strides), dt)
            else:
                self.flat[role.name] = layout(data[role.name], shape, strides, dt)
        self.outputs = [r.name for r in spec.outputs if r.name in self.layouts]

    def upload(self, xp) -> dict:
        """Fresh copies of every buffer (in-place outputs alias their input) in ``xp`` (NumPy for
        the CPU, CuPy: copied when this returns, the current stream is synchronised)."""
        if xp is np:
            bufs = {n: f.copy() for n, f in self.flat.items()}
        else:
            bufs = {n: xp.asarray(f.view(f"u{f.dtype.itemsize}")) for n, f in self.flat.items()}
            xp.cuda.get_current_stream().synchronize()
        for o, i in self.case.inplace.items():
            bufs[o] = bufs[i]
        return bufs

    def args(self, bufs) -> list:
        return [bufs.get(r.name) for r in self.spec.tensors]

    def create(self, handle):
        descs = {n: iop.create_tensor_descriptor(*self.layouts[n][:2], self.layouts[n][2]) for n in self.layouts}
        for role in self.spec.tensors:
            descs.setdefault(role.name, None)
        return iop.create_descriptor(self.spec.name, handle, **descs, **self.case.attrs)

    def output_bytes(self, xp, bufs) -> dict:
        get = np.asarray if xp is np else xp.asnumpy
        return {n: get(bufs[n]).tobytes() for n in self.outputs}


def workspace(xp, d):
    """A workspace for ``d`` with fixed contents (0xA5), or None."""
    return xp.full(d.workspace_size, 0xA5, xp.uint8) if d.workspace_size else None


def array_module(device: str):
    """NumPy for the CPU; CuPy (or a skip) for NVIDIA."""
    return np if device == "cpu" else cupy_or_skip()


def cupy_or_skip():
    from conftest import gpu_available

    if not gpu_available():
        pytest.skip("needs an NVIDIA GPU with CuPy")
    import cupy

    return cupy


# --------------------------------------------------------------------------------------------
# Memory readings
# --------------------------------------------------------------------------------------------
def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def memory(cp=None) -> dict:
    """Host RSS and, with CuPy, the default pool's used bytes and the device's used bytes
    (cudaMemGetInfo), after finishing queued work and collecting garbage."""
    gc.collect()
    out = {"rss": rss_bytes()}
    if cp is not None and cp is not np:
        cp.cuda.Device().synchronize()
        free, total = cp.cuda.runtime.memGetInfo()
        out["pool"] = cp.get_default_memory_pool().used_bytes()
        out["device"] = total - free
    return out


def traced_bytes(fn, times: int) -> int:
    """Bytes that ``times`` calls of ``fn`` leave allocated (tracemalloc, garbage collected)."""
    tracemalloc.start()
    try:
        for _ in range(times):
            fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def growth(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before}


# Bounds on what 10,000 cycles may add once warm: the pool's used bytes should not move at all
# (every buffer of a cycle is freed); device and RSS allow for allocator granularity, and catch
# any per-cycle leak of a few KiB; tracemalloc catches Python objects kept per cycle (~256 B).
POOL_BOUND = 1 * MIB
DEVICE_BOUND = 32 * MIB
RSS_BOUND = 32 * MIB
TRACED_BOUND = 256 * 1024


def check_flat(what: str, grown: dict, traced: int | None = None) -> None:
    problems = []
    if grown.get("pool", 0) > POOL_BOUND:
        problems.append(f"CuPy pool used bytes grew by {grown['pool']} (bound {POOL_BOUND})")
    if grown.get("device", 0) > DEVICE_BOUND:
        problems.append(f"device memory in use (cudaMemGetInfo) grew by {grown['device']} (bound {DEVICE_BOUND})")
    if grown.get("rss", 0) > RSS_BOUND:
        problems.append(f"host RSS grew by {grown['rss']} (bound {RSS_BOUND})")
    if traced is not None and traced > TRACED_BOUND:
        problems.append(f"tracemalloc: {traced} bytes still allocated after the traced window (bound {TRACED_BOUND})")
    assert not problems, f"{what}: " + "; ".join(problems)


# --------------------------------------------------------------------------------------------
# CPU: the family table, the compile cache (stand-in compiler), one call at a time, 64-bit meta
# --------------------------------------------------------------------------------------------
def test_family_table_covers_every_nvidia_operator():
    fams = families()
    members = [op for ops in fams.values() for op in ops]
    assert sorted(members) == sorted(nvidia_ops()) and len(set(members)) == len(members)
    # the shared frameworks are families of several operators each
    for shared, op in (("elementwise", "add"), ("reduce.ops", "reduce_max"), ("reduce.softmax_ops", "softmax")):
        assert op in fams[shared], (shared, fams.get(shared))
    assert len(fams["elementwise"]) > 10
    reps = representatives()
    assert len(reps) == len(fams) and all(small_instance(op)[1] is not None for op in reps)


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
# GGUF runner: a file with failing tests, run again and again in one process
# --------------------------------------------------------------------------------------------
def _failing_gguf(tmp_path) -> str:
    """add tests over 1 Mi elements: one passes, one fails its comparison, one fails at create."""
    from infiniop_py.gguf import TestRecord
    from infiniop_py.gguf.writer import write_file

    rng = np.random.default_rng(7)
    n = 1 << 20
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    recs = []
    for kind in ("pass", "wrong", "shape"):
        rec = TestRecord("add")
        rec.add_output("c", (n,), None, DType.F32)
        rec.add_input("a", a, DType.F32)
        rec.add_input("b", b if kind != "shape" else b[: n - 1], DType.F32)
        ans = a.astype(np.float64) + b.astype(np.float64)
        rec.add_expected("ans", ans + 1.0 if kind == "wrong" else ans)
        recs.append(rec)
    path = tmp_path / "failing.gguf"
    write_file(path, recs, "hardening: failing tests")
    return str(path)


@pytest.mark.parametrize("device", DEVICES)
def test_gguf_runner_frees_everything_after_failures(device, tmp_path, capsys):
    from infiniop_py import cli

    cp = cupy_or_skip() if device == "nvidia" else None
    path = _failing_gguf(tmp_path)
    flag = "--cpu" if device == "cpu" else "--nvidia"

    def run():
        code = cli.main([path, flag])
        out, _ = capsys.readouterr()
        assert code == 1 and "2 of 3 tests failed" in out, out

    run()  # warm: kernels compiled, pools filled
    before = memory(cp)
    traced = traced_bytes(run, 2)
    grown = growth(before, memory(cp))
    report(test="gguf_runner_failures", backend=device, runs=2, traced=traced, **grown)
    check_flat(f"infiniop-test {flag} on a failing file", grown, traced)


# --------------------------------------------------------------------------------------------
# GPU: 10,000 create / calculate / destroy cycles per family
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", representatives())
def test_cycles_keep_host_and_device_memory_flat(op, device):
    """CYCLES create / calculate / destroy cycles of the family's smallest case on the GPU (300
    on the CPU, which checks the harness in CI): after WARMUP cycles, memory stays flat."""
    xp = array_module(device)
    gpu = xp is not np
    cycles, warmup, traced_n = (CYCLES, WARMUP, TRACED) if gpu else (300, 50, 100)
    index, case, dt = small_instance(op)
    prep = Prepared(op, index, case, dt)
    h = iop.create_handle(device)
    bufs = prep.upload(xp)
    args = prep.args(bufs)

    def cycle():
        d = prep.create(h)
        ws = xp.empty(d.workspace_size, xp.uint8) if d.workspace_size else None
        d.calculate(ws, *args, **case.runtime)
        d.destroy()

    t0 = time.perf_counter()
    for _ in range(warmup):
        cycle()
    before = memory(xp)
    for _ in range(max(0, cycles - warmup - traced_n)):
        cycle()
    traced = traced_bytes(cycle, min(traced_n, max(0, cycles - warmup)))
    grown = growth(before, memory(xp))
    seconds = time.perf_counter() - t0
    fam = family(get_spec(op))
    report(
        test="cycles",
        backend=device,
        op=op,
        family=fam,
        case=index,
        dtype=dt.name,
        cycles=cycles,
        seconds=round(seconds, 2),
        traced=traced,
        **grown,
    )
    iop.destroy_handle(h)
    check_flat(f"{op} ({fam}) x {cycles} cycles on {device}", grown, traced)


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


# --------------------------------------------------------------------------------------------
# GPU: threads and streams give the serial results, bit for bit
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shared", [False, True], ids=["own-descriptors", "one-shared-descriptor"])
@pytest.mark.parametrize("op", representatives())
def test_threads_and_streams_match_the_serial_run(op, shared, device):
    """THREADS threads, each with its own buffers and workspace (and on the GPU its own
    non-blocking stream), make CALLS calls (own-descriptors: each creates its descriptor;
    one-shared-descriptor: all use one): every output equals, bitwise, the same calls made
    serially (on the GPU on the default stream)."""
    xp = array_module(device)
    gpu = xp is not np
    index, case, dt = small_instance(op)
    prep = Prepared(op, index, case, dt)
    h = iop.create_handle(device)
    d0 = prep.create(h)
    bufs = prep.upload(xp)
    ws = workspace(xp, d0)
    for _ in range(CALLS):
        d0.calculate(ws, *prep.args(bufs), **case.runtime)
    if gpu:
        xp.cuda.Device().synchronize()
    want = prep.output_bytes(xp, bufs)
    if not shared:
        d0.destroy()
    got = [None] * THREADS
    errors = []
    barrier = threading.Barrier(THREADS)

    def work(i):
        try:
            with xp.cuda.Device(0) if gpu else contextlib.nullcontext():
                stream = xp.cuda.Stream(non_blocking=True) if gpu else None
                mine = prep.upload(xp)
                d = d0 if shared else prep.create(h)
                w = workspace(xp, d)
                if gpu:
                    xp.cuda.get_current_stream().synchronize()
                barrier.wait()
                for _ in range(CALLS):
                    d.calculate(w, *prep.args(mine), stream=stream, **case.runtime)
                if gpu:
                    stream.synchronize()
                got[i] = prep.output_bytes(xp, mine)
                if not shared:
                    d.destroy()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if shared:
        d0.destroy()
    iop.destroy_handle(h)
    assert not errors, errors
    bad = [(i, n) for i, g in enumerate(got) for n in prep.outputs if g[n] != want[n]]
    assert not bad, f"{op} [{case.description}] {dt.name}: outputs differ from the serial run (thread, output): {bad}"


# --------------------------------------------------------------------------------------------
# More than 2^31 elements (f16 / u8; structured data whose result is known exactly). Each check
# runs on the GPU past 2^31 elements, and on the CPU at small sizes (which checks the checks).
# --------------------------------------------------------------------------------------------
GOLDEN = 0x9E3779B97F4A7C15


class Scale:
    """The array module (CuPy or NumPy), device and step size of one run of a large check."""

    def __init__(self, xp, device: str, chunk: int):
        self.xp, self.device, self.chunk = xp, device, chunk

    def run(self, op, descs, bufs, **attrs) -> None:
        xp = self.xp
        h = iop.create_handle(self.device)
        d = iop.create_descriptor(op, h, *descs, **attrs)
        ws = xp.empty(d.workspace_size, xp.uint8) if d.workspace_size else None
        d.calculate(ws, *bufs)
        if self.device != "cpu":
            xp.cuda.Device().synchronize()
        d.destroy()
        iop.destroy_handle(h)

    def pattern(self, k):
        """A byte per index (k a uint64 array): the top byte of a multiplicative hash."""
        xp = self.xp
        return ((k.astype(xp.uint64) * xp.uint64(GOLDEN)) >> xp.uint64(56)).astype(xp.uint8)

    def half(self, k):
        """f16 values in [-8, 8) in steps of 1/16 (exact), from the byte pattern."""
        xp = self.xp
        return ((self.pattern(k).astype(xp.float32) - 128.0) / 16.0).astype(xp.float16)

    def fill(self, flat, fn) -> None:
        """flat[k] = fn(k) for every k (flat a 1-D contiguous array), a chunk at a time."""
        xp, n = self.xp, flat.size
        for s in range(0, n, self.chunk):
            e = min(n, s + self.chunk)
            flat[s:e] = fn(xp.arange(s, e, dtype=xp.uint64))

    def grid(self, r0, r1, cols, row_step, col_step):
        """Flat indices r * row_step + c * col_step for rows [r0, r1) and cols [0, cols) (uint64)."""
        xp = self.xp
        rows = xp.arange(r0, r1, dtype=xp.uint64)[:, None] * xp.uint64(row_step)
        return rows + xp.arange(cols, dtype=xp.uint64)[None, :] * xp.uint64(col_step)

    def check_rows(self, what, out2d, expected_rows) -> None:
        """Every block of rows of out2d equals expected_rows(r0, r1) (compared as values)."""
        xp, R = self.xp, out2d.shape[0]
        step = max(1, self.chunk // max(1, out2d.shape[1]))
        for r0 in range(0, R, step):
            r1 = min(R, r0 + step)
            ok = out2d[r0:r1] == expected_rows(r0, r1)
            if not bool(ok.all()):
                bad = xp.argwhere(~ok)[0]
                raise AssertionError(f"{what}: first wrong element at [{r0 + int(bad[0])}, {int(bad[1])}]")

    def marked(self, R: int, C: int, rows, cols, vals):  # noqa: N803
        """An (R, C) f16 matrix of zeros but for x[rows[i], cols[i]] = vals[i], built a block of
        rows at a time."""
        xp = self.xp
        x = xp.empty((R, C), xp.float16)
        step = max(1, self.chunk // C)
        for r0 in range(0, R, step):
            r1 = min(R, r0 + step)
            block = xp.zeros((r1 - r0, C), xp.float16)
            sel = xp.flatnonzero((rows >= r0) & (rows < r1))
            block[rows[sel] - r0, cols[sel]] = vals[sel]
            x[r0:r1] = block
        return x

    def markers(self, rows: int, extent: int):
        """Per row r: a position in [0, extent) and a value 1..61 (exact in f16)."""
        xp = self.xp
        r = xp.arange(rows, dtype=xp.uint64)
        pos = ((r * xp.uint64(GOLDEN)) >> xp.uint64(33)) % xp.uint64(extent)
        return pos.astype(xp.int64), (r % xp.uint64(61) + xp.uint64(1)).astype(xp.float16)


def td(shape, strides=None, dtype=iop.float16):
    return iop.create_tensor_descriptor(shape, strides, dtype)


def big_add_dense(s: Scale, n: int) -> int:
    """u8 add, contiguous: the dense 16-byte path and its scalar tail."""
    xp = s.xp
    a, b, c = (xp.empty(n, xp.uint8) for _ in range(3))
    s.fill(a, s.pattern)
    s.fill(b, lambda k: s.pattern(k + xp.uint64(12345)))
    s.run("add", [td((n,), dtype=iop.uint8)] * 3, [c, a, b])

    def want(r0, r1):
        k = xp.arange(r0, r1, dtype=xp.uint64)
        return (s.pattern(k) + s.pattern(k + xp.uint64(12345)))[:, None]

    s.check_rows("add", c.reshape(-1, 1), want)
    return n


def big_unary_transposed(s: Scale, R: int, C: int) -> int:  # noqa: N803
    """f16 relu of a transposed input: the strided path (64-bit indices past 2^31)."""
    xp = s.xp
    x = xp.empty(R * C, xp.float16)  # holds x^T: element [i, j] at j * R + i
    y = xp.empty((R, C), xp.float16)
    s.fill(x, s.half)
    s.run("relu", [td((R, C)), td((R, C), (1, R))], [y, x])
    s.check_rows("relu (transposed input)", y, lambda r0, r1: xp.maximum(s.half(s.grid(r0, r1, C, 1, R)), xp.float16(0)))
    return R * C


def big_sum_last_dim(s: Scale, R: int, L: int) -> int:  # noqa: N803
    """f16 sum over dim 1: each row is zero but for one marker value, so its sum is that value
    exactly (the last rows start past element 2^31 on the GPU)."""
    xp = s.xp
    pos, val = s.markers(R, L)
    x = s.marked(R, L, xp.arange(R, dtype=xp.int64), pos, val)
    y = xp.full(R, xp.nan, xp.float16)
    s.run("sum", [td((R,)), td((R, L))], [y, x], dims=[1])
    s.check_rows("sum over dim 1", y.reshape(-1, 1), lambda r0, r1: val[r0:r1, None])
    return R * L


def big_max_dim_0(s: Scale, R: int, M: int) -> int:  # noqa: N803
    """f16 reduce_max over dim 0 (a column plan): each column is zero but for one marker value,
    at any row."""
    xp = s.xp
    pos, val = s.markers(M, R)
    x = s.marked(R, M, pos, xp.arange(M, dtype=xp.int64), val)
    y = xp.full(M, xp.nan, xp.float16)
    s.run("reduce_max", [td((M,)), td((R, M))], [y, x], dim=0)
    s.check_rows("reduce_max over dim 0", y.reshape(-1, 1), lambda r0, r1: val[r0:r1, None])
    return R * M


def big_softmax_rows(s: Scale, R: int, N: int) -> int:  # noqa: N803
    """f16 softmax over rows of N. Row r is a base row rotated by a hashed amount, so its result
    is the base row's float64 softmax rotated the same way, and a row read from the wrong place
    shows."""
    xp = s.xp
    rng = np.random.default_rng(11)
    base = (rng.integers(-64, 64, N) / 16.0).astype(np.float16)
    e = np.exp(base.astype(np.float64) - base.astype(np.float64).max())
    ref = xp.asarray((e / e.sum()).astype(np.float32))
    base_d = xp.asarray(base)
    shift = ((xp.arange(R, dtype=xp.uint64) * xp.uint64(GOLDEN)) >> xp.uint64(40)).astype(xp.int64) % N
    step = max(1, s.chunk // N)

    def idx(r0, r1):
        return (xp.arange(N, dtype=xp.int64)[None, :] + shift[r0:r1, None]) % N

    x = xp.empty((R, N), xp.float16)
    for r0 in range(0, R, step):
        r1 = min(R, r0 + step)
        x[r0:r1] = base_d[idx(r0, r1)]
    y = xp.full((R, N), xp.nan, xp.float16)
    s.run("softmax", [td((R, N)), td((R, N))], [y, x], dim=1)
    for r0 in range(0, R, step):
        r1 = min(R, r0 + step)
        want = ref[idx(r0, r1)]
        err = xp.abs(y[r0:r1].astype(xp.float32) - want) - (1e-6 + 2e-3 * want)
        if not float(err.max()) <= 0:  # NaN fails too
            r, c = (int(v) for v in xp.unravel_index(xp.argmax(xp.where(xp.isnan(err), xp.inf, err)), err.shape))
            raise AssertionError(f"softmax: row {r0 + r}, col {c}: {float(y[r0 + r, c])} vs {float(want[r, c])}")
    return R * N


def big_copy_transposed(s: Scale, R: int, C: int) -> int:  # noqa: N803
    """u8 rearrange of a transposed view into a contiguous one (64-bit strided copy)."""
    xp = s.xp
    src = xp.empty(R * C, xp.uint8)  # src^T contiguous: element [i, j] at j * R + i
    dst = xp.empty((R, C), xp.uint8)
    s.fill(src, s.pattern)
    s.run("rearrange", [td((R, C), dtype=iop.uint8), td((R, C), (1, R), dtype=iop.uint8)], [dst, src])
    s.check_rows("rearrange (transpose)", dst, lambda r0, r1: s.pattern(s.grid(r0, r1, C, 1, R)))
    return R * C


def big_copy_stride_2(s: Scale, n: int) -> int:
    """u8 rearrange of every other byte: one collapsed dim of n elements (2^32 + 24 on the GPU:
    past what the 32-bit fast-division fields hold; the 64-bit path divides)."""
    xp = s.xp
    src = xp.empty(2 * n, xp.uint8)
    dst = xp.empty(n, xp.uint8)
    s.fill(src, s.pattern)
    s.run("rearrange", [td((n,), dtype=iop.uint8), td((n,), (2,), dtype=iop.uint8)], [dst, src])
    s.check_rows("rearrange (stride 2)", dst.reshape(-1, 1), lambda r0, r1: s.pattern(s.grid(r0, r1, 1, 2, 0)))
    return n


# check, GPU sizes, GiB of device memory it needs (buffers and step temporaries), CPU sizes
BIG = [
    (big_add_dense, {"n": 2**31 + 2**20 + 7}, 8, {"n": 4096 + 7}),
    (big_unary_transposed, {"R": 65537, "C": 32768}, 10, {"R": 67, "C": 33}),
    (big_sum_last_dim, {"R": 65537, "L": 32768}, 6, {"R": 67, "L": 40}),
    (big_max_dim_0, {"R": 65537, "M": 32768}, 6, {"R": 67, "M": 40}),
    (big_softmax_rows, {"R": 2**19 + 3, "N": 4096}, 12, {"R": 70, "N": 64}),
    (big_copy_transposed, {"R": 65537, "C": 32768}, 6, {"R": 67, "C": 33}),
    (big_copy_stride_2, {"n": 2**32 + 24}, 14, {"n": 4096 + 24}),
]
GPU_STEP = 1 << 26  # elements per generation / check step on the GPU (temporaries of ~0.5 GiB)


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("check,sizes,gib", [(c, g, m) for c, g, m, _ in BIG], ids=[c.__name__ for c, *_ in BIG])
def test_more_than_2_31_elements(check, sizes, gib):
    cp = cupy_or_skip()
    pool = cp.get_default_memory_pool()
    gc.collect()
    pool.free_all_blocks()
    free, _ = cp.cuda.runtime.memGetInfo()
    if free < gib * GIB:
        pytest.skip(f"needs {gib} GiB of free device memory, {free / GIB:.1f} available")
    t0 = time.perf_counter()
    try:
        n = check(Scale(cp, "nvidia", GPU_STEP), **sizes)
        report(
            test="big", check=check.__name__, elements=n, seconds=round(time.perf_counter() - t0, 2), pool_peak=pool.total_bytes()
        )
        assert n > 2**31
    finally:
        gc.collect()
        pool.free_all_blocks()


@pytest.mark.parametrize("check,sizes", [(c, s) for c, _, _, s in BIG], ids=[c.__name__ for c, *_ in BIG])
def test_large_tensor_checks_at_small_sizes_on_cpu(check, sizes, monkeypatch):
    """The same checks on the CPU backend at small sizes (steps of 64 elements): they pass on a
    correct result and fail when the operator leaves its output unwritten."""
    check(Scale(np, "cpu", 64), **sizes)
    monkeypatch.setattr(Scale, "run", lambda self, *a, **k: None)
    with pytest.raises(AssertionError):
        check(Scale(np, "cpu", 64), **sizes)


# --------------------------------------------------------------------------------------------
# compute-sanitizer subset: one small case per operator (tools/sanitize.sh)
# --------------------------------------------------------------------------------------------
@requires_gpu
@pytest.mark.gpu
@pytest.mark.sanitize
@pytest.mark.skipif(
    os.environ.get("IOP_SANITIZE") != "1", reason="the compute-sanitizer subset (IOP_SANITIZE=1, tools/sanitize.sh)"
)
@pytest.mark.parametrize("op", nvidia_ops())
def test_sanitizer_subset(op):
    """The smallest quick case of every operator with an NVIDIA backend, in f32 where it has it:
    every kernel family runs at least once under memcheck / racecheck."""
    from infiniop_py.testing.run import run_case

    index, case, dt = small_instance(op)
    result = run_case(op, case, dt, "nvidia")
    assert result.ok, f"{op} [{case.description}] {dt.name}: " + "; ".join(result.messages)
