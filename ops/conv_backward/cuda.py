"""NVIDIA backend of conv_backward: grad_input by the phase-decomposed implicit GEMM (the
transposed convolution of grad_output with weight), then grad_weight (and grad_bias) by the
split-row weight-gradient kernels with a fixed-order reduction.

The plan is ``"<grad_input config>+<grad_weight config>"``; each part comes from its own rule
table (DGRAD_RULES, WGRAD_RULES). ``desc.plan`` reports it and the ``plan`` attribute pins it
(or ``"measure"``: a create-time measurement over ``candidates(info, handle)`` where
``infiniop_py.cuda.autotune`` is installed).
"""

from __future__ import annotations

import itertools
import math

from infiniop_py.cuda import runtime
from infiniop_py.spec import Info

from ..conv import engine
from ..conv.cuda import GEMM_RULES, WAVE

DGRAD = {c.name: c for c in (engine.IGemm(64, 16), engine.IGemm(64, 64), engine.IGemm(128, 64), engine.IGemm(128, 128))}
WGRAD = {c.name: c for c in (engine.WGrad(16, 64), engine.WGrad(64, 64), engine.WGrad(128, 64))}


def _wgrad_tiles(name: str, p: engine.WeightGrad) -> int:
    cfg = WGRAD[name]
    return p.groups * -(-p.ng // cfg.bn) * -(-(p.cg * math.prod(p.k)) // cfg.bk)


DGRAD_RULES = GEMM_RULES
WGRAD_RULES = (
    ("narrow", lambda p: p.ng <= 16, "wgrad16x64"),
    ("large", lambda p: _wgrad_tiles("wgrad128x64", p) >= WAVE, "wgrad128x64"),
    ("default", lambda p: True, "wgrad64x64"),
)


def names() -> list[str]:
    return [f"{a}+{b}" for a, b in itertools.product(DGRAD, WGRAD)] + [f"none+{b}" for b in WGRAD] + ["empty", engine.MEASURE]


def problems(info: Info) -> tuple[engine.Conv, engine.WeightGrad]:
    g = info.geo
    go, x, w = info["grad_output"], info["input"], info["weight"]
    dgrad = engine.Conv(
        go.dtype, g.nd, go, w, info["grad_input"], None, g.groups, g.cout_g, g.cin_g, g.k, g.s, g.p, g.d, True, (0, 3, 5, None)
    )
    wgrad = engine.WeightGrad(
        go.dtype,
        g.nd,
        go,
        x,
        info["grad_weight"],
        info["grad_bias"],
        g.groups,
        g.cin_g,
        g.cout_g,
        g.k,
        g.s,
        g.p,
        g.d,
        (1, 2, 3, 4),
    )
    return dgrad, wgrad


def _kernel(handle, dgrad_cfg, dgrad, wgrad_cfg, wgrad, name):
    def make():
        launches, ws = [], 0
        if dgrad_cfg is not None:
            launches, ws = dgrad_cfg.build(dgrad, handle.device_id)
        more, ws2 = [], 0
        if wgrad.gw.numel:
            more, ws2 = wgrad_cfg.build(wgrad, handle.device_id, runtime.properties(handle.device_id)["sm_count"])
        return engine.ConvKernel(handle, [*launches, *more], ws + ws2, name)

    return make


def candidates(info: Info, handle) -> list[tuple[str, object]]:
    """Every (grad_input config, grad_weight config) pair that can run this problem."""
    dgrad, wgrad = problems(info)
    ds = [(n, c) for n, c in DGRAD.items() if c.applies(dgrad)] if dgrad.y.numel else [("none", None)]
    out = []
    for (dn, dc), (wn, wc) in itertools.product(ds, [(n, c) for n, c in WGRAD.items() if c.applies(wgrad)]):
        out.append((f"{dn}+{wn}", _kernel(handle, dc, dgrad, wc, wgrad, f"{dn}+{wn}")))
    return out


def planned(info: Info) -> tuple[str, list[str]]:
    """The rule tables' plan for this problem and the kernels it launches (no GPU needed)."""
    dgrad, wgrad = problems(info)
    if wgrad.gw.numel == 0 and dgrad.y.numel == 0:
        return "empty", []
    kernels = []
    d_name = "none"
    if dgrad.y.numel:
        d_name = engine.first_match(DGRAD_RULES, dgrad)[1]
        kernels += DGRAD[d_name].kernel_names(dgrad)
    w_name = engine.first_match(WGRAD_RULES, wgrad)[1]
    if wgrad.gw.numel:
        kernels += WGRAD[w_name].kernel_names(wgrad)
    return f"{d_name}+{w_name}", kernels


def create(info: Info, handle):
    dgrad, _ = problems(info)
    ruled, _ = planned(info)
    if ruled == "empty":
        return engine.ConvKernel(handle, [], 0, "empty")
    cands = candidates(info, handle)
    name = engine.select("conv_backward", info.attrs.get("plan"), ruled, cands, engine.key("conv_backward", dgrad))
    return dict(cands)[name]()


def compile_units():
    names = []
    for dt in engine.GPU_DTYPES:
        for cfg in (*DGRAD.values(), *WGRAD.values()):
            if cfg.applies_dtype(dt):
                names += [n for n in cfg.names(dt) if n not in names]
    return [(engine.SOURCE, names)]
