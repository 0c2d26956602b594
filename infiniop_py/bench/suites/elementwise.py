"""Elementwise binary operators: add, sub, mul, div against torch eager (and torch.compile).

GPU shapes (perf.md): 4096² and 8192² each contiguous, with ``b`` a broadcast row (strides
(0, 1)) and with ``a`` transposed (strides (1, N)); 256², 2048² and a batched 32×1024×1024
contiguous and broadcast; a 1024-element case timed for host wall per call too. f32, f16, bf16.
CPU (``--cpu``): 4096² in the three layouts and the 1024-element case.

Minimal bytes: a and c in full, b once per distinct element (a broadcast row counts N).
"""

from __future__ import annotations

from ..core import BenchCase, standard_workload

NAME = "elementwise"

DTYPES = ("f32", "f16", "bf16")
OPS = ("add", "sub", "mul", "div")
CONTIGUOUS, BROADCAST, TRANSPOSED = "contiguous", "b bcast row (0,1)", "a transposed (1,N)"


def _torch_ops(torch):
    return {
        "add": (lambda out, a, b: torch.add(a, b, out=out), lambda a, b: a + b),
        "sub": (lambda out, a, b: torch.sub(a, b, out=out), lambda a, b: a - b),
        "mul": (lambda out, a, b: torch.mul(a, b, out=out), lambda a, b: a * b),
        "div": (lambda out, a, b: torch.div(a, b, out=out), lambda a, b: a / b),
    }


def binary_case(op: str, dtype: str, shape: tuple, layout: str, *, host_wall=False, quick=False) -> BenchCase:
    def build(env):
        torch = env.torch
        tdt = getattr(torch, {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype])
        eager, pure = _torch_ops(torch)[op]
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
    if env.gpu:
        for op in OPS:
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
        for op in OPS:
            for dt in DTYPES:
                for layout in (CONTIGUOUS, BROADCAST, TRANSPOSED):
                    out.append(binary_case(op, dt, (4096, 4096), layout, quick=layout == CONTIGUOUS))
                out.append(binary_case(op, dt, (1024,), CONTIGUOUS, host_wall=True, quick=op == "add"))
    return out
