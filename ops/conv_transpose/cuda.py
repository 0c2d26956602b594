"""NVIDIA backend of conv_transpose: cuDNN's data-gradient convolution for dense problems where
it loads, else our implicit-GEMM kernel by stride phases (no zero insertion, no scatter).

RULES is conv's GEMM table; ``desc.plan`` names the choice and the ``plan`` attribute pins it (or
``"measure"``: a create-time measurement over ``candidates(info, handle)``).
"""

from __future__ import annotations

from ..conv import engine
from ..conv.cuda import GEMM_RULES

CONFIGS = {
    c.name: c for c in (engine.Cudnn(), engine.IGemm(64, 16), engine.IGemm(64, 64), engine.IGemm(128, 64), engine.IGemm(128, 128))
}
RULES = GEMM_RULES


PLANNER = engine.Planner("conv_transpose", CONFIGS, RULES, transposed=True)
names, problem, candidates = PLANNER.names, PLANNER.problem, PLANNER.candidates
planned, create, compile_units = PLANNER.planned, PLANNER.create, PLANNER.compile_units
