"""causal_conv1d: depthwise causal convolution over time, with optional bias, SiLU,
initial_states, final_states and seq_idx (ops.md §7.1).

x and out are (B, D, L) with any strides; weight (D, W) with 2 <= W <= 64 (widths up to 8 have
kernels specialised on the width, wider ones take the generic path). x and weight dtypes are
chosen independently among f32/f16/bf16; all arithmetic is f32, rounded once to x's dtype.
NVIDIA: ``cuda.py`` (channel-first and channel-last tiled kernels, a strided generic one).
"""

from __future__ import annotations

import numpy as np

from infiniop_py.causal import common
from infiniop_py.spec import Checker, Info, inp, out
from infiniop_py.status import Status

from . import cuda


def validate(check: Checker) -> Info:
    B, D, L, W = common.check_inputs(check)  # noqa: N806
    xdt = check["x"].dtype
    for name in ("out", "final_states"):
        common.need_dtype(check, name, xdt, f"{name} has x's dtype")
    common.need_shape(check, "out", (B, D, L))
    common.need_shape(check, "final_states", (B, D, W - 1))
    if check["final_states"] is not None and check["seq_idx"] is not None:
        check.fail(Status.BAD_PARAM, "tensor 'final_states' is not defined with 'seq_idx'")
    check.writable("out", "final_states")
    return common.info_of(check, B=B, D=D, L=L, W=W)


def cpu(info: Info):
    W, silu = info.W, info.silu  # noqa: N806

    def run(views, ws, rt):
        x, o = views["x"], views["out"]
        xt = common.extended(x, views["initial_states"], W - 1)
        L = x.shape[2]  # noqa: N806
        common.store(views["final_states"], xt[..., L:])
        if x.size == 0:
            return
        direct = o.dtype == np.float32  # accumulate straight into the output
        pre = common.conv_pre(
            xt,
            common.f32(views["weight"]),
            common.f32(views["bias"]),
            common.seq_masks(views["seq_idx"], W),
            L,
            o if direct else None,
        )
        if silu:
            common.silu_(pre)
        if views["seq_idx"] is not None:
            np.copyto(pre, 0.0, where=(views["seq_idx"] < 0)[:, None, :])
        if not direct:
            common.store(o, pre)

    return run


def reference(x, weight, bias=None, initial_states=None, seq_idx=None, activation="none"):
    out_, xt = common.ref_forward(x, weight, bias, initial_states, seq_idx, activation)
    return {"out": out_, "final_states": xt[..., x.shape[2] :]}


SPEC = common.causal_op(
    name="causal_conv1d",
    stem="CausalConv1d",
    tensors=(
        out("out"),
        out("final_states", optional=True),
        inp("x"),
        inp("weight"),
        inp("bias", optional=True),
        inp("initial_states", optional=True),
        inp("seq_idx", optional=True),
    ),
    validate=validate,
    cpu=cpu,
    nvidia=cuda.factory,
    reference=reference,
    infer=lambda x, **_: {"out": x},
    torch="F.conv1d(x, weight.unsqueeze(1), bias, padding=W-1, groups=D)[..., :L] (+ F.silu)",
    summary="depthwise causal conv1d (widths 2-64, optional bias/SiLU/initial and final states/seq_idx)",
    single_ans=True,
)
