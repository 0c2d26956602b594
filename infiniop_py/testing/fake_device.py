"""A fake NVIDIA device for the CPU-side planner tests: the NVIDIA backends create their kernels
(plans, launch arguments, grids) without a GPU or a compiler."""

from __future__ import annotations

import contextlib
from unittest import mock

SM90 = {"name": "sm_90", "sm_count": 132, "cc": 90, "max_shared_per_block_optin": 232448}


@contextlib.contextmanager
def fake_nvidia(**props):
    """One device with the properties of an sm_90 H100 (132 SMs) updated by ``props``; its module
    loader records the kernel name expressions it is asked for (the yielded list) instead of
    compiling, a fresh module cache, launches that do nothing."""
    from ..cuda import compiler, runtime
    from ..lru import LRU

    requested: list = []
    properties = {**SM90, **props}

    class Module:
        def __init__(self, source, names, device_id):
            requested.extend(names)
            self.kernels = {n: None for n in names}
            self.ptr = {n: i + 1 for i, n in enumerate(names)}

    cache = compiler._modules
    with contextlib.ExitStack() as st:
        st.enter_context(mock.patch.object(runtime, "device_count", lambda: 1))
        st.enter_context(mock.patch.object(runtime, "properties", lambda device_id=0: properties))
        st.enter_context(mock.patch.object(compiler, "Module", Module))
        st.enter_context(mock.patch.object(compiler, "_modules", LRU(cache.limit) if isinstance(cache, LRU) else type(cache)()))
        st.enter_context(mock.patch.object(compiler, "_launch_fn", lambda: lambda *a: None))
        st.enter_context(mock.patch.object(runtime, "occupancy", lambda *a, **k: None))  # no real kernels to ask about
        yield requested
