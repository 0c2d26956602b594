"""NVIDIA backend of conv_transpose: the implicit-GEMM kernel by stride phases.

RULES picks the tile (the same table as conv's GEMM rules); ``desc.plan`` names it and the
``plan`` attribute pins it (or ``"measure"``: a create-time measurement over
``candidates(info, handle)`` where ``infiniop_py.cuda.autotune`` is installed).
"""

from __future__ import annotations

from infiniop_py.dtypes import DType
from infiniop_py.spec import Info

from ..conv import engine
from ..conv.cuda import GEMM_RULES

CONFIGS = {c.name: c for c in (engine.IGemm(64, 16), engine.IGemm(64, 64), engine.IGemm(128, 64), engine.IGemm(128, 128))}
RULES = GEMM_RULES


def names() -> list[str]:
    return [*CONFIGS, "empty", engine.MEASURE]


def problem(info: Info) -> engine.Conv:
    g = info.geo
    x = info["x"]
    return engine.Conv(
        x.dtype, g.nd, x, info["w"], info["y"], info["b"], g.groups, g.cin_g, g.cout_g, g.k, g.s, g.p, g.d, True, (0, 1, 2, 3)
    )


def candidates(info: Info, handle) -> list[tuple[str, object]]:
    """Every config that can run this problem, as (name, factory() -> kernel)."""
    c = problem(info)
    return [(name, engine.factory(cfg, c, handle)) for name, cfg in CONFIGS.items() if cfg.applies(c)]


def planned(info: Info) -> tuple[str, list[str]]:
    """The rule table's plan for this problem and the kernels it launches (no GPU needed)."""
    c = problem(info)
    if info["y"].numel == 0:
        return "empty", []
    name = engine.first_match(RULES, c)[1]
    return name, CONFIGS[name].kernel_names(c)


def create(info: Info, handle):
    c = problem(info)
    ruled, _ = planned(info)
    if ruled == "empty":
        return engine.ConvKernel(handle, [], 0, "empty")
    cands = candidates(info, handle)
    name = engine.select("conv_transpose", info.attrs.get("plan"), ruled, cands, engine.key("conv_transpose", c))
    return dict(cands)[name]()


def compile_units():
    names = []
    for dt in engine.GPU_DTYPES:
        for cfg in CONFIGS.values():
            if dt is not DType.F64 or cfg.applies_dtype(dt):
                names += cfg.names(dt)
    return [(engine.SOURCE, names)]
