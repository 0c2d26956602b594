"""Launch helpers shared by the NVIDIA planners: the device's occupancy limits, the resident blocks
of a compiled kernel, the dynamic shared-memory opt-in, and launch combinators (``Pick``: the
vector path when every pointer is aligned, else the scalar one; ``Seq``: launches in order).

``runtime.properties`` queries a device once; a limit it does not report (the fake devices of the
CPU-only planner tests) takes the figure of sm_90.
"""

from __future__ import annotations

from typing import NamedTuple

from . import runtime

SM90 = {  # per SM unless named per block
    "max_shared_per_block_optin": 227 * 1024,
    "shared_per_sm": 228 * 1024,
    "reserved_shared_per_block": 1024,
    "regs_per_sm": 65536,
    "threads_per_sm": 2048,
    "blocks_per_sm": 32,
}


def align_up(n: int, a: int = 256) -> int:
    return -(-n // a) * a


def sm_count(handle) -> int:
    """Streaming multiprocessors of a handle's device."""
    return int(runtime.properties(handle.device_id)["sm_count"])


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
    get = [SM90[k] if p.get(k) is None else int(p[k]) for k in SM90]
    return Limits(int(p["sm_count"]), *get)


def resident_blocks(fn, block: int, dyn_smem: int, lim: Limits) -> int:
    """Blocks of ``block`` threads of kernel ``fn`` resident on one SM (from its registers and
    static shared memory plus ``dyn_smem``, against the device's limits); about 1024 threads
    per SM when the kernel's figures are unknown."""
    try:
        regs = int(fn.num_regs)
        smem = int(fn.shared_size_bytes)
    except Exception:  # noqa: BLE001 - no kernel figures (a fake device)
        return max(1, 1024 // block)
    warps = -(-block // 32)
    warp_regs = -(-max(regs, 1) * 32 // 256) * 256
    by_regs = (lim.regs_per_sm // warp_regs) // warps
    by_threads = lim.threads_per_sm // (warps * 32)
    by_smem = lim.shared_per_sm // (smem + dyn_smem + lim.reserved_shared_per_block)
    return max(1, min(by_regs, by_threads, by_smem, lim.blocks_per_sm))


def opt_in(fn, nbytes: int, lim: Limits) -> bool:
    """Let kernel ``fn`` launch with ``nbytes`` of dynamic shared memory and prefer the largest
    shared-memory carveout; False where static plus dynamic bytes exceed the device's per-block
    opt-in. The opt-in is set whatever the size: static plus dynamic shared memory above 48 KiB
    needs it even when the dynamic part alone is 48 KiB."""
    try:
        static = int(fn.shared_size_bytes) if fn is not None else 0
        if static + nbytes > lim.shared_per_block_optin:
            return False
        if fn is not None:
            fn.max_dynamic_shared_size_bytes = int(nbytes)
    except Exception:  # noqa: BLE001 - the driver refused
        return False
    try:
        fn.preferred_shared_memory_carveout = 100
    except Exception:  # noqa: BLE001 - a hint only
        pass
    return True


class Pick:
    """A vectorised launch (when planned), used when every listed pointer is aligned to its pack
    size, else the scalar launch. aligned: [(pointer index, bytes)]."""

    def __init__(self, vec, scalar, aligned: list):
        self.vec, self.scalar, self.aligned = vec, scalar, aligned

    def __call__(self, ptrs, ws, stream):
        if self.vec is not None:
            for i, a in self.aligned:
                if ptrs[i] % a:
                    break
            else:
                self.vec(ptrs, ws, stream)
                return
        self.scalar(ptrs, ws, stream)


class Seq:
    """Launches run in order as one callable (ptrs, ws, stream)."""

    def __init__(self, *launches):
        self.launches = launches

    def __call__(self, ptrs, ws, stream):
        for launch in self.launches:
            launch(ptrs, ws, stream)
