"""Bounded caches, released buffer references, and misuse that must raise the right status."""

import gc
import tracemalloc
import weakref

import numpy as np
import pytest
from conftest import create_status, requires_gpu, status_of

import infiniop_py as iop
from infiniop_py import ops as sugar
from infiniop_py.dtypes import DType
from infiniop_py.lru import LRU
from infiniop_py.status import Status

F32 = iop.float32


def T(shape, dtype=F32):
    return iop.create_tensor_descriptor(shape, None, dtype)


# -- bounded caches ------------------------------------------------------------------------


def test_lru_evicts_least_recently_used_and_releases_it():
    released = []
    c = LRU(2, lambda k, v: released.append((k, v)))
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the most recent
    c.put("c", 3)
    assert released == [("b", 2)] and len(c) == 2 and "a" in c and "c" in c
    c.put("a", 4)  # replacing a value releases the old one
    assert released[-1] == ("a", 1) and c.get("a") == 4
    c.clear()
    assert len(c) == 0 and {k for k, _ in released} == {"a", "b", "c"}
    with pytest.raises(ValueError):
        LRU(0)


def test_ops_cache_is_bounded_and_memory_stays_flat():
    sugar._cache.clear()
    limit = sugar.CACHE_LIMIT
    first = []

    def run(lo, hi):
        for n in range(lo, hi):
            a = np.full(n, 1.0, np.float32)
            c = iop.ops.add(a, a)
            assert c[0] == 2.0
            if len(first) < 3:
                first.append(sugar._cache.values()[-1])

    run(1, 2 * limit)  # fills the cache and evicts: the steady state
    gc.collect()
    tracemalloc.start()  # traced over a window only: tracing makes each call ~4x slower
    try:
        run(2 * limit, 4 * limit)  # every cached descriptor is now one made while tracing
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        run(4 * limit, 4_096)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    run(4_096, 10_001)
    assert len(sugar._cache) == limit
    assert all(d._destroyed for d in first)  # evicted descriptors were destroyed
    # Unbounded, each shape's descriptor stayed (~12 KB each, +124 MB for 10,000 shapes, +37 MB in
    # the traced window); bounded, it stays flat (~0.1 MB measured: the last shapes' larger views).
    assert grown < 2**20, grown
    sugar._cache.clear()


def test_ops_cache_recreates_a_descriptor_destroyed_behind_its_back():
    sugar._cache.clear()
    a = np.ones(3, np.float32)
    iop.ops.add(a, a)
    sugar._cache.values()[0].destroy()
    np.testing.assert_array_equal(iop.ops.add(a, a), 2 * a)


def test_ops_list_attributes_are_cached_like_tuples():
    """kernel_size=[2] used to raise TypeError (unhashable list) from the cache key."""
    sugar._cache.clear()
    x = np.random.default_rng(0).standard_normal((1, 2, 6), dtype=np.float32)
    want = x.reshape(1, 2, 3, 2).max(-1)
    out = np.full((1, 2, 3), np.nan, np.float32)
    np.testing.assert_array_equal(iop.ops.max_pool(x, out=out, kernel_size=[2]), want)
    np.testing.assert_array_equal(iop.ops.max_pool(x, out=out, kernel_size=(2,)), want)
    assert len(sugar._cache.values()) == 1


# -- buffer references -----------------------------------------------------------------------


def _buffers():
    yield "numpy", lambda: np.ones(16, np.float32)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test dependency
        return
    yield "torch", lambda: torch.ones(16, dtype=torch.float32)


@pytest.mark.parametrize("kind,make", list(_buffers()), ids=[k for k, _ in _buffers()])
@pytest.mark.parametrize("destroy", [True, False], ids=["destroyed", "alive"])
def test_descriptor_holds_no_caller_buffer(kind, make, destroy, cpu_handle):
    t = T((16,))
    d = iop.create_descriptor("add", cpu_handle, t, t, t)
    a, b, c = make(), make(), make()
    d.calculate(None, c, a, b)
    d.calculate(None, c, a, b)  # the remembered-buffer fast path
    refs = [weakref.ref(x) for x in (a, b, c)]
    if destroy:
        d.destroy()
    del a, b, c
    gc.collect()
    assert all(r() is None for r in refs), kind
    if not destroy:
        x = make()
        d.calculate(None, x, make(), make())  # still works with new buffers
        assert float(x[0]) == 2.0


def test_torch_workspace_is_not_held(cpu_handle):
    torch = pytest.importorskip("torch")
    x, y = T((64, 64)), T((64,))
    d = iop.create_descriptor("sum", cpu_handle, y, x, dims=[1])
    ws = torch.empty(max(d.workspace_size, 1), dtype=torch.uint8)
    out = torch.empty(64)
    d.calculate(ws, out, torch.ones(64, 64))
    r = weakref.ref(ws)
    del ws
    gc.collect()
    assert r() is None
    d.destroy()


