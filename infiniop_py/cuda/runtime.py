"""Lazy CuPy access. Nothing here imports CuPy until a GPU is actually used."""

from __future__ import annotations

import functools

from ..status import Status, error


@functools.cache
def _cupy():
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install
        return exc
    return cupy


def cupy():
    """The cupy module, or DEVICE_NOT_INITIALIZED if it cannot be imported."""
    mod = _cupy()
    if isinstance(mod, Exception):
        raise error(Status.DEVICE_NOT_INITIALIZED, f"NVIDIA backend needs CuPy: {type(mod).__name__}: {mod}")
    return mod


def available() -> bool:
    return device_count() > 0


@functools.cache
def device_count() -> int:
    mod = _cupy()
    if isinstance(mod, Exception):
        return 0
    try:
        return int(mod.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


@functools.cache
def properties(device_id: int) -> dict:
    cp = cupy()
    props = cp.cuda.runtime.getDeviceProperties(device_id)
    return {
        "name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "sm_count": props["multiProcessorCount"],
        "cc": props["major"] * 10 + props["minor"],
        "max_shared_per_block_optin": props.get("sharedMemPerBlockOptin", 48 * 1024),
        # occupancy limits per SM (None where this CuPy does not report them)
        "shared_per_sm": props.get("sharedMemPerMultiprocessor"),
        "reserved_shared_per_block": props.get("reservedSharedMemPerBlock"),
        "regs_per_sm": props.get("regsPerMultiprocessor"),
        "threads_per_sm": props.get("maxThreadsPerMultiProcessor"),
        "blocks_per_sm": props.get("maxBlocksPerMultiProcessor"),
    }


def occupancy(func_ptr: int, threads: int, dyn_smem: int = 0) -> int | None:
    """Blocks of ``threads`` threads of the kernel at ``func_ptr`` resident on one SM, by the
    driver's occupancy calculator; None where this CuPy does not expose it."""
    try:
        from cupy_backends.cuda.api import driver
    except ImportError:
        return None
    try:
        return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(func_ptr, threads, dyn_smem))
    except Exception:  # noqa: BLE001 - not exposed by this CuPy, or the driver declined: unknown
        return None


def pointer_device(ptr: int) -> int:
    cp = cupy()
    attrs = cp.cuda.runtime.pointerGetAttributes(ptr)
    return int(attrs.device)


def _current_stream():
    global _current_stream
    _current_stream = cupy().cuda.get_current_stream
    return _current_stream()


def current_stream_ptr() -> int:
    return _current_stream().ptr


def stream_ptr(stream) -> int:
    """cudaStream_t of ``stream``: None (CuPy's current stream), CuPy/torch streams, or an int."""
    if stream is None:
        return _current_stream().ptr
    if isinstance(stream, int):
        return stream
    ptr = getattr(stream, "ptr", None)
    if isinstance(ptr, int):
        return ptr
    ptr = getattr(stream, "cuda_stream", None)
    if isinstance(ptr, int):
        return ptr
    raise error(Status.BAD_PARAM, f"unsupported stream object {type(stream).__name__}")
