"""NVIDIA backend of conv_backward: grad_input by cuDNN's data gradient (dense problems, where
it loads) or our phase-decomposed implicit GEMM (the transposed convolution of grad_output with
weight); grad_weight by cuDNN's weight gradient or our split-row kernels with a fixed-order
reduction; grad_bias always by our partial sums and that reduction. Every part is deterministic.

The plan is ``"<grad_input config>+<grad_weight config>"``; each part comes from its own rule
table (DGRAD_RULES, WGRAD_RULES; a cuDNN part that cuDNN declines passes to the next rule).
``desc.plan`` reports it and the ``plan`` attribute pins it (or ``"measure"``: a create-time
measurement over ``candidates(info, handle)``).
"""

from __future__ import annotations

import itertools
import math

from infiniop_py.conv import planner
from infiniop_py.conv.configs import GEMM_CONFIGS, GEMM_RULES, wave
from infiniop_py.conv.cudnn_plans import CudnnWGrad
from infiniop_py.conv.kernels import SOURCE, IGemm, WGrad
from infiniop_py.conv.problem import GPU_DTYPES, Conv, WeightGrad, align, device_sms, key
from infiniop_py.planner import first_match, matching
from infiniop_py.spec import Info

DGRAD = GEMM_CONFIGS
WGRAD = {c.name: c for c in (CudnnWGrad(), WGrad(16, 64), WGrad(64, 64), WGrad(128, 64))}


def _wgrad_tiles(name: str, p: WeightGrad) -> int:
    cfg = WGRAD[name]
    return p.groups * -(-p.ng // cfg.bn) * -(-(p.cg * math.prod(p.k)) // cfg.bk)


DGRAD_RULES = GEMM_RULES
WGRAD_RULES = (
    ("dense-cudnn", lambda p: WGRAD["cudnn"].applies(p), "cudnn"),
    ("narrow", lambda p: p.ng <= 16, "wgrad16x64"),
    ("large", lambda p: _wgrad_tiles("wgrad128x64", p) >= wave(p), "wgrad128x64"),
    ("default", lambda p: True, "wgrad64x64"),
)


def names() -> list[str]:
    return [f"{a}+{b}" for a, b in itertools.product(["none", *DGRAD], WGRAD)] + ["empty", planner.MEASURE]


def problems(info: Info, sm_count: int) -> tuple[Conv, WeightGrad]:
    """grad_input's stage and grad_weight's, planned for a device of ``sm_count`` SMs."""
    g = info.geo
    go, x, w = info["grad_output"], info["input"], info["weight"]
    dgrad = Conv(
        go.dtype,
        g.nd,
        go,
        w,
        info["grad_input"],
        None,
        g.groups,
        g.cout_g,
        g.cin_g,
        g.k,
        g.s,
        g.p,
        g.d,
        True,
        (0, 3, 5, None),
        sm_count=sm_count,
    )
    wgrad = WeightGrad(
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
        sm_count=sm_count,
    )
    return dgrad, wgrad


def _parts(dgrad: Conv, wgrad: WeightGrad):
    """(grad_input configs, grad_weight configs) that can run this problem, preferred first."""
    ds = [n for n, c in DGRAD.items() if c.applies(dgrad)] if dgrad.y.numel else ["none"]
    ws = [n for n, c in WGRAD.items() if c.applies(wgrad)]
    return ds, ws


def _builder(handle, dgrad, wgrad):
    """build(d_name, w_name) -> ConvKernel: grad_input's launches first (workspace from 0), then
    grad_weight's and grad_bias's (workspace after, 256-byte aligned)."""

    def build_d(d_name):
        if d_name == "none":
            return [], 0
        return DGRAD[d_name].build(dgrad, handle.device_id)

    def build_w(w_name, base):
        if not wgrad.gw.numel:
            return [], 0
        return WGRAD[w_name].build(wgrad, handle.device_id, ws_base=base)

    def build(d_name, w_name, d_part=None):
        launches, ws = d_part if d_part is not None else build_d(d_name)
        base = align(ws)
        more, ws2 = build_w(w_name, base)
        return planner.ConvKernel(handle, [*launches, *more], base + ws2 if ws2 else ws, f"{d_name}+{w_name}")

    return build, build_d


def candidates(info: Info, handle) -> list[tuple[str, object]]:
    """Every (grad_input config, grad_weight config) pair that can run this problem."""
    dgrad, wgrad = problems(info, device_sms(handle))
    build, _ = _builder(handle, dgrad, wgrad)
    ds, ws = _parts(dgrad, wgrad)
    return [(f"{d}+{w}", (lambda d=d, w=w: build(d, w))) for d, w in itertools.product(ds, ws)]


def _empty(info: Info) -> bool:
    return info["grad_weight"].numel == 0 and info["grad_input"].numel == 0


def planned(info: Info, sm_count: int) -> tuple[str, list[str]]:
    """The rule tables' plan for this problem on a device of ``sm_count`` SMs and the kernels
    it launches (no GPU needed)."""
    if _empty(info):
        return "empty", []
    dgrad, wgrad = problems(info, sm_count)
    kernels = []
    d_name = "none"
    if dgrad.y.numel:
        d_name = first_match(DGRAD_RULES, dgrad)[1]
        kernels += DGRAD[d_name].kernel_names(dgrad)
    w_name = first_match(WGRAD_RULES, wgrad)[1]
    if wgrad.gw.numel:
        kernels += WGRAD[w_name].kernel_names(wgrad)
    return f"{d_name}+{w_name}", kernels


def create(info: Info, handle):
    if _empty(info):
        return planner.ConvKernel(handle, [], 0, "empty")
    dgrad, wgrad = problems(info, device_sms(handle))
    pinned = info.attrs.get("plan")
    if pinned == planner.MEASURE:
        descs = [info[n] for n in ("grad_input", "grad_weight", "grad_bias", "grad_output", "input", "weight")]
        kernel = planner.measured_kernel(key("conv_backward", dgrad), candidates(info, handle), descs, handle.device_id)
        if kernel is not None:
            return kernel
    elif pinned is not None:
        return planner.pinned_kernel("conv_backward", pinned, candidates(info, handle))
    build, build_d = _builder(handle, dgrad, wgrad)
    d_order = matching(DGRAD_RULES, dgrad) if dgrad.y.numel else ["none"]
    d_name, d_part = planner.first_buildable("conv_backward", d_order, build_d)
    w_order = matching(WGRAD_RULES, wgrad)
    return planner.first_buildable("conv_backward", w_order, lambda w_name: build(d_name, w_name, d_part))[1]


def compile_units():
    names = []
    for dt in GPU_DTYPES:
        for cfg in (*DGRAD.values(), *WGRAD.values()):
            if isinstance(cfg, (IGemm, WGrad)) and cfg.applies_dtype(dt):
                names += [n for n in cfg.names(dt) if n not in names]
    return [(SOURCE, names)]
