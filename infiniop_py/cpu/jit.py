"""Optional compiled CPU kernels: numba (the ``cpu-fast`` extra), used where it measurably wins.

NumPy stays the backend: every operator has a pure-NumPy path that gives results within the
same tolerances, and :func:`kernels` returns ``None`` (so callers take that path) when numba is
not installed, when ``INFINIOP_CPU_PURE=1`` is set (read at import), inside :func:`pure_numpy`, or when the
kernels fail to compile or fail their self-check. Kernels compile on first use and numba
caches the machine code on disk (``cache=True``), so later processes only load them.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from ..tuning import knob

_state: dict = {"module": None, "tried": False}
_lock = threading.Lock()
_forced_pure = int(knob("INFINIOP_CPU_PURE"))


def _load():
    try:
        import numpy as np

        from . import kernels as k

        # Self-check on values whose conversions are exact and known (also compiles the kernels).
        h = np.array([0.0, -0.0, 1.0, -2.5, np.inf, 65504.0, 6e-8, 2.0**-14], np.float16)
        f = np.empty(h.size, np.float32)
        k.f16_to_f32(h.view(np.uint16), f)
        back = np.empty(h.size, np.uint16)
        k.f32_to_f16(f, back)
        b = np.empty(h.size, np.uint16)
        k.f32_to_bf16(f.view(np.uint32), b)
        fb = np.empty(h.size, np.uint32)
        k.bf16_to_f32(b, fb)
        if not (np.array_equal(f, h.astype(np.float32)) and np.array_equal(back, h.view(np.uint16))):
            return None
        if not np.array_equal(fb.view(np.float32)[:5], f[:5]):  # exact in bfloat16 as well
            return None
        return k
    except Exception:  # numba missing, unsupported platform, compile failure: the NumPy path
        return None


def kernels():
    """The compiled kernels module, or ``None`` when the pure-NumPy path is to be used."""
    if _forced_pure:
        return None
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["module"] = _load()
                _state["tried"] = True
    return _state["module"]


def entry(name: str, *examples):
    """The machine code of compiled kernel ``name`` for the argument types of ``examples``,
    callable without numba's per-call dispatch (the type of every argument looked up and
    matched, ~0.15 us of a ~0.3 us call of a small kernel), or ``None`` where the kernels are
    unavailable or it cannot be had. Nothing checks the arguments' types at the call: callers
    pass exactly those types (arrays: the same number of dims, C-contiguous and aligned,
    elements of the same size; the bits are read as the examples' dtype) and still ask
    :func:`kernels` before each call, so that :func:`pure_numpy` takes effect."""
    k = kernels()
    if k is None:
        return None
    try:
        import numba

        fn = getattr(k, name)
        sig = tuple(numba.typeof(x) for x in examples)
        fn.compile(sig)  # loads numba's disk cache, or compiles
        return fn.get_overload(sig)
    except Exception:  # a numba without these entry points: the caller's dispatched path
        return None


@contextmanager
def pure_numpy():
    """Within the block every CPU kernel takes its pure-NumPy path (for tests and A/B timing)."""
    global _forced_pure
    _forced_pure += 1
    try:
        yield
    finally:
        _forced_pure -= 1