class _FakeRuntime:
    def __init__(self):
        self.synced = []

    def streamSynchronize(self, s):  # noqa: N802 - CUDA's spelling
        if s == 666:
            raise RuntimeError("invalid resource handle")
        self.synced.append(s)

    def deviceSynchronize(self):  # noqa: N802
        self.synced.append("device")


def test_reduce_ticket_arrays_are_bounded_per_stream(monkeypatch):
    """The one-launch reductions' per-stream ticket arrays: at most TICKET_STREAMS of them, the
    evicted one freed only after its stream is synchronised (CPU logic, fake runtime)."""
    import types

    from infiniop_py import reduce as red
    from infiniop_py.cuda import runtime

    fake = _FakeRuntime()
    monkeypatch.setattr(runtime, "cupy", lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=fake)))
    k = object.__new__(red.ReduceKernel)
    k._tickets = LRU(red.TICKET_STREAMS, red.release_tickets)
    made, launched = [], []

    class Mem:
        pass

    def ticket_launch(stream):
        mem = Mem()
        made.append(weakref.ref(mem))
        return mem, lambda ptrs, ws, s: launched.append(s)

    k._ticket_launch = ticket_launch
    streams = [666, *range(1, 3 * red.TICKET_STREAMS)]  # 666: a stream destroyed before eviction
    for s in streams:
        k._launch_last([0, 0], 0, (), s)
        k._launch_last([0, 0], 0, (), s)  # the second call reuses the stream's array
    assert launched == [s for s in streams for _ in (0, 1)]
    assert len(made) == len(streams)
    assert len(k._tickets) == red.TICKET_STREAMS
    gc.collect()
    alive = [r() is not None for r in made]
    assert sum(alive) == red.TICKET_STREAMS and all(alive[-red.TICKET_STREAMS :])
    evicted = streams[: len(streams) - red.TICKET_STREAMS]
    assert fake.synced == ["device" if s == 666 else s for s in evicted]  # each waited for before freeing


@requires_gpu
@pytest.mark.gpu
def test_reduce_ticket_arrays_bounded_on_gpu():
    import cupy as cp

    from infiniop_py import reduce as red

    h = iop.create_handle("nvidia")
    x, y = T((64, 1 << 16)), T((64,))
    d = iop.create_descriptor("sum", h, y, x, dims=[1])
    kern = d._kernel
    tickets = getattr(kern, "_tickets", None)
    if tickets is None:
        pytest.skip("this plan uses no per-stream ticket arrays")
    xa = cp.random.rand(64, 1 << 16).astype(cp.float32)
    ws = cp.empty(max(d.workspace_size, 1), cp.uint8)
    want = xa.sum(axis=1)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3 * red.TICKET_STREAMS)]
    for s in streams:
        ya = cp.empty(64, cp.float32)
        d.calculate(ws, ya, xa, stream=s)
        s.synchronize()
        cp.testing.assert_allclose(ya, want, rtol=1e-4)
        assert len(tickets) <= red.TICKET_STREAMS
    d.destroy()
    iop.destroy_handle(h)


# -- misuse that must raise ------------------------------------------------------------------


@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tri_create_is_constant_in_the_tensor_size(op, cpu_handle):
    big = T((1 << 40, 4))
    tracemalloc.start()
    try:
        d = iop.create_descriptor(op, cpu_handle, big, big, diagonal=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak
    d.destroy()
    wide = T((3, 1 << 40))
    iop.create_descriptor(op, cpu_handle, wide, wide).destroy()


@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("diagonal", [-(2**62), -5, -1, 0, 2, 7, 2**62])
def test_tri_mask_built_at_calculate_matches_numpy(op, diagonal, cpu_handle):
    x = np.random.default_rng(0).standard_normal((2, 4, 6)).astype(np.float32)
    y = np.empty_like(x)
    with iop.create_descriptor(op, cpu_handle, T(x.shape), T(x.shape), diagonal=diagonal) as d:
        d.calculate(None, y, x)
    want = getattr(np, op)(x, max(min(diagonal, 10), -10))
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op", ["ones", "zeros"])
def test_fill_ops_refuse_an_invalid_input_dtype(op, cpu_handle):
    bad = T((2, 3))
    object.__setattr__(bad, "dtype", DType.INVALID)  # behind the descriptor's own validation
    assert create_status(op, cpu_handle, T((2, 3)), bad) is Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: iop.create_tensor_descriptor((2, 3), None, DType.INVALID)) is Status.BAD_TENSOR_DTYPE


