"""Compile cache: one templated CUDA source, instantiated per dtype through NVRTC name expressions.

Modules are compiled at descriptor creation and cached in process per (source, names, device),
in a least-recently-used cache of at most ``MODULE_CACHE_LIMIT`` modules. A module stays loaded
while anything holds one of its kernel pointers (``Module.ptr`` values keep their module alive,
and ``Launch`` keeps the pointer): evicting it from the cache unloads it only once no descriptor
uses it. Many threads asking for the same new module compile it once; different modules compile
in parallel. CuPy's compiler caches the binaries on disk; processes that ask for the same new
module at the same time (pytest workers, one process per GPU) take turns through a file lock in
that cache folder (``_disk_turn``), so one compiles and the others load its binary. Every source gets
``include/iop_common.cuh`` prepended, so no CUDA toolkit headers are needed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from contextlib import contextmanager
from pathlib import Path

from ..lru import LRU
from ..status import Status, error
from . import runtime

INCLUDE_DIR = Path(__file__).parent / "include"
PREAMBLE = (INCLUDE_DIR / "iop_common.cuh").read_text()
OPTIONS = ("-std=c++17",)

#: Compiled modules kept per process (all devices together). The case tables of every operator
#: ask for about 2,000 distinct (source, instantiations) keys; a process that asks for more
#: recompiles the least recently used ones when it needs them again.
MODULE_CACHE_LIMIT = 4096

_lock = threading.Lock()  # guards _modules and _compiling (never held while compiling)
_modules: LRU = LRU(MODULE_CACHE_LIMIT)
_compiling: dict[tuple, threading.Lock] = {}  # key -> lock held by the thread compiling it


def full_source(source: str) -> str:
    return PREAMBLE + '\n#line 1 "kernel.cu"\n' + source


def options_for(cc: int) -> tuple[str, ...]:
    return (*OPTIONS, f"--gpu-architecture=sm_{cc}")


class KernelPtr(int):
    """A kernel's function pointer (an ``int``) that keeps its module loaded while it is held."""


# cuFuncGetAttribute / cuFuncSetAttribute attribute numbers (CUfunction_attribute, cuda.h)
_ATTR = {
    "shared_size_bytes": 1,
    "const_size_bytes": 2,
    "local_size_bytes": 3,
    "num_regs": 4,
    "max_dynamic_shared_size_bytes": 8,
    "preferred_shared_memory_carveout": 9,
}


def _driver():
    try:
        from cupy_backends.cuda.api import driver
    except ImportError:  # pragma: no cover - older CuPy
        from cupy.cuda import driver
    return driver


class Kernel:
    """One kernel of a module: ``ptr`` and the function attributes planners read or set
    (``num_regs``, ``shared_size_bytes``, ``local_size_bytes``; ``max_dynamic_shared_size_bytes``
    and ``preferred_shared_memory_carveout`` may be set), as CuPy's ``RawKernel`` names them."""

    __slots__ = ("ptr", "_fn")

    def __init__(self, ptr: KernelPtr, fn=None):
        self.ptr = ptr
        self._fn = fn  # the CuPy Function (holds the module too)

    def __getattr__(self, name):
        attr = _ATTR.get(name)
        if attr is None:
            raise AttributeError(name)
        return int(_driver().funcGetAttribute(attr, int(self.ptr)))

    def __setattr__(self, name, value):
        if name in Kernel.__slots__:
            object.__setattr__(self, name, value)
            return
        attr = _ATTR.get(name)
        if attr is None:
            raise AttributeError(name)
        _driver().funcSetAttribute(int(self.ptr), attr, int(value))


def _cupy_compile():
    """CuPy's compile-with-disk-cache function (what ``RawModule`` calls), or None. Unlike
    ``RawModule``, calling it directly keeps no module in CuPy's unbounded in-memory memo, so a
    module evicted from this cache can be unloaded."""
    try:
        from cupy._core import core
    except Exception:  # noqa: BLE001 - CuPy layout differs: use RawModule
        return None
    return getattr(core, "compile_with_cache", None)


