"""NVIDIA backend of conv_transpose: cuDNN's data-gradient convolution for dense problems where
it loads, else our implicit-GEMM kernel by stride phases (no zero insertion, no scatter).

RULES is the family's GEMM table; ``desc.plan`` names the choice and the ``plan`` attribute pins
it (or ``"measure"``: a create-time measurement over ``candidates(info, handle)``).
"""

from __future__ import annotations

from infiniop_py.conv.configs import GEMM_CONFIGS, GEMM_RULES
from infiniop_py.conv.planner import Planner

RULES = GEMM_RULES


PLANNER = Planner("conv_transpose", GEMM_CONFIGS, RULES, transposed=True)
names, problem, candidates = PLANNER.names, PLANNER.problem, PLANNER.candidates
planned, create, compile_units = PLANNER.planned, PLANNER.create, PLANNER.compile_units
