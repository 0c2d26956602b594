"""Hardening on the GPU: resources over many create/calculate/destroy cycles, the GGUF runner after
failures, threads and streams, and the per-operator subset that ``tools/sanitize.sh`` runs under
compute-sanitizer. The compile cache and per-call host state are in test_gpu_hardening_compile.py,
tensors of more than 2^31 elements in test_gpu_hardening_large.py.

GPU tests skip without CuPy and a GPU. What needs no GPU runs everywhere: the family table and the
CPU side of the cycle, thread and GGUF-runner tests (small counts).

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
import math
import os
import threading
import time
import tracemalloc

import numpy as np
import pytest
from conftest import DEVICES, requires_gpu
from hardening_support import THREADS, cupy_or_skip, report

import infiniop_py as iop
from infiniop_py.dtypes import DType
from infiniop_py.registry import get_cases, get_spec

CYCLES = int(os.environ.get("IOP_HARDEN_CYCLES", "10000"))
WARMUP = 100  # cycles before the first measurement
TRACED = 1000  # last cycles run under tracemalloc (it makes each cycle several times slower)
CALLS = 4  # calls per thread: a repeated gemm is replayed from a CUDA graph from its third call
MIB = 1 << 20


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
    (cudaMemGetInfo), after finishing queued work and collecting garbage. The device reading
    counts every process on the card, so it is taken only when this process is the only pytest
    worker (under pytest-xdist the other workers' allocations would read as growth)."""
    gc.collect()
    out = {"rss": rss_bytes()}
    if cp is not None and cp is not np:
        cp.cuda.Device().synchronize()
        out["pool"] = cp.get_default_memory_pool().used_bytes()
        if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) <= 1:
            free, total = cp.cuda.runtime.memGetInfo()
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
# The family table
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
