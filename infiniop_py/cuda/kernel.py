"""Base class for NVIDIA operator kernels: stream resolution and device context around ``launch``."""

from __future__ import annotations

from ..dtypes import INFO, DType
from ..status import Status, error
from . import runtime

BLOCK = 256


def ctype(dtype: DType) -> str:
    name = INFO[dtype].ctype
    if name is None:
        raise error(Status.NOT_IMPLEMENTED, f"dtype {dtype.name} has no CUDA kernel type")
    return name


def grid_for(n: int, per_block: int, device_id: int, waves: int = 4) -> int:
    """Blocks for a grid-stride loop over ``n`` items: enough to fill the GPU ``waves`` times."""
    sm = runtime.properties(device_id)["sm_count"]
    need = max(1, -(-n // per_block))
    return max(1, min(need, sm * (2048 // BLOCK) * waves))


class CudaKernel:
    """Subclasses precompute everything in ``__init__`` and implement ``launch(ptrs, ws, rt, stream)``."""

    workspace_size = 0

    def __init__(self, handle):
        self.device_id = handle.device_id
        self._multi = runtime.device_count() > 1

    def __call__(self, ptrs, ws_ptr, rt, stream):
        s = runtime.stream_ptr(stream)
        if self._multi:
            with runtime.cupy().cuda.Device(self.device_id):
                self.launch(ptrs, ws_ptr, rt, s)
        else:
            self.launch(ptrs, ws_ptr, rt, s)

    def launch(self, ptrs, ws_ptr, rt, stream):  # pragma: no cover - abstract
        raise NotImplementedError
