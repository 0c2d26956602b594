"""The device limits the normalization planners use, from the device's properties.

``runtime.properties`` queries a device once; a property it does not report (the fake devices of
the CPU-only planner tests) takes the figure of sm_90.
"""

from __future__ import annotations

from typing import NamedTuple

from ..cuda import runtime

SM90 = {  # per SM unless named per block
    "max_shared_per_block_optin": 227 * 1024,
    "shared_per_sm": 228 * 1024,
    "reserved_shared_per_block": 1024,
    "regs_per_sm": 65536,
    "threads_per_sm": 2048,
    "blocks_per_sm": 32,
}


class Limits(NamedTuple):
    sms: int
    shared_per_block_optin: int
    shared_per_sm: int
    reserved_shared_per_block: int
    regs_per_sm: int
    threads_per_sm: int
    blocks_per_sm: int


def device_limits(device_id: int) -> Limits:
    p = runtime.properties(device_id)

    def get(key):
        v = p.get(key)
        return SM90[key] if v is None else int(v)

    return Limits(
        int(p["sm_count"]),
        get("max_shared_per_block_optin"),
        get("shared_per_sm"),
        get("reserved_shared_per_block"),
        get("regs_per_sm"),
        get("threads_per_sm"),
        get("blocks_per_sm"),
    )


def sm_count(handle) -> int:
    """Streaming multiprocessors of a handle's device."""
    return int(runtime.properties(handle.device_id)["sm_count"])
