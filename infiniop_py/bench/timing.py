"""Timing a case's calls (docs/perf/method.md): interleaved per-call events over the rotating
input sets, device time behind a blocking kernel, kernel-only time by CUDA-graph replay, host
wall per call, and the captures they need (:func:`captured`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from .env import GIB, Env
from .workload import Workload, ours_call, rotation, stats

if TYPE_CHECKING:
    from .core import Options


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
    block, unseen = env.turn
    for r in range(-(-reps // block)):
        for name in names if r % 2 == 0 else names[::-1]:
            if not env.gpu:  # the CPU's turns start once the other threads are quiet
                calls.append((None, env.settle))
                labels.append(None)
                sets.append(None)
            for i in range(unseen + min(block, reps - r * block)):
                s = c % nsets
                fn = impls[name]

                def call(fn=fn, s=s, name=name):
                    results[name] = fn(s)

                calls.append((name, call))
                labels.append(name if i >= unseen else None)  # None: untimed
                sets.append(s)
                c += 1
    if queued:
        times, results["held"] = env.time_calls_queued(calls)
    else:
        times = env.time_calls(calls)
    per = {n: [] for n in names}
    last_set = {}
    for name, t, s in zip(labels, times, sets):
        if name is None:
            continue
        per[name].append(t)
        last_set[name] = s
    return per, last_set, results


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
    sets, and of the same-bytes torch copy: with a graph's launch gaps instead of a
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
    # sees the same alternation of work as in the per-call timing (docs/perf/method.md, item 11).
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
