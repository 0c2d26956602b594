"""infiniop_py: an operator library on the model of upstream InfiniOP.

>>> import infiniop_py as iop
>>> h = iop.create_handle("cpu")
>>> d = iop.create_descriptor("add", h, c, a, b)      # tensor descriptors
>>> d.calculate(None, c_buf, a_buf, b_buf)

C-style names (``infiniopCreateAddDescriptor`` ...) are generated from the registry on access.
"""

from __future__ import annotations

from . import dtypes as _dtypes
from .descriptor import Descriptor, create_descriptor
from .devices import Device, Handle, create_handle, destroy_handle
from .dtypes import (
    DType,
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .registry import list_ops, op_info
from .status import (
    BadParam,
    BadTensorDtype,
    BadTensorShape,
    BadTensorStrides,
    DeviceNotFound,
    DeviceTypeNotSupported,
    InfiniopError,
    InsufficientWorkspace,
    InternalError,
    NotImplementedStatus,
    NullPointer,
    Status,
)
from .tensor import (
    TensorDescriptor,
    create_tensor_descriptor,
    destroy_tensor_descriptor,
    infiniopCreateTensorDescriptor,
    infiniopDestroyTensorDescriptor,
)

__version__ = "0.1.0"


def infiniopCreateHandle(device=Device.CPU, device_id: int = 0) -> Handle:  # noqa: N802
    return create_handle(device, device_id)


infiniopDestroyHandle = destroy_handle  # noqa: N816


def __getattr__(name: str):
    if name.startswith("infiniop"):
        from .cstyle import lookup

        fn = lookup(name)
        if fn is not None:
            globals()[name] = fn
            return fn
    if name == "ops":
        import importlib

        return importlib.import_module(".ops", __name__)
    raise AttributeError(f"module 'infiniop_py' has no attribute {name!r}")


def __dir__():
    from .cstyle import all_names

    return sorted(set(globals()) | set(all_names()) | {"ops"})


__all__ = [
    "BadParam",
    "BadTensorDtype",
    "BadTensorShape",
    "BadTensorStrides",
    "DType",
    "Descriptor",
    "Device",
    "DeviceNotFound",
    "DeviceTypeNotSupported",
    "Handle",
    "InfiniopError",
    "InsufficientWorkspace",
    "InternalError",
    "NotImplementedStatus",
    "NullPointer",
    "Status",
    "TensorDescriptor",
    "bfloat16",
    "bool_",
    "create_descriptor",
    "create_handle",
    "create_tensor_descriptor",
    "destroy_handle",
    "destroy_tensor_descriptor",
    "float16",
    "float32",
    "float64",
    "infiniopCreateHandle",
    "infiniopCreateTensorDescriptor",
    "infiniopDestroyHandle",
    "infiniopDestroyTensorDescriptor",
    "int16",
    "int32",
    "int64",
    "int8",
    "list_ops",
    "op_info",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
]
_ = _dtypes
