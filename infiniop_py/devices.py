"""Devices and handles."""

from __future__ import annotations

from enum import IntEnum

from .status import Status, error


class Device(IntEnum):
    CPU = 0
    NVIDIA = 1
    CAMBRICON = 2
    ASCEND = 3
    METAX = 4
    MOORE = 5
    ILUVATAR = 6
    KUNLUN = 7
    HYGON = 8
    QY = 9
    ALI = 10


SUPPORTED = (Device.CPU, Device.NVIDIA)


def parse_device(device, device_id: int | None = None) -> tuple[Device, int]:
    """Accept Device, its int value, 'cpu', 'nvidia', 'nvidia:1' (and upstream names)."""
    dev_id = device_id
    if isinstance(device, str):
        name, _, idx = device.strip().lower().partition(":")
        try:
            dev = Device[name.upper()]
        except KeyError:
            raise error(Status.DEVICE_TYPE_NOT_SUPPORTED, f"unknown device {device!r}") from None
        if idx:
            try:
                parsed = int(idx)
            except ValueError:
                raise error(Status.BAD_PARAM, f"bad device id in {device!r}") from None
            if dev_id is not None and dev_id != parsed:
                raise error(Status.BAD_PARAM, f"device {device!r} conflicts with device_id={dev_id}")
            dev_id = parsed
    else:
        try:
            dev = Device(int(device))
        except (ValueError, TypeError):
            raise error(Status.DEVICE_TYPE_NOT_SUPPORTED, f"unknown device {device!r}") from None
    if dev_id is None:
        dev_id = 0
    if not isinstance(dev_id, int) or isinstance(dev_id, bool) or dev_id < 0:
        raise error(Status.BAD_PARAM, f"bad device id {dev_id!r}")
    return dev, dev_id


class Handle:
    """A device context: which backend and which device id operators run on."""

    __slots__ = ("device", "device_id", "_destroyed")

    def __init__(self, device: Device, device_id: int):
        self.device = device
        self.device_id = device_id
        self._destroyed = False

    @property
    def name(self) -> str:
        return "cpu" if self.device is Device.CPU else f"nvidia:{self.device_id}"

    def __repr__(self) -> str:
        return f"Handle({self.name})"

    def check_alive(self, who: str = "handle") -> None:
        if self._destroyed:
            raise error(Status.BAD_PARAM, f"{who}: handle was destroyed")


def create_handle(device=Device.CPU, device_id: int | None = None) -> Handle:
    """Create a handle for ``device`` ('cpu', 'nvidia', 'nvidia:1', Device.NVIDIA, ...)."""
    dev, dev_id = parse_device(device, device_id)
    if dev not in SUPPORTED:
        raise error(Status.DEVICE_TYPE_NOT_SUPPORTED, f"device {dev.name} has no backend in infiniop_py")
    if dev is Device.CPU:
        if dev_id != 0:
            raise error(Status.DEVICE_NOT_FOUND, f"cpu device id must be 0, got {dev_id}")
    else:
        from .cuda import runtime

        count = runtime.device_count()
        if dev_id >= count:
            raise error(
                Status.DEVICE_NOT_FOUND,
                f"device 'nvidia:{dev_id}' not available: {count} GPU{'s' if count != 1 else ''} visible",
            )
    return Handle(dev, dev_id)


def destroy_handle(handle: Handle) -> None:
    if not isinstance(handle, Handle):
        raise error(Status.BAD_PARAM, "destroy_handle: not a handle")
    handle.check_alive("destroy_handle")
    handle._destroyed = True
