"""NVIDIA backend of conv: the rule table, the candidate list and the kernel factory.

RULES is read top to bottom; the first condition that holds names the config (engine.py), and
where that config is cuDNN and cuDNN declines the problem, the next matching rule's config is
built instead. The chosen name is ``desc.plan``. The ``plan`` create attribute pins a config by
name (BAD_PARAM where it cannot run the problem) or, with ``plan="measure"``, lets a create-time
measurement (``infiniop_py.cuda.autotune``) pick among ``candidates(info, handle)``.
"""

from __future__ import annotations

from infiniop_py.spec import Info

from . import engine

WAVE = 264  # blocks that fill an H100 (132 SMs) about twice
TINY_MACS = 1 << 26  # below this a single direct launch beats tiling (launch overhead dominates)

CONFIGS = {
    c.name: c
    for c in (
        engine.DwReg(),
        engine.Depthwise(),
        engine.Direct(),
        engine.Cudnn(),
        engine.IGemm(64, 16),
        engine.IGemm(64, 64),
        engine.IGemm(128, 64),
        engine.IGemm(128, 128),
    )
}
OURS = [name for name in CONFIGS if name != "cudnn"]


def _blocks(name: str, c: engine.Conv) -> int:
    mtiles, phases, ntiles = CONFIGS[name].grid(c)
    return mtiles * phases * ntiles * c.groups


def _applies(name: str):
    return lambda c: CONFIGS[name].applies(c)


def _tiny(c: engine.Conv) -> bool:
    return c.macs <= TINY_MACS and c.cg * c.kvol <= 1024 and CONFIGS["direct"].applies(c)


def _few_channels(c: engine.Conv) -> bool:
    return c.cg <= 4 and c.cg * c.kvol <= 256 and CONFIGS["direct"].applies(c)


# Shared with conv_transpose and conv_backward's grad_input.
GEMM_RULES = (
    ("dense-cudnn", lambda c: engine.cudnn_preferred(c.dtype, c.tf32) and CONFIGS["cudnn"].applies(c), "cudnn"),
    ("narrow", lambda c: c.ng <= 16, "igemm64x16"),
    ("large", lambda c: CONFIGS["igemm128x128"].applies(c) and _blocks("igemm128x128", c) >= WAVE, "igemm128x128"),
    ("medium", lambda c: _blocks("igemm128x64", c) >= WAVE, "igemm128x64"),
    ("default", lambda c: True, "igemm64x64"),
)

RULES = (
    ("depthwise-unit", _applies("dwreg"), "dwreg"),
    ("depthwise", _applies("dw2d"), "dw2d"),
    ("tiny", _tiny, "direct"),
    ("few-channels", _few_channels, "direct"),
    *GEMM_RULES,
)


def names() -> list[str]:
    """Every plan name this backend can report or be pinned to."""
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
        False,
        (0, 1, 2, 3),
        bool(info.attrs.get("allow_tf32")),
    )


def candidates(info: Info, handle) -> list[tuple[str, object]]:
    """Every config that can run this problem, as (name, factory() -> kernel)."""
    c = problem(info)
    return [(name, engine.factory(cfg, c, handle)) for name, cfg in CONFIGS.items() if cfg.applies(c)]


def planned(info: Info) -> tuple[str, list[str]]:
    """The rule table's plan for this problem and the kernels it launches (cuDNN counts as
    available only where it loads; no GPU needed otherwise)."""
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
        kernel = engine.measured_kernel(engine.key("conv", c), cands, descs, handle.device_id)
        if kernel is not None:
            return kernel
    elif pinned is not None:
        return engine.pinned_kernel("conv", pinned, cands)
    table = dict(cands)
    return engine.first_buildable("conv", engine.matching(RULES, c), lambda name: table[name]())[1]


def compile_units():
    names = []
    for dt in engine.GPU_DTYPES:
        for cfg in CONFIGS.values():
            if isinstance(cfg, engine.IGemm) and not cfg.applies_dtype(dt):
                continue
            if not isinstance(cfg, engine.Cudnn):
                names += cfg.names(dt)
    return [(engine.SOURCE, names)]