@pytest.mark.parametrize("maker", [iop.create_tensor_descriptor, iop.TensorDescriptor])
def test_a_none_dtype_is_refused_not_float64(maker):
    assert status_of(lambda: maker((2, 3), None, None)) is Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: iop.infiniopCreateTensorDescriptor(2, (2, 3), None, None)) is Status.BAD_TENSOR_DTYPE


def test_workspace_size_after_destroy_raises(cpu_handle):
    t = T((4,))
    d = iop.infiniopCreateAddDescriptor(cpu_handle, t, t, t)
    assert iop.infiniopGetAddWorkspaceSize(d) == 0
    iop.infiniopDestroyAddDescriptor(d)
    assert status_of(lambda: iop.infiniopGetAddWorkspaceSize(d)) is Status.BAD_PARAM
    assert status_of(lambda: d.workspace_size) is Status.BAD_PARAM
    a = np.ones(4, np.float32)
    assert status_of(lambda: d.calculate(None, a.copy(), a, a)) is Status.BAD_PARAM  # the same family


def test_calculate_and_workspace_query_after_the_handle_is_destroyed_raise():
    h = iop.create_handle("cpu")
    t = T((4,))
    d = iop.create_descriptor("add", h, t, t, t)
    a = np.ones(4, np.float32)
    c = np.empty_like(a)
    d.calculate(None, c, a, a)
    iop.destroy_handle(h)
    assert status_of(lambda: d.calculate(None, c, a, a)) is Status.BAD_PARAM
    assert status_of(lambda: iop.infiniopAdd(d, None, 0, c, a, a)) is Status.BAD_PARAM
    assert status_of(lambda: d.workspace_size) is Status.BAD_PARAM
    d.destroy()  # destroying the descriptor itself is still allowed


@pytest.mark.parametrize(
    "op,y,attrs",
    [
        ("reduce_max", (2,), {"dim": 1, "keepdim": True}),
        ("reduce_max", (2, 1), {"dim": 1, "keepdim": False}),
        ("reduce_max", (2, 1, 1), {"dim": 1}),
        ("reduce_max", (2, 3, 4, 5), {"dim": 1}),
        ("reduce_mean", (2,), {"dim": 1, "keepdim": True}),
        ("reduce_mean", (2, 1), {"dim": -1, "keepdim": False}),
        ("reduce_mean", (), {"dim": 1}),
        ("sum", (2,), {"dims": [1], "keepdim": True}),
        ("sum", (2, 1), {"dims": [1]}),
        ("sum", (2, 1, 1), {"dims": [1], "keepdim": True}),
        ("sum", (1,), {"dims": []}),
    ],
)
def test_reduction_ndim_mismatch_is_a_shape_error(op, y, attrs, cpu_handle):
    s = create_status(op, cpu_handle, T(y), T((2, 3)), **attrs)
    assert s is Status.BAD_TENSOR_SHAPE


def test_short_create_descriptor_after_destroy_raises(cpu_handle):
    """Upstream's short create form (topksoftmax's create(x)) behaves like every descriptor."""
    d = iop.infiniopCreateTopksoftmaxDescriptor(cpu_handle, T((4, 8)))
    assert iop.infiniopGetTopksoftmaxWorkspaceSize(d) == 0
    iop.infiniopDestroyTopksoftmaxDescriptor(d)
    assert status_of(lambda: iop.infiniopGetTopksoftmaxWorkspaceSize(d)) is Status.BAD_PARAM
    assert status_of(lambda: d.workspace_size) is Status.BAD_PARAM


def test_compiles_of_one_module_take_turns(tmp_path, monkeypatch):
    """Processes (here: threads with their own lock descriptors) compiling the same module wait
    for each other through a lock file in CuPy's cache folder; without CuPy no lock is taken."""
    import sys
    import threading
    import time
    import types

    from infiniop_py.cuda import compiler

    with compiler._disk_turn("src", (), ("k",)):  # no CuPy here (or a real one): never raises
        pass
    fake = types.ModuleType("cupy.cuda.compiler")
    fake.get_cache_dir = lambda: str(tmp_path / "cache")
    cuda = types.ModuleType("cupy.cuda")
    cuda.compiler = fake
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.compiler", fake)
    order = []
    first_in = threading.Event()

    def first():
        with compiler._disk_turn("src", ("-O3",), ("k<float>",)):
            first_in.set()
            time.sleep(0.3)
            order.append("first done")

    def second():
        first_in.wait()
        with compiler._disk_turn("src", ("-O3",), ("k<float>",)):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert order == ["first done", "second in"]
    assert len(list((tmp_path / "cache").glob("infiniop-compile-*.lock"))) == 1
