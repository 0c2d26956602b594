"""Buffer adapters: turn what the caller passes into a base address, checking device and extent.

Accepted: NumPy arrays, CuPy arrays, torch tensors, objects with ``__array_interface__`` /
``__cuda_array_interface__`` or DLPack, plain int addresses, and None (absent or empty).
The descriptor defines the layout; the buffer only supplies the base address. Where the object
knows its extent we check that the descriptor's strided span fits.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

from .status import InfiniopError, Status, error

CPU, GPU = "cpu", "gpu"


def _np_extent(a: np.ndarray) -> tuple[int, int]:
    base = a.__array_interface__["data"][0]
    if a.size == 0:
        return base, 0
    hi = base + sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s > 0) + a.itemsize
    return base, hi - base


def _interface_extent(iface: dict, itemsize_hint: int | None = None) -> tuple[int, int]:
    ptr = iface["data"][0]
    shape = tuple(iface["shape"])
    itemsize = np.dtype(iface["typestr"]).itemsize if iface.get("typestr") else (itemsize_hint or 1)
    strides = iface.get("strides")
    if strides is None:
        acc, strides = itemsize, []
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        strides = tuple(reversed(strides))
    if any(d == 0 for d in shape):
        return ptr, 0
    return ptr, sum((d - 1) * s for d, s in zip(shape, strides) if s > 0) + itemsize


def _torch_info(t):
    """(kind, device id, address, extent in bytes to the end of the storage)."""
    ptr = t.data_ptr()
    try:
        storage = t.untyped_storage()
        extent = storage.data_ptr() + storage.nbytes() - ptr
    except Exception:  # pragma: no cover - exotic tensors
        extent = None
    dev = t.device
    if dev.type == "cpu":
        return CPU, 0, ptr, extent
    if dev.type == "cuda":
        return GPU, dev.index if dev.index is not None else 0, ptr, extent
    return dev.type, dev.index or 0, ptr, extent


def describe(obj) -> tuple[str, int, int, int | None, bool]:
    """(kind 'cpu'|'gpu'|other, device id, address, extent or None, writable) of a buffer."""
    if isinstance(obj, np.ndarray):
        ptr, ext = _np_extent(obj)
        return CPU, 0, ptr, ext, obj.flags.writeable
    mod = type(obj).__module__
    if mod.startswith("cupy"):
        dev = obj.device.id
        ptr = obj.data.ptr
        if obj.size == 0:
            return GPU, dev, ptr, 0, True
        ext = sum((d - 1) * s for d, s in zip(obj.shape, obj.strides) if s > 0) + obj.itemsize
        return GPU, dev, ptr, ext, True
    if mod.startswith("torch") and "torch" in sys.modules and isinstance(obj, sys.modules["torch"].Tensor):
        kind, dev, ptr, ext = _torch_info(obj)
        return kind, dev, ptr, ext, True
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        ptr, ext = _interface_extent(iface)
        dev = 0
        try:
            from .cuda import runtime

            dev = runtime.pointer_device(ptr)
        except Exception:
            pass
        return GPU, dev, ptr, ext, not iface["data"][1]
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        ptr, ext = _interface_extent(iface)
        return CPU, 0, ptr, ext, not iface["data"][1]
    if hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if int(dev_type) == 1:  # kDLCPU
            arr = np.from_dlpack(obj)
            ptr, ext = _np_extent(arr)
            return CPU, 0, ptr, ext, True
        if int(dev_type) in (2, 13):  # kDLCUDA, kDLCUDAManaged
            import cupy

            arr = cupy.from_dlpack(obj)
            return describe(arr)
        return f"dlpack{int(dev_type)}", int(dev_id), 0, None, True
    raise error(Status.BAD_PARAM, f"unsupported buffer type {type(obj).__name__}")


def _c_contiguous(obj) -> bool:
    # CuPy keeps the flag as a C attribute; ``flags`` builds an object per access (4x slower).
    try:
        return obj._c_contiguous
    except AttributeError:
        return obj.flags.c_contiguous


def _cupy_fast(obj, op, name, nbytes, gpu, device_id, write):
    """CuPy arrays: C-level attribute reads only, for the per-call hot path."""
    data = obj.data
    if not gpu or data.device_id != device_id:
        return None
    if obj.nbytes < nbytes or not _c_contiguous(obj):
        return None  # let the general path compute the exact extent (or report the error)
    return data.ptr


def _torch_fast(obj, op, name, nbytes, gpu, device_id, write):
    # get_device() is -1 for CPU tensors, so it also answers "is this on the GPU".
    if not gpu or obj.get_device() != device_id or obj.nbytes < nbytes or not obj.is_contiguous():
        return None
    return obj.data_ptr()


def _numpy_fast(obj, op, name, nbytes, gpu, device_id, write):
    if gpu or obj.nbytes < nbytes or not obj.flags.c_contiguous or (write and not obj.flags.writeable):
        return None
    return obj.__array_interface__["data"][0]


_FAST: dict[type, object] = {np.ndarray: _numpy_fast}

# Array types whose base address, device and extent never change for a given object (CuPy
# arrays: ``data`` is read-only and reshaping in place keeps the size). The descriptor may
# reuse its check of the same object on the next call; torch tensors (resize_, set_) and
# NumPy arrays (resize) can change in place, so they are checked every call.
IMMUTABLE_VIEWS: set = set()

# Types whose checked address may be reused on the next call if the object is the same and
# ``data_ptr()`` still returns the same address: torch tensors can be re-pointed in place
# (``set_``, ``resize_`` growing), which moves ``data_ptr``; shrinking in place keeps the
# allocation, so the extent checked before is still backed by memory.
REVALIDATED_VIEWS: set = set()


def register_fast_types() -> None:
    """Add hot-path extractors for CuPy and torch array types (called when a GPU handle is made)."""
    try:
        import cupy

        _FAST[cupy.ndarray] = _cupy_fast
        IMMUTABLE_VIEWS.add(cupy.ndarray)
    except Exception:
        pass
    if "torch" in sys.modules:
        _FAST[sys.modules["torch"].Tensor] = _torch_fast
        REVALIDATED_VIEWS.add(sys.modules["torch"].Tensor)
        try:
            _FAST[sys.modules["torch"].nn.Parameter] = _torch_fast
        except Exception:
            pass


def address(obj, op: str, name: str, nbytes: int, gpu: bool, device_id: int, write: bool) -> int:
    """Base address of ``obj`` after checking kind, device, extent and writability."""
    fast = _FAST.get(type(obj))
    if fast is not None:
        ptr = fast(obj, op, name, nbytes, gpu, device_id, write)
        if ptr is not None:
            return ptr
    elif "torch" in sys.modules and type(obj) not in _FAST and type(obj).__module__.startswith("torch"):
        register_fast_types()
    if obj is None:
        if nbytes == 0:
            return 0
        raise error(Status.NULL_POINTER, f"{op}: buffer '{name}' is None but its descriptor spans {nbytes} bytes")
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        ptr = int(obj)
        if ptr == 0 and nbytes:
            raise error(Status.NULL_POINTER, f"{op}: buffer '{name}' is a null address")
        if ptr < 0:
            raise error(Status.BAD_PARAM, f"{op}: buffer '{name}' has a negative address")
        return ptr
    try:
        kind, dev, ptr, ext, writable = describe(obj)
    except InfiniopError as exc:
        raise error(Status.BAD_PARAM, f"{op}: buffer '{name}': {exc.message}") from None
    except Exception as exc:  # foreign objects that fail to describe themselves
        raise error(Status.BAD_PARAM, f"{op}: buffer '{name}' could not be read ({type(exc).__name__}: {exc})") from None
    want = GPU if gpu else CPU
    if kind != want:
        where = f"nvidia:{device_id}" if gpu else "cpu"
        raise error(Status.BAD_PARAM, f"{op}: buffer '{name}' is on {kind}, but the handle is {where}")
    if gpu and dev != device_id:
        raise error(Status.BAD_PARAM, f"{op}: buffer '{name}' is on nvidia:{dev}, but the handle is nvidia:{device_id}")
    if ext is not None and ext < nbytes:
        raise error(
            Status.BAD_PARAM,
            f"{op}: buffer '{name}' holds {ext} bytes but its descriptor spans {nbytes} bytes",
        )
    if write and not writable:
        raise error(Status.BAD_PARAM, f"{op}: output buffer '{name}' is read-only")
    return ptr


def host_view(ptr: int, desc) -> np.ndarray:
    """A NumPy view of host memory at ``ptr`` laid out as ``desc`` (shape, element strides)."""
    from .dtypes import to_numpy

    npd = to_numpy(desc.dtype)
    nbytes = desc.span_bytes
    if nbytes == 0 or ptr == 0:
        return np.empty(desc.shape, dtype=npd)
    raw = np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype=np.uint8)
    flat = raw.view(npd)
    return np.lib.stride_tricks.as_strided(flat, shape=desc.shape, strides=tuple(s * npd.itemsize for s in desc.strides))
