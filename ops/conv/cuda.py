"""NVIDIA backend of conv: its rule table over the family's configs (infiniop_py/conv).

RULES is read top to bottom; the first condition that holds names the config, and where that
config is cuDNN and cuDNN declines the problem, the next matching rule's config is built
instead. The chosen name is ``desc.plan``. The ``plan`` create attribute pins a config by name
(BAD_PARAM where it cannot run the problem) or, with ``plan="measure"``, lets a create-time
measurement (``infiniop_py.cuda.autotune``) pick among ``candidates(info, handle)``.
"""

from __future__ import annotations

from infiniop_py.conv.configs import CONFIGS, GEMM_RULES, applies
from infiniop_py.conv.planner import Planner
from infiniop_py.conv.problem import Conv

TINY_MACS = 1 << 26  # below this a single direct launch beats tiling (launch overhead dominates)


def _tiny(c: Conv) -> bool:
    return c.macs <= TINY_MACS and c.cg * c.kvol <= 1024 and CONFIGS["direct"].applies(c)


def _few_channels(c: Conv) -> bool:
    return c.cg <= 4 and c.cg * c.kvol <= 256 and CONFIGS["direct"].applies(c)


RULES = (
    ("depthwise-vector", applies("dwvec"), "dwvec"),
    ("depthwise-unit", applies("dwreg"), "dwreg"),
    ("depthwise", applies("dw2d"), "dw2d"),
    ("tiny", _tiny, "direct"),
    ("few-channels", _few_channels, "direct"),
    *GEMM_RULES,
)


PLANNER = Planner("conv", CONFIGS, RULES, transposed=False)
names, problem, candidates = PLANNER.names, PLANNER.problem, PLANNER.candidates
planned, create, compile_units = PLANNER.planned, PLANNER.create, PLANNER.compile_units
