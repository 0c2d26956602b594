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
    passed by value).
    """

    def __init__(self, fn_ptr: int, grid, block, args, shmem: int = 0):
        self.fn_ptr = fn_ptr
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        self.grid, self.block, self.shmem = grid, block, shmem
        self.holders = []
        self.slots = []
        for a in args:
            if isinstance(a, Slot):
                h = ctypes.c_void_p(0)
                self.slots.append((h, a.index, a.offset))
            elif isinstance(a, (bytes, bytearray)):
                h = (ctypes.c_char * len(a)).from_buffer_copy(a)
            else:
                h = a
            self.holders.append(h)
        self.params = (ctypes.c_void_p * max(len(self.holders), 1))(*[ctypes.addressof(h) for h in self.holders])
        self.params_ptr = ctypes.addressof(self.params)
        self._launch = _launch_fn()

    def __call__(self, ptrs, ws_ptr: int, stream_ptr: int) -> None:
        for h, idx, off in self.slots:
            h.value = (ws_ptr if idx == "ws" else ptrs[idx]) + off
        g, b = self.grid, self.block
        self._launch(self.fn_ptr, g[0], g[1], g[2], b[0], b[1], b[2], self.shmem, stream_ptr, self.params_ptr, 0)
