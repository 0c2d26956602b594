"""NVIDIA backend of conv_transpose: cuDNN's data-gradient convolution for dense problems where
it loads, else our implicit-GEMM kernel by stride phases (no zero insertion, no scatter).

RULES is conv's GEMM table; ``desc.plan`` names the choice and the ``plan`` attribute pins it (or
``"measure"``: a create-time measurement over ``candidates(info, handle)``).
"""

from __future__ import annotations

from infiniop_py.spec import Info

from ..conv import engine
from ..conv.cuda import GEMM_RULES

CONFIGS = {
    c.name: c for c in (engine.Cudnn(), engine.IGemm(64, 16), engine.IGemm(64, 64), engine.IGemm(128, 64), engine.IGemm(128, 128))
}
RULES = GEMM_RULES


def names() -> list[str]:
    return [*CONFIGS, "empty", engine.MEASURE]


def problem(info: Info) -> engine.Conv:
    g = info.geo
    x = info["x"]
    return engine.Conv(
        x.dtype,
        g.nd,
        x,
        info["w"],
        info["y"],
        info["b"],
        g.groups,
        g.cin_g,
        g.cout_g,
        g.k,
        g.s,
        g.p,
        g.d,
        True,
        (0, 1, 2, 3),
        bool(info.attrs.get("allow_tf32")),
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
    if info["y"].numel == 0:
        return engine.ConvKernel(handle, [], 0, "empty")
    pinned = info.attrs.get("plan")
    cands = candidates(info, handle)
    if pinned == engine.MEASURE:
        descs = [info[n] for n in ("y", "x", "w", "b")]
        kernel = engine.measured_kernel(engine.key("conv_transpose", c), cands, descs, handle.device_id)
        if kernel is not None:
            return kernel
    elif pinned is not None:
        return engine.pinned_kernel("conv_transpose", pinned, cands)
    table = dict(cands)
    return engine.first_buildable("conv_transpose", engine.matching(RULES, c), lambda name: table[name]())[1]


def compile_units():
    names = []
    for dt in engine.GPU_DTYPES:
        for cfg in CONFIGS.values():
            if isinstance(cfg, engine.IGemm) and cfg.applies_dtype(dt):
                names += cfg.names(dt)
    return [(engine.SOURCE, names)]
