"""NVIDIA backend of conv: the rule table, the candidate list and the kernel factory.

RULES is read top to bottom; the first condition that holds names the config (engine.py), and
where that config is cuDNN and cuDNN declines the problem, the next matching rule's config is
built instead. The chosen name is ``desc.plan``. The ``plan`` create attribute pins a config by
name (BAD_PARAM where it cannot run the problem) or, with ``plan="measure"``, lets a create-time
measurement (``infiniop_py.cuda.autotune``) pick among ``candidates(info, handle)``.
"""

from __future__ import annotations

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
    ("dense-cudnn", _applies("cudnn"), "cudnn"),
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


PLANNER = engine.Planner("conv", CONFIGS, RULES, transposed=False)
names, problem, candidates = PLANNER.names, PLANNER.problem, PLANNER.candidates
planned, create, compile_units = PLANNER.planned, PLANNER.create, PLANNER.compile_units
