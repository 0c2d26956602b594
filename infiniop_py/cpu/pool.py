"""The CPU backend's thread pool.

NumPy ufuncs, casts and BLAS calls, and the compiled kernels of :mod:`.jit`, release the GIL,
so a few threads working on parts of one tensor run in parallel. Work is always split the
same way for a given shape (never by the number of threads or by timing), so results are
bitwise the same from run to run. A part that itself asks for parallel work (a kernel calling
a helper that splits again) runs that work inline: the pool never waits on itself.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))

PARTS_PER_THREAD = 4  # parts of a split per thread: a late thread's share goes to the others

_pool = None
_lock = threading.Lock()
_local = threading.local()


def executor():
    """The process-wide pool (created on first use)."""
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="infiniop-cpu", initializer=_mark_worker)
    return _pool


def _mark_worker() -> None:
    _local.worker = True


def parallel() -> bool:
    """Whether work may be spread over the pool here: more than one thread, and not already
    inside a pool task."""
    return THREADS > 1 and not getattr(_local, "worker", False)


def run_all(fn: Callable, parts: Sequence[tuple]) -> None:
    """``fn(*part)`` for every part: shared out over the pool when :func:`parallel` and there
    are several parts, else in order on the calling thread. Exceptions propagate.

    Parts are taken in order from a shared counter by the caller and by up to ``THREADS - 1``
    helpers, whoever is free: a helper that the system is slow to schedule (a busy machine, or
    another library's threads spinning on the cores) leaves its parts to the caller instead of
    holding it up; one not yet started when the parts run out is cancelled, not waited for.
    Which thread runs a part never changes its result: parts write disjoint outputs (or their
    own partial results, combined in part order by the caller)."""
    n = len(parts)
    if n < 2 or not parallel():
        for p in parts:
            fn(*p)
        return
    counter = itertools.count()
    failed = []

    def take():
        _local.worker = True  # parts do not split again
        try:
            for i in counter:
                if i >= n or failed:
                    return
                fn(*parts[i])
        except BaseException as exc:
            failed.append(exc)
            raise

    pool = executor()
    helpers = [pool.submit(take) for _ in range(min(THREADS, n) - 1)]
    try:
        take()
    finally:
        _local.worker = False
        for f in helpers:
            if not f.cancel():
                f.exception()  # wait; its error, if any, is in failed (the caller's first)
    if failed:
        raise failed[0]


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
