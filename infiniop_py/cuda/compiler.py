"""Compile cache: one templated CUDA source, instantiated per dtype through NVRTC name expressions.

Modules are compiled at descriptor creation and cached in process per (source, names, device);
CuPy also caches the binaries on disk. Every source gets ``include/iop_common.cuh`` prepended,
so no CUDA toolkit headers are needed.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from pathlib import Path

from ..status import Status, error
from . import runtime

INCLUDE_DIR = Path(__file__).parent / "include"
PREAMBLE = (INCLUDE_DIR / "iop_common.cuh").read_text()
OPTIONS = ("-std=c++17",)

_lock = threading.Lock()
_modules: dict[tuple, Module] = {}


def full_source(source: str) -> str:
    return PREAMBLE + '\n#line 1 "kernel.cu"\n' + source


def options_for(cc: int) -> tuple[str, ...]:
    return (*OPTIONS, f"--gpu-architecture=sm_{cc}")


class Module:
    """A compiled module: kernel function pointers by name expression."""

    def __init__(self, source: str, names: tuple[str, ...], device_id: int):
        cp = runtime.cupy()
        cc = runtime.properties(device_id)["cc"]
        with cp.cuda.Device(device_id):
            try:
                self.raw = cp.RawModule(code=full_source(source), options=options_for(cc), name_expressions=list(names))
                self.kernels = {n: self.raw.get_function(n) for n in names}
                self.ptr = {n: k.kernel.ptr for n, k in self.kernels.items()}
            except Exception as exc:
                raise error(Status.INTERNAL_ERROR, f"CUDA compilation failed: {type(exc).__name__}: {exc}") from exc


def get_module(source: str, names, device_id: int) -> Module:
    names = tuple(names)
    key = (hashlib.sha1(source.encode()).hexdigest(), names, device_id)
    mod = _modules.get(key)
    if mod is None:
        with _lock:
            mod = _modules.get(key)
            if mod is None:
                mod = Module(source, names, device_id)
                _modules[key] = mod
    return mod


def _launch_fn():
    try:
        from cupy_backends.cuda.api import driver
    except ImportError:  # pragma: no cover - older CuPy
        from cupy.cuda import driver
    return driver.launchKernel


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
    pointers in order updates them with a single slice assignment.
    """

    def __init__(self, fn_ptr: int, grid, block, args, shmem: int = 0):
        self.fn_ptr = fn_ptr
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
        self._launch(self.fn_ptr, *self._cfg, stream_ptr, self.params_ptr, 0)
