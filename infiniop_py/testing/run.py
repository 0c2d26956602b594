"""Run one case instance through the public API exactly as a user would, and check it.

Fresh random inputs, poisoned outputs and gaps, tensor descriptors dropped right after create,
a poisoned workspace, then: gaps intact, and every output against the float64 reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..descriptor import create_descriptor
from ..devices import create_handle
from ..dtypes import to_numpy
from ..registry import get_spec
from ..tensor import create_tensor_descriptor
from .cases import Case, case_seed, default_data
from .compare import Comparison, compare, compare_index, compare_mode, default_tolerance
from .data import gaps_intact, gather, layout, poisoned
from .device import backend_for
from .reference import reference


@dataclass
class Result:
    ok: bool
    messages: list
    comparisons: dict


def make_inputs(spec, case: Case, dtype, rng):
    layouts, data = {}, {}
    for role in spec.tensors:
        tc = case.tensors.get(role.name)
        if tc is None:
            continue
        layouts[role.name] = tc.resolved(dtype)
    for role in spec.tensors:
        if role.name not in layouts or role.role == "out":
            continue
        shape, strides, dt = layouts[role.name]
        # A zero-stride dim holds one value: draw the reduced shape, then broadcast.
        reduced = tuple(1 if s == 0 else d for d, s in zip(shape, strides))
        value = case.data(rng, role.name, dt, reduced) if case.data is not None else None
        if value is None:
            value = default_data(rng, dt, reduced)
        value = np.asarray(value, dtype=to_numpy(dt)).reshape(reduced)
        data[role.name] = np.broadcast_to(value, shape)
    return layouts, data


def run_case(name: str, case: Case, dtype, device: str = "cpu", seed: int = 0, handle=None) -> Result:
    spec = get_spec(name)
    rng = np.random.Generator(np.random.PCG64(case_seed(seed, spec.name, hash_case(case))))
    layouts, data = make_inputs(spec, case, dtype, rng)
    backend = backend_for(device)
    out_dtypes = {r.name: layouts[r.name][2] for r in spec.outputs if r.name in layouts}
    expected = reference(
        spec,
        {n: data.get(n) for n in (r.name for r in spec.tensors if r.role != "out") if n in layouts or spec.role[n].optional},
        case.attrs,
        case.runtime,
        out_dtypes,
        {r.name: layouts[r.name][0] for r in spec.outputs if r.name in layouts},
    )
    bufs = {}
    for role in spec.tensors:
        if role.name not in layouts:
            continue
        shape, strides, dt = layouts[role.name]
        if role.name in case.inplace:
            continue
        if role.role == "out":
            flat = poisoned(_span(shape, strides), dt)
        else:
            flat = layout(data[role.name], shape, strides, dt)
        bufs[role.name] = backend.upload(flat)
    for o, i in case.inplace.items():
        bufs[o] = bufs[i]
    handle = handle or create_handle(device)
    descs = {n: create_tensor_descriptor(*layouts[n][:2], layouts[n][2]) for n in layouts}
    for role in spec.tensors:
        descs.setdefault(role.name, None)
    d = create_descriptor(spec.name, handle, **descs, **case.attrs)
    del descs  # the operator must hold its own copies
    ws = backend.empty_bytes(d.workspace_size) if d.workspace_size else None
    args = [bufs.get(r.name) for r in spec.tensors]
    try:
        d.calculate(ws, *args, **case.runtime)
        backend.synchronize()
    finally:
        d.destroy()
    messages, comps = [], {}
    for role in spec.outputs:
        if role.name not in layouts or role.name not in expected:
            continue
        shape, strides, dt = layouts[role.name]
        flat = backend.download(bufs[role.name], to_numpy(dt))
        if role.name not in case.inplace:
            bad = gaps_intact(flat, shape, strides, dt)
            if bad:
                messages.append(f"{role.name}: wrote {bad} elements outside the output view")
        actual = gather(flat, shape, strides)
        mode = compare_mode(role.compare, dt)
        atol, rtol = default_tolerance(dt)
        atol = case.atol if case.atol is not None else atol
        rtol = case.rtol if case.rtol is not None else rtol
        exp = expected[role.name]
        if mode == "bitwise":
            exp = np.asarray(exp).astype(actual.dtype) if np.asarray(exp).dtype != actual.dtype else exp
        if mode == "index":  # index-with-ties (random_sample): against the first input's values
            first = next((r.name for r in spec.inputs if r.name in data), None)
            c: Comparison = compare_index(actual, exp, data[first] if first else np.empty(0), role.name)
        else:
            c = compare(actual, exp, mode, atol, rtol, role.name)
        comps[role.name] = c
        if not c.ok:
            messages.append(c.message)
    return Result(not messages, messages, comps)


def _span(shape, strides) -> int:
    from .data import span

    return span(shape, strides)


def hash_case(case: Case) -> int:
    import zlib

    return zlib.crc32(repr((case.description, sorted((k, repr(v)) for k, v in case.tensors.items()))).encode())
