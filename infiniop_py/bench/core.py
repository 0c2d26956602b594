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
   the stream both sides launch on (perf_counter_ns on the CPU, in turns: :attr:`Env.turn`;
   GPU JAX by host wall),
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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .checks import _tolerance, check, check64, invalid_reasons, mark_invalid, reference64
from .env import Env
from .timing import _time_interleaved, _time_walled, captured, device_time, graph_replay, graph_times, host_wall, kernel_time
from .workload import (
    ROTATE_MIN_BYTES,
    BenchCase,
    Skip,
    Workload,
    ours_call,
    rotation,
    standard_workload,
    stats,
    traffic,
    unique_elements,
)

__all__ = [
    "BenchCase",
    "Options",
    "Skip",
    "Workload",
    "captured",
    "check",
    "check64",
    "device_time",
    "graph_replay",
    "graph_times",
    "host_wall",
    "invalid_reasons",
    "kernel_time",
    "mark_invalid",
    "ours_call",
    "reference64",
    "rotation",
    "run_case",
    "standard_workload",
    "stats",
    "traffic",
    "unique_elements",
]


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
        if not ok and row.get("check_ref", {}).get("ok"):
            # off torch's output, which may be the less accurate one: the float64 reference decides
            ref, _ = reference64(env, work, s)
            if ref is not None:
                ok64, detail64 = check64(env, work, work.buffers[s][work.out_index], ref, work.out_torch[s])
                if ok64:
                    ok, detail = True, f"{detail64} (against torch: {detail})"
                del ref
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