@contextmanager
def _disk_turn(code: str, opts: tuple, names: tuple):
    """Holds one of 256 lock files in CuPy's cache folder (chosen by the module's hash) while a
    module compiles, so processes compiling the same module wait for the first one's binary. No
    lock (and no waiting) where the folder or ``fcntl`` is unavailable."""
    try:
        import fcntl

        from cupy.cuda import compiler

        folder = compiler.get_cache_dir()
        os.makedirs(folder, exist_ok=True)
        bucket = hashlib.sha1(repr((code, opts, names)).encode()).hexdigest()[:2]
        fd = os.open(os.path.join(folder, f"infiniop-compile-{bucket}.lock"), os.O_CREAT | os.O_RDWR, 0o644)
    except Exception:  # noqa: BLE001 - no lock: compile without taking turns
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class Module:
    """A compiled module: ``kernels`` (``Kernel`` by name expression) and ``ptr`` (their function
    pointers, ``KernelPtr`` values that keep this module loaded)."""

    def __init__(self, source: str, names: tuple[str, ...], device_id: int):
        cp = runtime.cupy()
        cc = runtime.properties(device_id)["cc"]
        code, opts = full_source(source), options_for(cc)
        with cp.cuda.Device(device_id):
            try:
                fns = self._direct(code, opts, names)
                if fns is None:  # pragma: no cover - only with a CuPy without compile_with_cache
                    raw = cp.RawModule(code=code, options=opts, name_expressions=list(names))
                    fns = {n: raw.get_function(n).kernel for n in names}
                    self.raw = raw
            except Exception as exc:
                raise error(Status.INTERNAL_ERROR, f"CUDA compilation failed: {type(exc).__name__}: {exc}") from exc
        self.ptr = {}
        self.kernels = {}
        for n, fn in fns.items():
            p = KernelPtr(fn.ptr)
            p.module = self
            self.ptr[n] = p
            self.kernels[n] = Kernel(p, fn)

    @staticmethod
    def _direct(code: str, opts: tuple, names: tuple):
        compile_with_cache = _cupy_compile()
        if compile_with_cache is None:
            return None
        with _disk_turn(code, opts, names):
            mod = compile_with_cache(code, opts, prepend_cupy_headers=False, name_expressions=names)
        mapping = getattr(mod, "mapping", None) or {}
        if any(n not in mapping for n in names):  # pragma: no cover - no lowered names: use RawModule
            return None
        return {n: mod.get_function(mapping[n]) for n in names}


def get_module(source: str, names, device_id: int) -> Module:
    """The module of ``source`` instantiating ``names`` on ``device_id``, compiled on first use."""
    names = tuple(names)
    key = (hashlib.sha1(source.encode()).hexdigest(), names, device_id)
    with _lock:
        mod = _modules.get(key)
        if mod is not None:
            return mod
        gate = _compiling.get(key)
        if gate is None:
            gate = _compiling[key] = threading.Lock()
    with gate:  # one thread compiles a key; the others wait here, then find it cached
        with _lock:
            mod = _modules.get(key)
        if mod is not None:
            return mod
        try:
            mod = Module(source, names, device_id)
            with _lock:
                _modules.put(key, mod)
        finally:
            with _lock:
                if _compiling.get(key) is gate:
                    del _compiling[key]
    return mod


def cached_modules() -> int:
    """How many modules the cache holds now."""
    with _lock:
        return len(_modules)


def _launch_fn():
    return _driver().launchKernel


class Slot:
    """A per-call pointer argument: ``ptrs[index]`` (or the workspace with index 'ws')."""

    __slots__ = ("index", "offset")

    def __init__(self, index, offset: int = 0):
        self.index = index
        self.offset = offset


class Launch:
    """One kernel launch with its argument block packed once; only pointers change per call.

    args: Slot for per-call pointers, or fixed values (ctypes instances, or bytes for a struct
    passed by value). Pointer slots live in one ctypes array, so a call that passes the tensor
    pointers in order updates them with a single slice assignment. That array is shared by every
    call (so one launch is not called from two threads at once: ``Descriptor.calculate`` runs one
    call per descriptor at a time). ``fn_ptr`` is kept as given (a ``KernelPtr`` keeps its module
    loaded for as long as the launch exists).
    """

    def __init__(self, fn_ptr: int, grid, block, args, shmem: int = 0):
        self.fn_ptr = fn_ptr
        self._fn = int(fn_ptr)
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        self.grid, self.block, self.shmem = grid, block, shmem
        slots = [a for a in args if isinstance(a, Slot)]
        self.values = (ctypes.c_uint64 * max(len(slots), 1))()
        self.slots = [(j, a.index, a.offset) for j, a in enumerate(slots)]
        self.holders = []
        addrs = []
        j = 0
        for a in args:
            if isinstance(a, Slot):
                addrs.append(ctypes.addressof(self.values) + 8 * j)
                j += 1
                continue
            h = (ctypes.c_char * len(a)).from_buffer_copy(a) if isinstance(a, (bytes, bytearray)) else a
            self.holders.append(h)
            addrs.append(ctypes.addressof(h))
        self.params = (ctypes.c_void_p * max(len(addrs), 1))(*addrs)
        self.params_ptr = ctypes.addressof(self.params)
        # Fast path: the slots are exactly ptrs[0], ptrs[1], ... in order with no offsets.
        self.in_order = all(idx == j and off == 0 for j, idx, off in self.slots)
        self.nslots = len(self.slots)
        self._launch = _launch_fn()
        g, b = grid, block
        self._cfg = (g[0], g[1], g[2], b[0], b[1], b[2], shmem)

    def __call__(self, ptrs, ws_ptr: int, stream_ptr: int) -> None:
        values = self.values
        if self.in_order and len(ptrs) == self.nslots:
            values[:] = ptrs
        else:
            for j, idx, off in self.slots:
                values[j] = (ws_ptr if idx == "ws" else ptrs[idx]) + off
        self._launch(self._fn, *self._cfg, stream_ptr, self.params_ptr, 0)
