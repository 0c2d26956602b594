"""Elementwise binary operators against torch eager (and torch.compile): every registered
elementwise operator on (c, a, b) declared as one torch function of a and b (``OpSpec.torch``
``torch.<fn>(a, b)``: add, sub, mul, div), timed against that function with ``out=``.

GPU shapes (perf.md): 4096² and 8192² each contiguous, with ``b`` a broadcast row (strides
(0, 1)) and with ``a`` transposed (strides (1, N)); 256², 2048² and a batched 32×1024×1024
contiguous and broadcast; a 1024-element case timed for host wall per call too. f32, f16, bf16.
CPU (``--cpu``): 4096² in the three layouts and the 1024-element case.

Minimal bytes: a and c in full, b once per distinct element (a broadcast row counts N).
"""

from __future__ import annotations

import functools
import re

from ..core import BenchCase, standard_workload
from ..workload import elementwise_ops

NAME = "elementwise"

DTYPES = ("f32", "f16", "bf16")
CONTIGUOUS, BROADCAST, TRANSPOSED = "contiguous", "b bcast row (0,1)", "a transposed (1,N)"
TORCH_FORM = re.compile(r"torch\.(\w+)\(a, b\)")


@functools.cache
def binary_ops() -> dict:
    """{operator: its torch function's name} for the operators this suite covers."""
    found = {}
    for spec in elementwise_ops(("c", "a", "b")):
        m = TORCH_FORM.fullmatch(spec.torch)
        if m:
            found[spec.name] = m.group(1)
    return found


def _torch_op(torch, op: str):
    """(eager writing ``out``, pure function for torch.compile) of ``op``'s declared torch function."""
    fn = getattr(torch, binary_ops()[op])
    return (lambda out, a, b: fn(a, b, out=out)), (lambda a, b: fn(a, b))


def binary_case(op: str, dtype: str, shape: tuple, layout: str, *, host_wall=False, quick=False) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = getattr(torch, {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype])
        eager, pure = _torch_op(torch, op)
        # NOTE: divisors stay away from zero so the check compares finite values.
        blo, bhi = (0.5, 2.0) if op == "div" else (-2.0, 2.0)

        def make_set():
            if layout == TRANSPOSED:
                a = env.random((*shape[:-2], shape[-1], shape[-2]), tdt).transpose(-1, -2)
            else:
                a = env.random(shape, tdt)
            if layout == BROADCAST:
                b = env.random(shape[-1:], tdt, blo, bhi).expand(shape)
            else:
                b = env.random(shape, tdt, blo, bhi)
            c = env.poisoned(shape, tdt)
            return [c, a, b], (a, b)

        return standard_workload(env, op, make_set, eager, pure)

    name = "x".join(str(d) for d in shape)
    return BenchCase(NAME, op, f"{name} {layout}", dtype, shape, build, host_wall=host_wall, quick=quick)


def cases(env, quick: bool = False) -> list[BenchCase]:
    out = []
    ops = list(binary_ops())
    if env.gpu:
        for op in ops:
            for dt in DTYPES:
                for n in (4096, 8192):
                    for layout in (CONTIGUOUS, BROADCAST, TRANSPOSED):
                        q = n == 8192 and (layout == CONTIGUOUS or op == "add")
                        out.append(binary_case(op, dt, (n, n), layout, quick=q))
                for shape in ((256, 256), (2048, 2048), (32, 1024, 1024)):
                    for layout in (CONTIGUOUS, BROADCAST):
                        out.append(binary_case(op, dt, shape, layout))
                out.append(binary_case(op, dt, (1024,), CONTIGUOUS, host_wall=True, quick=op == "add"))
    else:
        for op in ops:
            for dt in DTYPES:
                for layout in (CONTIGUOUS, BROADCAST, TRANSPOSED):
                    out.append(binary_case(op, dt, (4096, 4096), layout, quick=layout == CONTIGUOUS))
                out.append(binary_case(op, dt, (1024,), CONTIGUOUS, host_wall=True, quick=op == "add"))
    return out
