"""The named configs of the conv family's one-stage plans and the GEMM rule table that conv,
conv_transpose and conv_backward's grad_input share.

A rule table is read top to bottom (``infiniop_py.planner.first_match``); the first condition
that holds names the config. Each operator's ``cuda.py`` states its own table; ``GEMM_RULES``
ends the forward table and is the whole table of the transposed stages.
"""

from __future__ import annotations

from .cudnn_plans import Cudnn
from .kernels import Depthwise, Direct, DwReg, DwVec, IGemm
from .problem import Conv, WeightGrad

GEMM_CONFIGS = {c.name: c for c in (Cudnn(), IGemm(64, 16), IGemm(64, 64), IGemm(128, 64), IGemm(128, 128))}
CONFIGS = {c.name: c for c in (DwVec(), DwReg(), Depthwise(), Direct())} | GEMM_CONFIGS  # every one-stage config, in order


def blocks(name: str, c: Conv) -> int:
    """Thread blocks of config ``name``'s grid for problem ``c``."""
    mtiles, phases, ntiles = CONFIGS[name].grid(c)
    return mtiles * phases * ntiles * c.groups


def wave(p: Conv | WeightGrad) -> int:
    """Thread blocks that fill the problem's device about twice: two per SM."""
    return 2 * p.sm_count


def applies(name: str):
    """The condition "config ``name`` can run the problem"."""
    return lambda c: CONFIGS[name].applies(c)


GEMM_RULES = (
    ("dense-cudnn", applies("cudnn"), "cudnn"),
    ("narrow", lambda c: c.ng <= 16, "igemm64x16"),
    ("large", lambda c: CONFIGS["igemm128x128"].applies(c) and blocks("igemm128x128", c) >= wave(c), "igemm128x128"),
    ("medium", lambda c: blocks("igemm128x64", c) >= wave(c), "igemm128x64"),
    ("default", lambda c: True, "igemm64x64"),
)
