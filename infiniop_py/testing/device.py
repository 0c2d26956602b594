"""Moving host buffers to a backend and back (NumPy for the CPU, CuPy for NVIDIA)."""

from __future__ import annotations

import numpy as np


class HostBackend:
    name = "cpu"
    gpu = False

    def upload(self, flat: np.ndarray):
        return np.array(flat, copy=True)

    def download(self, buf, dtype) -> np.ndarray:
        return np.array(buf, copy=True)

    def empty_bytes(self, n: int, fill: int = 0xA5):
        return np.full(n, fill, dtype=np.uint8)

    def synchronize(self):
        pass


class CupyBackend:
    gpu = True

    def __init__(self, device_id: int = 0):
        from ..cuda import runtime

        self.cp = runtime.cupy()
        self.device_id = device_id
        self.name = f"nvidia:{device_id}"

    def upload(self, flat: np.ndarray):
        raw = flat.view(f"u{flat.dtype.itemsize}") if flat.dtype.itemsize in (1, 2, 4, 8) else flat
        with self.cp.cuda.Device(self.device_id):
            return self.cp.asarray(raw)

    def download(self, buf, dtype) -> np.ndarray:
        return self.cp.asnumpy(buf).view(dtype)

    def empty_bytes(self, n: int, fill: int = 0xA5):
        with self.cp.cuda.Device(self.device_id):
            return self.cp.full(n, fill, dtype=self.cp.uint8)

    def synchronize(self):
        with self.cp.cuda.Device(self.device_id):
            self.cp.cuda.get_current_stream().synchronize()


def backend_for(device: str):
    if device == "cpu":
        return HostBackend()
    _, _, idx = device.partition(":")
    return CupyBackend(int(idx or 0))
