"""Status codes and the exception hierarchy (numbers equal upstream InfiniOP's)."""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    SUCCESS = 0
    INTERNAL_ERROR = 1
    NOT_IMPLEMENTED = 2
    BAD_PARAM = 3
    NULL_POINTER = 4
    DEVICE_TYPE_NOT_SUPPORTED = 5
    DEVICE_NOT_FOUND = 6
    DEVICE_NOT_INITIALIZED = 7
    DEVICE_ARCHITECTURE_NOT_SUPPORTED = 8
    BAD_TENSOR_DTYPE = 10
    BAD_TENSOR_SHAPE = 11
    BAD_TENSOR_STRIDES = 12
    INSUFFICIENT_WORKSPACE = 13


class InfiniopError(RuntimeError):
    """Every failure of the public API. ``.status`` says which kind."""

    status: Status = Status.INTERNAL_ERROR

    def __init__(self, message: str, status: Status | None = None):
        if status is not None:
            self.status = Status(status)
        super().__init__(f"{message} ({self.status.name})")
        self.message = message


def _subclass(name: str, status: Status) -> type[InfiniopError]:
    return type(name, (InfiniopError,), {"status": status, "__doc__": f"Status {status.name}."})


InternalError = _subclass("InternalError", Status.INTERNAL_ERROR)
NotImplementedStatus = _subclass("NotImplementedStatus", Status.NOT_IMPLEMENTED)
BadParam = _subclass("BadParam", Status.BAD_PARAM)
NullPointer = _subclass("NullPointer", Status.NULL_POINTER)
DeviceTypeNotSupported = _subclass("DeviceTypeNotSupported", Status.DEVICE_TYPE_NOT_SUPPORTED)
DeviceNotFound = _subclass("DeviceNotFound", Status.DEVICE_NOT_FOUND)
DeviceNotInitialized = _subclass("DeviceNotInitialized", Status.DEVICE_NOT_INITIALIZED)
DeviceArchitectureNotSupported = _subclass("DeviceArchitectureNotSupported", Status.DEVICE_ARCHITECTURE_NOT_SUPPORTED)
BadTensorDtype = _subclass("BadTensorDtype", Status.BAD_TENSOR_DTYPE)
BadTensorShape = _subclass("BadTensorShape", Status.BAD_TENSOR_SHAPE)
BadTensorStrides = _subclass("BadTensorStrides", Status.BAD_TENSOR_STRIDES)
InsufficientWorkspace = _subclass("InsufficientWorkspace", Status.INSUFFICIENT_WORKSPACE)

_BY_STATUS = {
    cls.status: cls
    for cls in (
        InternalError,
        NotImplementedStatus,
        BadParam,
        NullPointer,
        DeviceTypeNotSupported,
        DeviceNotFound,
        DeviceNotInitialized,
        DeviceArchitectureNotSupported,
        BadTensorDtype,
        BadTensorShape,
        BadTensorStrides,
        InsufficientWorkspace,
    )
}


def error(status: Status, message: str) -> InfiniopError:
    """Build the most specific InfiniopError subclass for ``status``."""
    return _BY_STATUS.get(Status(status), InfiniopError)(message, Status(status))
