"""rearrange (strided copy) against torch's ``dst.copy_(src)`` on the same layouts.

GPU: 8192² transpose (``dst.copy_(src.t())``), 8192² contiguous copy, and two 3-d permutes:
(S, H, D) = (4096, 32, 128) -> (H, S, D) (innermost dim stays contiguous) and a batched
transpose 32×1024×1024 (innermost dim strided); f32, f16, bf16; plus a 1024-element copy for
host wall. CPU: the same at 4096² / smaller 3-d shapes. The check is bitwise.

Minimal bytes: the source read once and the destination written once.
"""

from __future__ import annotations

from ..core import BenchCase, standard_workload

NAME = "rearrange"

DTYPES = ("f32", "f16", "bf16")


def copy_case(dtype: str, base_shape: tuple, perm: tuple | None, label: str, *, host_wall=False, quick=False) -> BenchCase:
    """dst (contiguous) = src, where src is a contiguous ``base_shape`` tensor viewed through ``perm``."""
    shape = tuple(base_shape[p] for p in perm) if perm else tuple(base_shape)

    def build(env):
        torch = env.torch
        tdt = getattr(torch, {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype])

        def make_set():
            src = env.random(base_shape, tdt)
            if perm:
                src = src.permute(*perm)
            dst = env.poisoned(shape, tdt)
            return [dst, src], (src,)

        return standard_workload(
            env,
            "rearrange",
            make_set,
            lambda out, src: out.copy_(src),
            lambda src: src.clone(memory_format=torch.contiguous_format),
            exact=True,
        )

    return BenchCase(NAME, "rearrange", label, dtype, shape, build, host_wall=host_wall, quick=quick)


def cases(env, quick: bool = False) -> list[BenchCase]:
    n = 8192 if env.gpu else 4096
    shd = (4096, 32, 128) if env.gpu else (2048, 32, 64)
    bmn = (32, 1024, 1024) if env.gpu else (8, 1024, 1024)
    out = []
    for dt in DTYPES:
        out.append(copy_case(dt, (n, n), (1, 0), f"{n}x{n} transpose", quick=True))
        out.append(copy_case(dt, (n, n), None, f"{n}x{n} contiguous copy", quick=dt == "f32"))
        out.append(copy_case(dt, shd, (1, 0, 2), "{}x{}x{} (S,H,D)->(H,S,D)".format(*shd)))
        out.append(copy_case(dt, bmn, (0, 2, 1), "{}x{}x{} batched transpose".format(*bmn)))
        out.append(copy_case(dt, (1024,), None, "1024 copy", host_wall=True, quick=dt == "f32"))
    return out
