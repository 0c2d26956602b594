"""causal_conv1d_backward: dx, dweight, dbias? and dinitial_states? of causal_conv1d (ops.md §7.2).

pre is recomputed from x (for SiLU), g = dout·silu'(pre) (or dout), 0 at padding tokens; dx̃ is
the correlation of g with the flipped weight, dweight[d, k] = sum over (b, t) of g·x̃[t + k] and
dbias = sum g. dweight/dbias are summed in a fixed order from per-block f32 partials (NVIDIA:
in the workspace), so results are bitwise reproducible; ``deterministic=false`` is accepted and
takes the same path. The CPU accumulates those sums in f64.
"""

from __future__ import annotations

import numpy as np

from infiniop_py.causal import common
from infiniop_py.spec import Attr, Checker, Info, inp, out
from infiniop_py.status import Status

from . import cuda


def validate(check: Checker) -> Info:
    B, D, L, W = common.check_inputs(check)  # noqa: N806
    xdt, wdt = check["x"].dtype, check["weight"].dtype
    for name in ("dx", "dout", "dinitial_states"):
        common.need_dtype(check, name, xdt, f"{name} has x's dtype")
    for name in ("dweight", "dbias"):
        common.need_dtype(check, name, wdt, f"{name} has weight's dtype")
    common.need_shape(check, "dx", (B, D, L))
    common.need_shape(check, "dout", (B, D, L))
    common.need_shape(check, "dweight", (D, W))
    common.need_shape(check, "dbias", (D,))
    common.need_shape(check, "dinitial_states", (B, D, W - 1))
    if (check["dbias"] is None) != (check["bias"] is None):
        check.fail(Status.BAD_PARAM, "tensor 'dbias' must be given exactly when 'bias' is")
    if check["dinitial_states"] is not None and check["initial_states"] is None:
        check.fail(Status.BAD_PARAM, "tensor 'dinitial_states' needs 'initial_states'")
    check.writable("dx", "dweight", "dbias", "dinitial_states")
    return common.info_of(check, B=B, D=D, L=L, W=W)


def cpu(info: Info):
    W, silu = info.W, info.silu  # noqa: N806
    H = W - 1  # noqa: N806

    def run(views, ws, rt):
        x, seq = views["x"], views["seq_idx"]
        B, D, L = x.shape  # noqa: N806
        xt = common.extended(x, views["initial_states"], H)
        w = common.f32(views["weight"])
        masks = common.seq_masks(seq, W)
        g = common.empty_like_rows(B, D, L, common.time_major(x))
        np.copyto(g, common.f32(views["dout"]))
        if silu and g.size:
            g *= common.dsilu(common.conv_pre(xt, w, common.f32(views["bias"]), masks, L))
        if seq is not None:
            np.copyto(g, 0.0, where=(seq < 0)[:, None, :])
        dxt = np.zeros_like(xt)
        dw = np.zeros(w.shape, np.float64)
        tmp, gk = np.empty_like(g), g
        if masks is not None:
            gk = np.empty_like(g)
        for k in range(W):
            if masks is not None:
                np.copyto(gk, g)
                np.copyto(gk, 0.0, where=~masks[k][:, None, :])
            np.multiply(gk, w[None, :, k, None], out=tmp)
            dxt[..., k : k + L] += tmp
            np.multiply(gk, xt[..., k : k + L], out=tmp)
            dw[:, k] = tmp.sum(axis=(0, 2), dtype=np.float64)
        common.store(views["dx"], dxt[..., H:])
        common.store(views["dinitial_states"], dxt[..., :H])
        common.store(views["dweight"], dw)
        common.store(views["dbias"], g.sum(axis=(0, 2), dtype=np.float64))

    return run


def reference(x, weight, dout, bias=None, initial_states=None, seq_idx=None, activation="none", deterministic=True):
    """Autograd of the float64 forward (ops.md §7.1)."""
    import torch

    with torch.enable_grad():
        leaves = {
            n: t.detach().clone().requires_grad_(True)
            for n, t in (("x", x), ("weight", weight), ("bias", bias), ("initial_states", initial_states))
            if t is not None
        }
        y, _ = common.ref_forward(
            leaves["x"], leaves["weight"], leaves.get("bias"), leaves.get("initial_states"), seq_idx, activation
        )
        grads = torch.autograd.grad(y, list(leaves.values()), dout, allow_unused=True)
    got = {n: torch.zeros_like(leaves[n]) if gr is None else gr for n, gr in zip(leaves, grads)}
    res = {"dx": got["x"], "dweight": got["weight"]}
    if "bias" in got:
        res["dbias"] = got["bias"]
    if "initial_states" in got:
        res["dinitial_states"] = got["initial_states"]
    return res


SPEC = common.causal_op(
    name="causal_conv1d_backward",
    stem="CausalConv1dBackward",
    tensors=(
        out("dx"),
        out("dweight"),
        out("dbias", optional=True),
        out("dinitial_states", optional=True),
        inp("x"),
        inp("weight"),
        inp("bias", optional=True),
        inp("dout"),
        inp("initial_states", optional=True),
        inp("seq_idx", optional=True),
    ),
    attrs=(Attr("deterministic", "bool", True, doc="bitwise reproducible dweight/dbias"),),
    validate=validate,
    cpu=cpu,
    nvidia=cuda.factory,
    reference=reference,
    infer=lambda x, weight, bias=None, **_: {"dx": x, "dweight": weight, **({"dbias": bias} if bias is not None else {})},
    torch="torch.autograd.grad(causal_conv1d(x, weight, bias, ...), (x, weight, bias, initial_states), dout)",
    summary="gradients of causal_conv1d: dx, dweight, dbias, dinitial_states (deterministic sums)",
)
