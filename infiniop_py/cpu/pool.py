"""The CPU backend's thread pool.

NumPy ufuncs, casts and BLAS calls, and the compiled kernels of :mod:`.jit`, release the GIL,
so a few threads working on parts of one tensor run in parallel. Work is always split the
same way for a given shape (never by the number of threads or by timing), so results are
bitwise the same from run to run. A part that itself asks for parallel work (a kernel calling
a helper that splits again) runs that work inline: the pool never waits on itself.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence

import numpy as np

THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))

PARTS_PER_THREAD = 4  # parts of a split per thread: a late thread's share goes to the others

_lock = threading.Lock()
_local = threading.local()
_workers: list = []  # the helper threads' job queues: helper t serves block t of every split


def _serve(jobs: queue.SimpleQueue, slot: int) -> None:
    _local.worker = True  # parts do not split again
    while True:
        jobs.get().work(slot)


def _helpers() -> list:
    """The job queues of the ``THREADS - 1`` helper threads (started on first use)."""
    if len(_workers) < THREADS - 1:
        with _lock:
            while len(_workers) < THREADS - 1:
                jobs = queue.SimpleQueue()
                slot = len(_workers) + 1
                threading.Thread(target=_serve, args=(jobs, slot), name=f"infiniop-cpu-{slot}", daemon=True).start()
                _workers.append(jobs)
    return _workers


def _forget_helpers() -> None:  # a forked child has none of its parent's threads
    _workers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def parallel() -> bool:
    """Whether work may be spread over the pool here: more than one thread, and not already
    inside a pool task."""
    return THREADS > 1 and not getattr(_local, "worker", False)


class _Job:
    """The parts of one :func:`run_all`, in one contiguous block per thread (slot): a thread
    takes the parts of its own block from the front, then those left in the others' blocks
    from the back."""

    def __init__(self, fn: Callable, parts: Sequence[tuple], slots: int):
        n = len(parts)
        self.fn = fn
        self.parts = parts
        self.front = [n * t // slots for t in range(slots)]  # next part of block t
        self.back = self.front[1:] + [n]  # one past the last part of block t not yet taken
        self.pending = n  # parts not yet finished
        self.lock = threading.Lock()
        self.done = threading.Lock()  # held until the last part finishes
        self.done.acquire()
        self.failed: list = []

    def _take(self, slot: int) -> int:
        front, back = self.front, self.back
        with self.lock:
            i = front[slot]
            if i < back[slot]:
                front[slot] = i + 1
                return i
            t = max(range(len(back)), key=lambda t: back[t] - front[t])  # the most left
            if front[t] < back[t]:
                back[t] -= 1
                return back[t]
        return -1

    def work(self, slot: int) -> None:
        """Run parts until none is left (``slot``: the thread's own block)."""
        while (i := self._take(slot)) >= 0:
            if not self.failed:  # after a failure the rest are only counted off
                try:
                    self.fn(*self.parts[i])
                except BaseException as exc:
                    self.failed.append(exc)
            with self.lock:
                self.pending -= 1
                last = self.pending == 0
            if last:
                self.done.release()


def run_all(fn: Callable, parts: Sequence[tuple]) -> None:
    """``fn(*part)`` for every part: shared out over the pool when :func:`parallel` and there
    are several parts, else in order on the calling thread. Exceptions propagate (the first,
    once every part that started has finished).

    The parts are cut into one contiguous block per thread, the caller's first: each thread
    runs its own block, so that from call to call the same thread (and, as the system tends to
    keep a thread on its core, the same core and cache) works on the same data; a thread that
    runs out takes what is left of the others' blocks from their ends. A helper that the system
    is slow to schedule (a busy machine, or another library's threads spinning on the cores)
    so leaves its parts to the others instead of holding the call up, and one that comes after
    the last part was taken finds nothing to do. Which thread runs a part never changes its
    result: parts write disjoint outputs (or their own partial results, combined in part order
    by the caller)."""
    n = len(parts)
    if n < 2 or not parallel():
        for p in parts:
            fn(*p)
        return
    slots = min(THREADS, n)
    job = _Job(fn, parts, slots)
    for jobs in _helpers()[: slots - 1]:
        jobs.put(job)
    _local.worker = True  # the caller's parts do not split again
    try:
        job.work(0)
    finally:
        _local.worker = False
    job.done.acquire()  # parts still running on helpers
    if job.failed:
        raise job.failed[0]


def bounds(length: int, pieces: int) -> list[tuple[int, int]]:
    """``pieces`` contiguous ``(lo, hi)`` ranges covering ``range(length)``, sizes differing by
    at most one."""
    pieces = max(1, min(pieces, length))
    cuts = [length * k // pieces for k in range(pieces + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


SCRATCH_MAX = 8 << 20  # bytes: larger temporaries are allocated (and freed) per call


def scratch(key, shape, dtype) -> np.ndarray:
    """A temporary array of ``shape`` and ``dtype`` from a buffer the calling thread keeps under
    ``key`` and reuses from call to call (its contents are garbage). Blocked loops allocate their
    cache-sized temporaries here: glibc returns freed blocks of a few hundred KiB to the system
    and faults them back in on the next allocation, which cost more than the arithmetic. A
    caller owns ``key`` until it returns: nested code uses its own keys."""
    dtype = np.dtype(dtype)
    n = 1
    for d in shape if isinstance(shape, tuple) else (shape,):
        n *= d
    nbytes = n * dtype.itemsize
    if nbytes > SCRATCH_MAX:
        return np.empty(shape, dtype)
    bufs = getattr(_local, "scratch", None)
    if bufs is None:
        bufs = _local.scratch = {}
    buf = bufs.get(key)
    if buf is None or buf.size < nbytes:
        buf = bufs[key] = np.empty(max(nbytes, 1 << 16), np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def run_flat(fn: Callable, arrays: Sequence, min_part: int = 1 << 16) -> None:
    """``fn(*parts)`` where the parts are equal contiguous slices of the 1-D arrays ``arrays``
    (all of one length): a few per thread when each is at least ``min_part`` elements and the
    pool may be used, else the whole arrays at once. For elementwise work, whose result does
    not depend on the split."""
    n = len(arrays[0])
    pieces = min(PARTS_PER_THREAD * THREADS, n // min_part) if parallel() else 1
    if pieces < 2:
        fn(*arrays)
        return
    run_all(fn, [tuple(a[lo:hi] for a in arrays) for lo, hi in bounds(n, pieces)])


# Floating-point warnings off for a block of NumPy calls, as ``np.errstate(all="ignore")`` does
# (the operators' results carry inf/NaN as they arise; NumPy's warnings would be noise), at
# ~0.1 us instead of ~0.9 us: NumPy keeps its error state in a context variable.
try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    _QUIET = _make_extobj(all="ignore")

    def fp_quiet():
        """Turn floating-point warnings off; returns the token for :func:`fp_restore`."""
        return _extobj_contextvar.set(_QUIET)

    def fp_restore(token) -> None:
        _extobj_contextvar.reset(token)

except Exception:  # other NumPy versions: the public context manager

    def fp_quiet():
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def fp_restore(token) -> None:
        token.__exit__(None, None, None)
