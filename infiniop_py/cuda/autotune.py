"""Create-time choice among implementations of one problem, measured once per (key, device).

A factory that has several ways to compute one descriptor (our kernels, a cuDNN plan, ...)
passes them as an ordered list of ``(name, run)``, where ``run(stream)`` launches that candidate
on scratch buffers on the CUDA stream ``stream`` (an int ``cudaStream_t``). :func:`choose`
times each on a private stream with CUDA events (one warm-up call, then ``reps`` samples of
``inner`` back-to-back calls, candidates interleaved so that clock drift hits all alike), takes
the median, and returns the name of the fastest. The first candidate within ``TIE`` (2%) of the
fastest wins, so near-ties resolve to the caller's order of preference and do not flap between
runs. The answer is cached per (key, device) in an LRU: later descriptors of the same problem
pay nothing.

``pin=name`` returns ``name`` without measuring (an unknown name is BAD_PARAM).

Nothing here imports CuPy until a measurement is actually needed; ``timer`` replaces the
CUDA-event clock (tests pass a fake one).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from ..lru import LRU
from ..status import InfiniopError, Status, error
from . import runtime

TIE = 0.02  # the first candidate within 2% of the fastest wins
CACHE_LIMIT = 4096


@dataclass(frozen=True)
class Choice:
    names: tuple[str, ...]
    winner: str
    times: dict  # name -> median seconds per call (inf: it failed)


_cache = LRU(CACHE_LIMIT)
_lock = threading.Lock()
_timers: dict[int, EventTimer] = {}


def _check_candidates(candidates) -> tuple[str, ...]:
    if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence) or not candidates:
        raise error(Status.BAD_PARAM, f"autotune: candidates must be a non-empty list of (name, run), got {candidates!r}")
    names = []
    for c in candidates:
        if not (isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str) and callable(c[1])):
            raise error(Status.BAD_PARAM, f"autotune: each candidate must be a (name: str, run: callable) pair, got {c!r}")
        names.append(c[0])
    if len(set(names)) != len(names):
        raise error(Status.BAD_PARAM, f"autotune: candidate names must be distinct, got {names}")
    return tuple(names)


def pick(names: Sequence[str], times: Sequence[float], tie: float = TIE) -> str:
    """The first name whose time is within ``tie`` of the fastest (``times`` in the same order)."""
    best = min(times)
    if best == float("inf"):
        raise error(Status.INTERNAL_ERROR, "autotune: no candidate ran")
    limit = best * (1.0 + tie)
    for name, t in zip(names, times):
        if t <= limit:
            return name
    raise AssertionError("unreachable: the fastest is within its own limit")


def measure(runs: Sequence[Callable], timer: Callable, *, reps: int, warmup: int = 1):
    """Median seconds per sample of each run (inf for a run that raised) and the errors by index.

    ``timer(run)`` returns the seconds one sample of ``run`` took. Samples are interleaved, the
    order rotating each round.
    """
    n = len(runs)
    errors: dict[int, BaseException] = {}
    samples: list[list[float]] = [[] for _ in range(n)]
    for i, run in enumerate(runs):
        try:
            for _ in range(warmup):
                timer(run)
        except Exception as exc:  # noqa: BLE001 - a failing candidate is excluded, not fatal
            errors[i] = exc
    for r in range(max(int(reps), 1)):
        for k in range(n):
            i = (k + r) % n
            if i in errors:
                continue
            try:
                samples[i].append(float(timer(runs[i])))
            except Exception as exc:  # noqa: BLE001
                errors[i] = exc
    times = [statistics.median(s) if s and i not in errors else float("inf") for i, s in enumerate(samples)]
    return times, errors


def choose(
    key: Hashable,
    candidates,
    *,
    reps: int = 5,
    warmup: int = 1,
    inner: int = 3,
    pin: str | None = None,
    device_id: int | None = None,
    timer: Callable | None = None,
) -> str:
    """Name of the fastest candidate for ``key`` on ``device_id`` (measured once, then cached).

    candidates: ordered list of ``(name, run)``, most preferred first; ``run(stream)`` launches
    the candidate on scratch buffers. pin: return this name without measuring (BAD_PARAM if it
    is not a candidate). A candidate that raises while measured is excluded; if all do, the
    first one's error is raised (an InfiniopError keeps its status).
    """
    names = _check_candidates(candidates)
    if pin is not None:
        if pin not in names:
            raise error(Status.BAD_PARAM, f"autotune: pinned candidate {pin!r} is not one of {list(names)}")
        return pin
    if len(names) == 1:
        return names[0]
    try:
        hash(key)
    except TypeError:
        raise error(Status.BAD_PARAM, f"autotune: key must be hashable, got {type(key).__name__}") from None
    if device_id is None:
        device_id = int(runtime.cupy().cuda.runtime.getDevice())
    ck = (key, device_id)
    with _lock:
        hit = _cache.get(ck)
    if hit is not None and hit.names == names:
        return hit.winner
    if timer is None:
        timer = event_timer(device_id, inner)
    times, errors = measure([c[1] for c in candidates], timer, reps=reps, warmup=warmup)
    if len(errors) == len(names):
        first = errors[0]
        if isinstance(first, InfiniopError):
            raise first
        detail = "; ".join(f"{names[i]}: {type(e).__name__}: {e}" for i, e in sorted(errors.items()))
        raise error(Status.INTERNAL_ERROR, f"autotune: every candidate failed ({detail})") from first
    winner = pick(names, times)
    with _lock:
        _cache.put(ck, Choice(names, winner, dict(zip(names, times))))
    return winner


def last_times(key: Hashable, device_id: int = 0) -> dict | None:
    """``{name: median seconds}`` measured for ``key`` on ``device_id``, or None if not cached."""
    with _lock:
        hit = _cache.get((key, device_id))
    return None if hit is None else dict(hit.times)


def clear() -> None:
    """Forget every cached choice (the next ``choose`` of each key measures again)."""
    with _lock:
        _cache.clear()


class EventTimer:
    """One sample = ``inner`` back-to-back calls of ``run(stream)`` between two CUDA events on a
    private stream of ``device_id``; returns seconds per call. Back-to-back calls make the
    sample a steady-state rate: host launch overhead counts only where it exceeds device time."""

    def __init__(self, device_id: int, inner: int = 3):
        cp = runtime.cupy()
        self.device_id = device_id
        self.inner = max(int(inner), 1)
        with cp.cuda.Device(device_id):
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.start = cp.cuda.Event()
            self.end = cp.cuda.Event()
        self._elapsed = cp.cuda.get_elapsed_time
        self._device = cp.cuda.Device(device_id)

    def sync_device(self) -> None:
        self._device.synchronize()

    def __call__(self, run: Callable) -> float:
        with self._device:
            s = self.stream
            self.start.record(s)
            for _ in range(self.inner):
                run(s.ptr)
            self.end.record(s)
            self.end.synchronize()
            return self._elapsed(self.start, self.end) * 1e-3 / self.inner


def event_timer(device_id: int, inner: int = 3) -> EventTimer:
    """The private-stream timer of ``device_id`` (made once), after the device has finished
    any work already queued (e.g. scratch initialisation on another stream)."""
    with _lock:
        t = _timers.get(device_id)
        if t is None:
            t = _timers[device_id] = EventTimer(device_id, inner)
    t.inner = max(int(inner), 1)
    t.sync_device()
    return t
