"""The benchmark method of docs/perf (shared/spec/perf.md), shared by every suite.

A suite lists :class:`BenchCase` objects; each builds a :class:`Workload` on demand: our
descriptor (created once through the public API), the buffers of one or more rotating input
sets, and the PyTorch peer working on the same buffers. :func:`run_case` then

0. checks our first call against the float64 reference (:func:`reference64`, :func:`check64`);
   a case that fails it is reported FAIL and not timed,
1. warms every implementation up (compilation, caches, cuDNN autotune, torch.compile, JAX),
2. poisons our outputs (NaN), so a kernel that writes nothing cannot pass,
3. times ``reps`` calls of each implementation *interleaved* (ours, torch, the peers of
   peers.py, alternating the order every repetition), each call on the next input set of the
   rotation so that large cases never run from a warm L2, with CUDA events around each call on
   the stream both sides launch on (perf_counter_ns on the CPU; GPU JAX by host wall),
4. checks the output of our last timed call, and of each peer's, against torch eager on
   the same inputs -- a time is reported only next to a passing check,
5. reports median, p10 and p90 in µs, GB/s from the minimal byte count (:func:`traffic`), the
   fraction of the copy bandwidth (or, for cases that count FLOPs, of the matrix rate) measured
   in the same run, and ``x torch`` = torch time / our time (above 1 means we are faster;
   ``x`` holds that ratio for every peer).

On the GPU every checked case is also timed two more ways (docs/perf/method.md 9-11):
6. device time per call: the same interleaved calls enqueued behind a blocking kernel, so host
   latency is not inside the events, next to a torch copy of the same bytes timed that way;
7. kernel-only time: ``k`` calls of each implementation captured in a CUDA graph (input sets
   rotating as above) and replayed, median replay / k, next to the same-bytes copy captured and
   replayed the same way -- what one launch of this size reaches with the launch gaps of a graph.

8. a row whose per-call time is below its kernel-only time, or below the time of the same-bytes
   copy, cannot be true (:func:`invalid_reasons`): it is reported INVALID with the reason, its
   raw times kept and no bandwidth or ratio derived from them.

Every CUDA-graph capture goes through :func:`captured`, which leaves torch's and CuPy's current
streams as it found them even when a capture fails, and our calls launch on torch's current
stream read at each call, the stream the events are recorded on.

Small cases (``host_wall=True``) also time the host wall per call: N back-to-back calls with
one synchronisation at the end, ours (with torch tensors, CuPy arrays and raw pointers as
buffers) against torch eager, and, on the GPU, the per-call time inside a replayed CUDA graph.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .env import GIB, MIB, Env

ROTATE_MIN_BYTES = 8 * MIB  # below this a case runs L2-resident, as it would in a real chain of small ops
ROTATE_FACTOR = 4  # rotated sets cover at least this many times the L2
MAX_SETS = 64
MAX_ROTATION_BYTES = 8 * GIB


# --------------------------------------------------------------------------------------------
# Counting work
# --------------------------------------------------------------------------------------------
def unique_elements(shape, strides) -> int:
    """Distinct memory elements a view addresses (zero-stride dims count once; no self-overlap)."""
    return math.prod(d for d, s in zip(shape, strides) if s != 0) if all(d > 0 for d in shape) else 0


def traffic(reads=(), writes=(), flops: int = 0) -> tuple[int, int]:
    """Minimal (bytes, flops) of one call: each input read once, each output written once.

    ``reads`` and ``writes`` are torch tensors (views); a broadcast input counts its distinct
    elements only, a transposed one all of them.
    """
    total = 0
    for t in (*reads, *writes):
        total += unique_elements(t.shape, t.stride()) * t.element_size()
    return total, int(flops)


def stats(times_us) -> dict:
    a = np.asarray(times_us, dtype=np.float64)
    return {
        "median": float(np.median(a)),
        "p10": float(np.percentile(a, 10)),
        "p90": float(np.percentile(a, 90)),
        "min": float(a.min()),
        "n": int(a.size),
    }


def rotation(env: Env, set_bytes: int) -> int:
    """How many input sets to rotate through so that no call finds its inputs in L2: at least two,
    since the tail of a single set, however large, is still in L2 when the next call (the other
    implementation's, interleaved) starts on it."""
    if not env.gpu or set_bytes < ROTATE_MIN_BYTES:
        return 1
    need = max(2, math.ceil(ROTATE_FACTOR * env.l2_bytes / set_bytes))
    return int(max(1, min(need, MAX_SETS, MAX_ROTATION_BYTES // max(set_bytes, 1))))


# --------------------------------------------------------------------------------------------
# Cases and workloads
# --------------------------------------------------------------------------------------------
class Skip(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a case's ``build`` when it cannot run here (operator not registered, no dtype)."""


@dataclass
class Workload:
    """Everything one case runs, on ``nsets`` rotating buffer sets.

    descriptor: ours, created once; ``buffers[s]`` are the torch tensors of set ``s`` in
    calculate's order (outputs, then inputs); ``torch_eager(s)`` writes ``out_torch[s]``;
    ``torch_fn(*inputs[s])`` is the pure function handed to torch.compile.
    ``out_index`` is which of ``buffers[s]`` is checked against ``out_torch[s]``.
    """

    descriptor: Any
    buffers: list
    torch_eager: Callable[[int], Any]
    out_torch: list
    inputs: list
    torch_fn: Callable | None = None
    out_index: int = 0
    exact: bool = False
    atol: float = 0.0
    rtol: float = 0.0
    runtime: tuple = ()
    keep: list = field(default_factory=list)  # anything that must outlive the case (base tensors)
    workspace: Any = None  # allocated by ours_call when the descriptor asks for one
    nbytes: int | None = None  # minimal bytes when more than the inputs + the checked output move
    # check(s, ok, detail) -> (ok, detail): a second look at set s after the comparison with torch
    # (e.g. selections where near-ties may legitimately order differently from torch's)
    recheck: Callable[[int, bool, str], tuple[bool, str]] | None = None
    attrs: dict | None = None  # the attributes our descriptor was created with (for the float64 reference)
    # make(jax) -> f(*jax_inputs): the case in JAX, jitted as the ``jax`` peer (inputs[s] converted)
    jax_fn: Callable | None = None
    peers: dict = field(default_factory=dict)  # a suite's own peers: name -> peers.Peer
    peer_notes: dict = field(default_factory=dict)  # name -> why a peer of this case is absent

    @property
    def nsets(self) -> int:
        return len(self.buffers)

    def release(self) -> None:
        if self.descriptor is not None:
            self.descriptor.destroy()
            self.descriptor = None
        self.buffers = self.out_torch = self.inputs = self.keep = []
        self.workspace = None
        self.peers = {}


@dataclass
class BenchCase:
    """One benchmark row: ``build(env)`` returns the Workload (allocating its buffers)."""

    suite: str
    op: str
    case: str
    dtype: str
    shape: tuple
    build: Callable[[Env], Workload]
    host_wall: bool = False
    quick: bool = False
    compile: bool = True  # whether torch.compile is a meaningful peer here
    notes: str = ""
    flops: int = 0  # floating-point operations of one call (matrix ops): adds TFLOP/s to the row


def ours_call(env: Env, work: Workload, kind: str = "tensor", stream=None) -> Callable[[int], None]:
    """``f(s)``: our calculate on set ``s``, buffers converted once up front (``Env.ours``).

    On the GPU each call launches on torch's current stream *as it is at the call*
    (:meth:`Env.current_stream`), the stream torch's ops and the timing events go to; ``stream``
    pins one instead.
    """
    calc = work.descriptor.calculate
    bufs = [[None if t is None else env.ours(t, kind) for t in tensors] for tensors in work.buffers]
    rt = tuple(work.runtime)
    size = int(getattr(work.descriptor, "workspace_size", 0) or 0)
    ws = None
    if size:
        if work.workspace is None:  # one workspace serves every set (calls are ordered on one stream)
            work.workspace = env.torch.empty(size, dtype=env.torch.uint8, device=env.device)
        ws = env.ours(work.workspace, kind)
    if env.gpu and stream is not None:

        def run(s):
            calc(ws, *bufs[s], *rt, stream=stream)
    elif env.gpu:
        current = env.current_stream

        def run(s):
            calc(ws, *bufs[s], *rt, stream=current())
    else:

        def run(s):
            calc(ws, *bufs[s], *rt)

    return run


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------
def check(env: Env, work: Workload, actual, expected) -> tuple[bool, str]:
    """Compare ``actual`` with the peer's ``expected`` (exact for copies, else the dtype's tolerance)."""
    torch = env.torch
    if actual.shape != expected.shape:
        return False, f"shape {tuple(actual.shape)} vs {tuple(expected.shape)}"
    if work.exact:
        if actual.is_floating_point():
            itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
            same = actual.view(itype) == expected.view(itype) if actual.is_contiguous() else actual == expected
        else:
            same = actual == expected
        bad = int((~same).sum())
        return bad == 0, "bitwise equal" if bad == 0 else f"{bad} of {actual.numel()} elements differ"
    a = actual.float()
    e = expected.float()
    diff = (a - e).abs()
    ok = (diff <= work.atol) | (diff <= work.rtol * torch.maximum(a.abs(), e.abs())) | (a.isnan() & e.isnan()) | (a == e)
    bad = int((~ok).sum())
    finite = diff[torch.isfinite(diff)]
    max_err = float(finite.max()) if finite.numel() else 0.0
    if bad:
        return False, f"{bad} of {a.numel()} outside atol={work.atol:g} rtol={work.rtol:g}; max abs err {max_err:.3g}"
    return True, f"max abs err {max_err:.3g}"


def _tolerance(dtype_name: str) -> tuple[float, float]:
    from infiniop_py.dtypes import parse_dtype
    from infiniop_py.testing.compare import default_tolerance

    return default_tolerance(parse_dtype(dtype_name))


# --------------------------------------------------------------------------------------------
# Running one case
# --------------------------------------------------------------------------------------------
@dataclass
class Options:
    """How a case runs (``compile``: the old ``--compile`` switch, the same as asking for peer ``compile``)."""

    reps: int = 100
    warmup: int = 10
    compile: bool = False
    host_calls: int = 2000
    host_rounds: int = 5
    graph_calls: int = 50
    kernel: bool = True  # GPU: kernel-only time by CUDA-graph replay over the rotating sets
    peers: set | None = None  # --peers: names asked for (None: torch and the suites' own peers)
    all_peers: bool = False  # --peers all
    matrix_tflops: dict = field(default_factory=dict)  # dtype -> matrix rate measured in this run
    reference: bool = True  # check ours against the float64 reference before timing


def _time_interleaved(
    env: Env, impls: dict[str, Callable[[int], Any]], nsets: int, reps: int, start_call: int, queued: bool = False
):
    """Per-impl lists of µs; call ``c`` of the whole sequence uses set ``c % nsets``.

    Returns (times, last_set, last_result) per implementation; ``queued``: device time per call
    (:meth:`Env.time_calls_queued`), and the fraction of held calls as ``last_result["held"]``.
    """
    names = list(impls)
    calls, labels, sets = [], [], []
    results: dict[str, Any] = {}
    c = start_call
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            s = c % nsets
            fn = impls[name]

            def call(fn=fn, s=s, name=name):
                results[name] = fn(s)

            calls.append((name, call))
            labels.append(name)
            sets.append(s)
            c += 1
    if queued:
        times, results["held"] = env.time_calls_queued(calls)
    else:
        times = env.time_calls(calls)
    per = {n: [] for n in names}
    last_set = {}
    for name, t, s in zip(labels, times, sets):
        per[name].append(t)
        last_set[name] = s
    return per, last_set, results


def _wide(torch, t):
    """``t`` as the float64 reference takes it: floats in float64, integers in int64, bool as is."""
    if t is None:
        return None
    if t.is_floating_point():
        return t.double()
    if t.dtype == torch.bool:
        return t.clone()
    return t.long()


def reference64(env: Env, work: Workload) -> tuple[Any, str]:
    """(float64 expected value of the checked output on set 0, how) or (None, why there is none).

    The operator's own reference (its spec's ``reference``, in float64 on the benchmark's
    device) where the buffers are the operator's tensors in calculate's order; else the case's
    pure torch function evaluated on float64 copies of its inputs. Called before our first call,
    so an operator that writes in place is checked against its inputs as they were.
    """
    torch = env.torch
    d = getattr(work.descriptor, "d", work.descriptor)  # unwrap a suite's workspace holder
    spec, info = getattr(d, "spec", None), getattr(d, "info", None)
    bufs = work.buffers[0]
    why = "no float64 reference for this case"
    if spec is not None and spec.reference is not None and spec.reference_inputs == "torch64" and len(bufs) == len(spec.tensors):
        role = spec.tensors[work.out_index]
        if role.compare not in ("auto", "tolerance", "exact"):
            return None, f"{role.compare} comparison (checked against torch only)"
        try:
            from infiniop_py.dtypes import to_numpy
            from infiniop_py.testing.reference import _output_kwargs

            ins = {t.name: _wide(torch, b) for t, b in zip(spec.tensors, bufs) if t.role != "out"}
            attrs = dict(work.attrs) if work.attrs is not None else dict(getattr(info, "attrs", {}) or {})
            rt = {a.name: v for a, v in zip(spec.runtime, work.runtime)}
            outs = {t.name: b for t, b in zip(spec.tensors, bufs) if t.is_output and b is not None}
            in_dt = {t.name: to_numpy(info.tensors[t.name].dtype) for t in spec.inputs if info and info.tensors.get(t.name)}
            extra = _output_kwargs(
                spec.reference,
                {n: info.tensors[n].dtype for n in outs} if info else {},
                {n: tuple(b.shape) for n, b in outs.items()},
                in_dt,
            )
            with torch.no_grad():
                res = spec.reference(**ins, **attrs, **extra, **rt)
            if not isinstance(res, dict):
                res = {spec.outputs[0].name: res}
            ref = res.get(role.name)
            if ref is not None:
                return torch.as_tensor(ref).to(bufs[work.out_index].device), "the operator's float64 reference"
            why = f"the operator's reference gives no '{role.name}'"
        except Exception as exc:  # an odd buffer mapping: try the case's own function
            why = f"the operator's reference failed ({type(exc).__name__}: {str(exc)[:80]})"
    if work.torch_fn is not None and work.inputs:
        try:
            with torch.no_grad():
                ref = work.torch_fn(*[_wide(torch, t) if hasattr(t, "is_floating_point") else t for t in work.inputs[0]])
            return ref, "the case's torch function in float64"
        except Exception as exc:
            why += f"; its torch function in float64 failed ({type(exc).__name__})"
    return None, why


def check64(env: Env, work: Workload, actual, ref, peer=None) -> tuple[bool | None, str]:
    """``actual`` against the float64 ``ref``: every element within the case's tolerance, or, where
    the dtype's rounding of a long accumulation exceeds it, no further from the reference than
    2 x torch eager's output ``peer`` is (and finite wherever the reference is). None where the
    reference does not fit the output (a different number of elements: nothing to compare)."""
    torch = env.torch
    ref = ref.to(actual.device)
    if ref.is_floating_point():
        ref = ref.double()
    if tuple(actual.shape) != tuple(ref.shape):
        if ref.numel() != actual.numel():  # the output's shape is the descriptor's: the mapping is off
            return None, f"not checked against float64: reference shape {tuple(ref.shape)}, output {tuple(actual.shape)}"
        ref = ref.reshape(actual.shape)
    if not actual.is_floating_point():
        bad = int((actual.long() != ref.round().long()).sum()) if ref.is_floating_point() else int((actual != ref).sum())
        return bad == 0, "float64 reference: equal" if bad == 0 else f"float64 reference: {bad} of {actual.numel()} differ"

    def err(x):
        a = x.double()
        diff = (a - ref).abs()
        both_nan = a.isnan() & ref.isnan()
        ok = (diff <= work.atol) | (diff <= work.rtol * torch.maximum(a.abs(), ref.abs())) | both_nan | (a == ref)
        finite = diff[torch.isfinite(diff)]
        stray = int((~torch.isfinite(a) & torch.isfinite(ref)).sum())
        return int((~ok).sum()), float(finite.max()) if finite.numel() else 0.0, stray

    bad, max_err, stray = err(actual)
    if bad == 0:
        return True, f"float64 reference: max abs err {max_err:.3g}"
    peer_err = None
    if hasattr(peer, "is_floating_point") and tuple(peer.shape) == tuple(ref.shape) and peer.is_floating_point():
        _, peer_err, _ = err(peer)
        if stray == 0 and max_err <= 2 * peer_err:
            return True, f"float64 reference: max abs err {max_err:.3g} (<= 2 x torch's {peer_err:.3g})"
    torch_part = "" if peer_err is None else f", torch's {peer_err:.3g}"
    return False, (
        f"float64 reference: {bad} of {actual.numel()} outside atol={work.atol:g} rtol={work.rtol:g}; "
        f"max abs err {max_err:.3g}{torch_part}" + (f"; {stray} non-finite" if stray else "")
    )


def _peers(env: Env, case: BenchCase, work: Workload, opts: Options, row: dict) -> dict:
    """The peers of this case that run (name -> peers.Peer); why others do not goes to the row."""
    from . import peers as pm

    out, notes = {}, dict(work.peer_notes)
    sel, everything = opts.peers, opts.all_peers
    if opts.compile and sel is not None:
        sel = sel | {"compile"}
    elif opts.compile:
        sel = {"torch", "compile", *work.peers}
    if pm.wanted("compile", sel, everything) and case.compile and work.torch_fn is not None:
        try:
            out["compile"] = pm.compile_peer(env, work.torch_fn, work.inputs)
        except Exception as exc:  # no Triton / no C++ compiler: the peer is absent, said so
            row["compile_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            notes["compile"] = row["compile_error"]
    if pm.wanted("jax", sel, everything) and work.jax_fn is not None:
        jax, why = pm.jax_for(env)
        if jax is None:
            notes["jax"] = why
        else:
            try:
                out["jax"] = pm.jax_peer(jax, env, work.jax_fn, work.inputs)
            except Exception as exc:
                notes["jax"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    for name, peer in work.peers.items():
        if pm.wanted(name, sel, everything):
            out[name] = peer
    if notes:
        row["peer_notes"] = notes
    compile_s = {n: p.compile_s for n, p in out.items() if p.compile_s is not None}
    if compile_s:
        row["compile_s"] = compile_s
    return out


def _output(peer, value):
    return peer.to_torch(value) if peer.to_torch is not None else value


def run_case(env: Env, case: BenchCase, opts: Options, copy_gbps: float) -> dict:
    """Build, check against float64, warm up, time, check again and summarise one case (the row
    that goes to table and JSON)."""
    row: dict[str, Any] = {
        "suite": case.suite,
        "op": case.op,
        "case": case.case,
        "dtype": case.dtype,
        "shape": list(case.shape),
        "device": env.name,
        "notes": case.notes,
    }
    t_start = time.perf_counter()
    work = case.build(env)
    try:
        if work.atol == 0.0 and work.rtol == 0.0 and not work.exact:
            work.atol, work.rtol = _tolerance(case.dtype)
        reads = [t for i, t in enumerate(work.buffers[0]) if t is not None and i != work.out_index]
        nbytes, _ = traffic(reads=reads, writes=[work.buffers[0][work.out_index]])
        if work.nbytes is not None:
            nbytes = int(work.nbytes)
        flops = int(case.flops)
        row.update(bytes=nbytes, flops=flops, nsets=work.nsets)
        ours = ours_call(env, work)
        # 0. the float64 check, before anything is timed: a case that fails it is not timed
        if opts.reference:
            ref, how = reference64(env, work)
            if ref is None:
                row["check_ref"] = {"ok": None, "detail": f"not checked against float64: {how}"}
            else:
                ours(0)
                work.torch_eager(0)
                env.sync()
                ok, detail = check64(env, work, work.buffers[0][work.out_index], ref, work.out_torch[0])
                if ok is False and work.recheck is not None:
                    ok, detail = work.recheck(0, ok, detail)
                row["check_ref"] = {"ok": ok, "detail": detail, "reference": how}
                del ref
                if ok is False:
                    row["check"] = {"ok": False, "detail": detail}
                    return row
        extra = _peers(env, case, work, opts, row)
        impls: dict[str, Callable[[int], Any]] = {"ours": ours, "torch": work.torch_eager}
        impls.update({n: p.call for n, p in extra.items() if not p.wall})
        walled = {n: p.call for n, p in extra.items() if p.wall}
        # 1. warm-up (each impl on every set at least once, at most `warmup` calls)
        for fn in (*impls.values(), *walled.values()):
            for i in range(max(opts.warmup, min(work.nsets, 4 * opts.warmup))):
                fn(i % work.nsets)
        env.sync()
        # 2. poison our outputs so the check sees only what the timed calls wrote
        for tensors in work.buffers:
            env.poison(tensors[work.out_index])
        env.sync()
        # 3. interleaved timing
        per, last_set, results = _time_interleaved(env, impls, work.nsets, opts.reps, 0)
        if walled:
            wper, wlast, wres = _time_walled(env, ours, walled, work.nsets, opts.reps)
            results.update(wres)
            last_set.update({n: wlast[n] for n in walled})
        # 4. check the timed results against torch eager on the same inputs
        s = last_set["ours"]
        work.torch_eager(s)
        env.sync()
        ok, detail = check(env, work, work.buffers[s][work.out_index], work.out_torch[s])
        if work.recheck is not None:
            ok, detail = work.recheck(s, ok, detail)
        row["check"] = {"ok": ok, "detail": detail}
        peer_checks = {}
        for name, peer in extra.items():
            sp = last_set[name]
            work.torch_eager(sp)
            env.sync()
            try:
                pok, pdetail = check(env, work, _output(peer, results[name]), work.out_torch[sp])
            except Exception as exc:
                pok, pdetail = False, f"{type(exc).__name__}: {exc}"[:200]
            peer_checks[name] = {"ok": pok, "detail": pdetail}
        if peer_checks:
            row["check_peers"] = peer_checks
        if "compile" in peer_checks:
            row["check_compile"] = peer_checks["compile"]
        # 5. summary
        row["times_us"] = {name: stats(ts) for name, ts in per.items()}
        # A time is a result only next to a passing check: a failed one keeps its raw numbers
        # (marked) but gets no bandwidth or ratio.
        if not ok:
            row["times_us"]["ours"]["unchecked"] = True
        for name, pc in peer_checks.items():
            if not pc["ok"] and name in row["times_us"]:
                row["times_us"][name]["unchecked"] = True
        med = {name: st["median"] for name, st in row["times_us"].items() if not st.get("unchecked")}
        row["GBps"] = {name: nbytes / (m * 1e-6) / 1e9 for name, m in med.items() if m > 0}
        row["pct_copy"] = {name: 100.0 * g / copy_gbps for name, g in row["GBps"].items()} if copy_gbps else {}
        if flops:
            row["TFLOPs"] = {name: flops / (m * 1e-6) / 1e12 for name, m in med.items() if m > 0}
            rate = opts.matrix_tflops.get(case.dtype)
            if rate:
                row["pct_matrix"] = {name: 100.0 * tf / rate for name, tf in row["TFLOPs"].items()}
        row["x_torch"] = med["torch"] / med["ours"] if med.get("ours") else None
        row["x"] = {n: med[n] / med["ours"] for n in med if n != "ours" and med.get("ours")}
        if "compile" in med and med.get("ours"):
            row["x_compile"] = med["compile"] / med["ours"]
        if walled:
            row["wall_us"] = {name: stats(ts) for name, ts in wper.items()}
            for name in walled:
                if not peer_checks[name]["ok"]:
                    row["wall_us"][name]["unchecked"] = True
                elif ok:
                    row["x"][name] = row["wall_us"][name]["median"] / row["wall_us"]["ours"]["median"]
        if not ok:
            row["x"] = {}
        if env.gpu and ok:
            row.update(device_time(env, work, impls, opts, nbytes, copy_gbps))
            if opts.kernel:
                dev = [st["median"] for st in row.get("device_us", {}).values() if st.get("median")]
                row.update(kernel_time(env, work, nbytes, copy_gbps, call_us=min(dev, default=None)))
        if case.host_wall:
            row["host_wall_us"] = host_wall(env, work, opts)
            if env.gpu:
                row["graph_us"] = graph_replay(env, work, opts)
        if not env.gpu:
            row["l2"] = "n/a (CPU)"
        elif work.nsets > 1:
            row["l2"] = f"rotated over {work.nsets} sets"
        elif nbytes < ROTATE_MIN_BYTES:
            row["l2"] = "warm (small case, one set)"
        else:
            row["l2"] = "cold (one set several times the L2)"
        reasons = invalid_reasons(row)
        if reasons:
            mark_invalid(row, reasons)
    finally:
        work.release()
        del work
        row["wall_s"] = time.perf_counter() - t_start
    return row


def _time_walled(env: Env, ours: Callable, walled: dict, nsets: int, reps: int):
    """Host wall per call with completion, interleaved: ours (each call followed by a
    synchronisation) and the peers whose calls complete on the host (GPU JAX)."""
    impls = {"ours": lambda s: (ours(s), env.sync()), **walled}
    names = list(impls)
    per = {n: [] for n in names}
    last, results = {}, {}
    c = 0
    env.sync()
    for r in range(reps):
        for name in names if r % 2 == 0 else names[::-1]:
            s = c % nsets
            t0 = time.perf_counter_ns()
            results[name] = impls[name](s)
            per[name].append((time.perf_counter_ns() - t0) / 1e3)
            last[name] = s
            c += 1
    return per, last, results


# A row is INVALID (its times are not results, and it shows no speed-up) when a time is below
# what the same calls cannot beat: the per-call times (events around stream launches, with or
# without the host kept ahead) below the kernel-only time of the same calls (CUDA-graph replay,
# the least a call costs: the same kernels with the shortest launch gaps), or any time below
# the time of a copy of the same bytes timed the same way. A per-call median under the
# kernel-only time counts only when most calls (its 90th percentile) are under it too, the
# run's own noise; the copy factor leaves room for kernels that legitimately beat torch's copy: a read-mostly kernel, or one that reads
# part of its counted input (a triangle, a causal mask: >= 3/4 of the bytes); they are far
# from what a timing on the wrong stream gives (per-call 5.6 µs next to 179 µs kernel-only).
PER_CALL_FLOOR = 0.8  # per-call time / kernel-only time of the same implementation, whatever the noise
# per-call and kernel-only times of the same calls run under different loads (graphs of 1 to 24
# calls against calls one by one), and the clocks follow: up to 3.8% apart on an H100 (4096³ bf16
# gemm; 8192x4096 norm backward passes up to 3.3%)
KERNEL_SPREAD = 0.05
COPY_FLOOR = 0.5  # a time / the same-bytes copy's time, measured the same way
CHECKED_IMPLS = ("ours", "torch")
# what a row states on the strength of its times: dropped from an INVALID row
DERIVED = ("GBps", "pct_copy", "TFLOPs", "pct_matrix", "x", "x_torch", "x_compile", "device_pct_copy", "device_x_torch")
DERIVED += ("kernel_pct_copy", "kernel_x_torch")


def _below_kernel(st, kern: float) -> bool:
    """A timed call faster than its kernels alone: its median more than KERNEL_SPREAD below
    ``kern`` and beyond the run's own noise (even its 90th percentile is below), or below
    PER_CALL_FLOOR x ``kern`` outright."""
    if not isinstance(st, dict):
        return st is not None and st < PER_CALL_FLOOR * kern
    med, p90 = st.get("median"), st.get("p90")
    return med < PER_CALL_FLOOR * kern or (med < (1 - KERNEL_SPREAD) * kern and p90 is not None and p90 < kern)


def _median(table, name):
    t = (table or {}).get(name)
    if isinstance(t, dict):
        return t.get("median")
    return t


def invalid_reasons(row: dict) -> list[str]:
    """Why ``row``'s times cannot be true (empty when they can): see PER_CALL_FLOOR, COPY_FLOOR."""
    reasons = []
    copy_dev = row.get("same_bytes_copy_us")
    copy_kern = row.get("kernel_copy_us")
    for name in CHECKED_IMPLS:
        kern = _median(row.get("kernel_us"), name)
        timed = {"per-call": row.get("times_us"), "device": row.get("device_us")}
        for what, table in timed.items():
            t = _median(table, name)
            if t is None:
                continue
            if kern and _below_kernel(table.get(name), kern):
                reasons.append(f"{name} {what} time {t:.2f} us is below its kernel-only time {kern:.2f} us")
            if copy_dev and t < COPY_FLOOR * copy_dev:
                reasons.append(f"{name} {what} time {t:.2f} us is below {COPY_FLOOR:g} x the same-bytes copy's {copy_dev:.2f} us")
        if kern and copy_kern and kern < COPY_FLOOR * copy_kern:
            reasons.append(
                f"{name} kernel-only time {kern:.2f} us is below {COPY_FLOOR:g} x the same-bytes copy's {copy_kern:.2f} us"
            )
    return reasons


def mark_invalid(row: dict, reasons: list[str]) -> dict:
    """Mark ``row`` INVALID: the reasons go to ``row["invalid"]``, the raw times stay (for a look),
    every figure derived from them (bandwidth, ratios) is dropped."""
    row["invalid"] = list(reasons)
    for key in DERIVED:
        if key in row:
            row[key] = {} if isinstance(row[key], dict) else None
    return row


def device_time(env: Env, work: Workload, impls: dict, opts: Options, nbytes: int, copy_gbps: float) -> dict:
    """The same interleaved calls again, each batch enqueued behind a blocking kernel (device time
    per call without host latency), and a torch copy moving the same number of bytes timed the
    same way: the bandwidth a transfer of this size reaches (launch, ramp-up and drain are a
    larger share of a 20 µs call than of the 1 GiB copy that sets ``copy_gbps``)."""
    per, _, results = _time_interleaved(env, impls, work.nsets, opts.reps, 0, queued=True)
    out: dict[str, Any] = {"device_us": {name: stats(ts) for name, ts in per.items()}}
    out["device_held"] = results.get("held")
    med = {name: st["median"] for name, st in out["device_us"].items()}
    if copy_gbps and nbytes:
        out["device_pct_copy"] = {name: 100.0 * nbytes / (m * 1e-6) / 1e9 / copy_gbps for name, m in med.items() if m > 0}
        copy = _same_bytes_copy(env, nbytes)
        if copy is not None:
            cper, _, _ = _time_interleaved(env, {"copy": copy[0]}, copy[1], max(20, opts.reps // 2), 0, queued=True)
            cm = stats(cper["copy"])["median"]
            out["same_bytes_copy_us"] = cm
            out["same_bytes_copy_pct"] = 100.0 * nbytes / (cm * 1e-6) / 1e9 / copy_gbps
    if med.get("ours"):
        out["device_x_torch"] = med["torch"] / med["ours"]
    return out


KERNEL_REPLAY_US = 1000.0  # longest replay of one kernel-only graph (calls captured: 1 to 24)


def kernel_time(env: Env, work: Workload, nbytes: int, copy_gbps: float, call_us: float | None = None) -> dict:
    """Kernel-only µs per call (:func:`graph_times`) of ours and torch eager over the rotating
    sets, and of the same-bytes torch copy: with a graph's launch gaps (~1 µs) instead of a
    stream launch's, the ceiling a single launch of this size reaches. A graph holds as many
    calls as fit ``KERNEL_REPLAY_US`` at ``call_us`` per call (24 at most): a long stretch of
    back-to-back matrix products lowers the clocks (power), which the per-call timing, with the
    same number of calls, does not see, and the two would disagree."""
    torch = env.torch
    side = torch.cuda.Stream()
    calls = {"ours": ours_call(env, work, "tensor"), "torch": work.torch_eager}
    out: dict[str, Any] = {}
    k = 24 if not call_us else max(1, min(24, int(KERNEL_REPLAY_US // call_us)))
    times = graph_times(env, calls, work.nsets, k=k, side=side)
    out["kernel_us"] = {n: t for n, t in times.items() if not n.endswith("_error")}
    errors = {n: t for n, t in times.items() if n.endswith("_error")}
    if errors:
        out["kernel_errors"] = errors
    med = out["kernel_us"]
    if med.get("ours") and med.get("torch"):
        out["kernel_x_torch"] = med["torch"] / med["ours"]
    if copy_gbps and nbytes:
        out["kernel_pct_copy"] = {n: 100.0 * nbytes / (m * 1e-6) / 1e9 / copy_gbps for n, m in med.items() if m > 0}
        copy = _same_bytes_copy(env, nbytes)
        if copy is not None:
            ct = graph_times(env, {"copy": copy[0]}, copy[1], side=side).get("copy")
            if ct:
                out["kernel_copy_us"] = ct
                out["kernel_copy_pct"] = 100.0 * nbytes / (ct * 1e-6) / 1e9 / copy_gbps
    return out


@contextmanager
def captured(torch, graph, stream=None, **kwargs):
    """``torch.cuda.graph(graph, stream=stream)`` that leaves the current streams as it found them.

    When a capture fails -- a call synchronises with the host, or the capture is invalidated
    and ``capture_end`` raises (cudaErrorStreamCaptureInvalidated) -- torch's context exits
    without restoring the current stream, so every later op and CUDA event of the process
    would go to the capture stream. Here, whatever happens inside: a capture still open on
    the capture stream is ended and its graph discarded, and torch's and CuPy's current
    streams are set back to what they were before the block. The exception, if any, goes on.
    """
    saved = torch.cuda.current_stream()
    saved_cupy = _cupy_current_stream()
    ctx = torch.cuda.graph(graph, stream=stream, **kwargs)
    try:
        with ctx:
            yield
    finally:
        cap = getattr(ctx, "capture_stream", None)
        if cap is not None:
            _end_capture(int(cap.cuda_stream))
        if torch.cuda.current_stream() != saved:
            torch.cuda.set_stream(saved)
        if saved_cupy is not None:
            try:
                saved_cupy.use()
            except Exception:
                pass


def _cupy_current_stream():
    try:
        import cupy

        return cupy.cuda.get_current_stream()
    except Exception:  # no CuPy: only torch's stream to restore
        return None


def _end_capture(stream_ptr: int) -> None:
    """End a capture still open on ``stream_ptr`` (a broken one included) and discard its graph."""
    try:
        from cupy.cuda import runtime
    except Exception:
        return
    try:
        capturing = bool(runtime.streamIsCapturing(stream_ptr))
    except RuntimeError:  # CuPy raises for a capture that is open but invalidated
        capturing = True
    except Exception:
        return
    if not capturing:
        return
    try:
        g = runtime.streamEndCapture(stream_ptr)
        if g:
            runtime.graphDestroy(g)
    except Exception:  # an invalidated capture ends with an error; it is over all the same
        pass


def graph_times(env: Env, calls: dict, nsets: int, k: int = 24, reps: int = 30, side=None) -> dict:
    """Kernel-only µs per call: each ``calls[name](s)`` is captured ``k`` times in a CUDA graph on
    a side stream (sets rotating as in the event timing), after a warm-up on that stream (per-stream
    tickets and caches exist before capture); the graphs are replayed alternately ``reps`` times
    with CUDA events around each replay, and the median replay is divided by ``k``. A call that
    cannot be captured (it synchronises with the host) reports ``<name>_error`` instead."""
    torch = env.torch
    side = torch.cuda.Stream() if side is None else side
    graphs, out = {}, {}
    for name, fn in calls.items():
        try:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(max(3, nsets)):
                    fn(i % nsets)
            side.synchronize()
            g = torch.cuda.CUDAGraph()
            with captured(torch, g, stream=side):
                for i in range(k):
                    fn(i % nsets)
            g.replay()
            env.sync()
            graphs[name] = g
        except Exception as exc:  # report, keep the other implementations
            out[name + "_error"] = f"{type(exc).__name__}: {exc}"[:200]
            env.sync()
    names = list(graphs)
    # A call that could not be captured still runs, untimed, between the replays: the device then
    # sees the same alternation of work as in the per-call timing (one graph replayed back to back
    # ran the norm backward passes 3-5% slower than the same calls next to torch's).
    fillers = [n for n in calls if n not in graphs] if names else []
    seq, labels = [], []
    for r in range(reps):
        order = names + fillers
        for n in order if r % 2 == 0 else order[::-1]:
            if n in graphs:
                seq.append((n, graphs[n].replay))
            else:
                seq.append((n, lambda fn=calls[n], r=r: [fn((r * k + i) % nsets) for i in range(k)]))
            labels.append(n)
    times = env.time_calls(seq) if seq else []
    per: dict[str, list] = {n: [] for n in names}
    for n, t in zip(labels, times):
        if n in per:
            per[n].append(t / k)
    for n in names:
        out[n] = float(np.median(per[n]))
    del graphs
    return out


def _same_bytes_copy(env: Env, nbytes: int):
    """(call(set), nsets): torch ``dst.copy_(src)`` of nbytes / 2 bytes, rotated past the L2."""
    torch = env.torch
    half = nbytes // 2 // 16 * 16
    if half < 16 * 1024 or half > 2 * GIB:
        return None
    nsets = rotation(env, 2 * half)
    n = half // 4
    bufs = [(torch.ones(n, dtype=torch.float32, device=env.device), torch.empty(n, device=env.device)) for _ in range(nsets)]

    def call(s):
        bufs[s][1].copy_(bufs[s][0])

    return call, nsets


def host_wall(env: Env, work: Workload, opts: Options) -> dict:
    """Host wall µs per call: N back-to-back calls, one synchronisation at the end.

    Rounds alternate between the implementations; the median round counts.
    """
    impls = {"ours": ours_call(env, work, "tensor"), "ours_ptr": ours_call(env, work, "ptr")}
    if env.gpu:
        try:
            impls["ours_cupy"] = ours_call(env, work, "cupy")
        except Exception:
            pass
    impls["torch"] = work.torch_eager
    n = opts.host_calls
    per = {k: [] for k in impls}
    for fn in impls.values():
        for _ in range(20):
            fn(0)
    env.sync()
    for r in range(opts.host_rounds):
        order = list(impls) if r % 2 == 0 else list(impls)[::-1]
        for name in order:
            fn = impls[name]
            env.sync()
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn(0)
            env.sync()
            per[name].append((time.perf_counter_ns() - t0) / 1e3 / n)
    out = {k: float(np.median(v)) for k, v in per.items()}
    out["calls"] = n
    out["rounds"] = opts.host_rounds
    return out


def graph_replay(env: Env, work: Workload, opts: Options) -> dict:
    """µs per call inside a replayed CUDA graph of ``graph_calls`` calls (ours and torch)."""
    torch = env.torch
    out: dict[str, Any] = {}
    k = opts.graph_calls
    for name in ("ours", "torch"):
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            fn = ours_call(env, work, "tensor") if name == "ours" else work.torch_eager
            with torch.cuda.stream(side):
                for _ in range(3):
                    fn(0)
            torch.cuda.current_stream().wait_stream(side)
            env.sync()
            graph = torch.cuda.CUDAGraph()
            with captured(torch, graph):
                for _ in range(k):
                    fn(0)
            graph.replay()
            env.sync()
            times = env.time_calls([("replay", graph.replay)] * 20)
            out[name] = float(np.median(times)) / k
            del graph
        except Exception as exc:
            out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
    out["calls_per_graph"] = k
    return out


# --------------------------------------------------------------------------------------------
# Building the common kind of workload
# --------------------------------------------------------------------------------------------
def standard_workload(
    env: Env,
    op: str,
    make_set: Callable[[], tuple[list, tuple]],
    eager: Callable[..., Any],
    torch_fn: Callable | None = None,
    attrs: dict | None = None,
    exact: bool = False,
    assign: bool = False,
    descs: list | None = None,
) -> Workload:
    """A workload with one output: ``make_set() -> (outputs_and_inputs, torch_inputs)``.

    ``outputs_and_inputs`` are torch tensors in calculate's order (the output first);
    ``eager(out, *torch_inputs)`` is torch's call writing ``out`` (a second output buffer of the
    same layout, so ours and torch never share a result); with ``assign``, ``eager(*torch_inputs)``
    returns torch's result instead (peers without an ``out=`` form). ``torch_fn(*torch_inputs)``
    is the pure function for torch.compile. ``descs`` overrides the tensor descriptors derived
    from the first set. Sets are added until they cover the rotation; a workspace, if the
    descriptor needs one, is allocated once by ``ours_call``.
    """
    from infiniop_py.registry import resolve

    if resolve(op) is None:
        raise Skip(f"operator '{op}' is not registered")

    def one():
        bufs, inputs = make_set()
        out = bufs[0]
        peer = env.torch.empty_strided(tuple(out.shape), tuple(out.stride()), dtype=out.dtype, device=out.device)
        env.poison(peer)
        return bufs, inputs, peer

    first = one()
    set_bytes, _ = traffic(reads=[t for t in first[0] if t is not None], writes=[first[2]])
    sets = [first] + [one() for _ in range(rotation(env, set_bytes) - 1)]
    descs = descs or [None if t is None else env.descriptor_of(t) for t in first[0]]
    d = env.iop.create_descriptor(op, env.handle, *descs, **(attrs or {}))
    outs = [s[2] for s in sets]
    ins = [s[1] for s in sets]
    if assign:

        def run(s):
            outs[s] = eager(*ins[s])
    else:

        def run(s):
            eager(outs[s], *ins[s])

    return Workload(
        descriptor=d,
        buffers=[s[0] for s in sets],
        torch_eager=run,
        out_torch=outs,
        inputs=ins,
        torch_fn=torch_fn,
        exact=exact,
        attrs=dict(attrs or {}),
    )
