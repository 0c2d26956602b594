"""causal_conv1d_update: one decode step of 1-8 new tokens against a conv state (ops.md §7.3).

x and out are (B, D) or (B, D, T); conv_state (S, D, W-1) is read and written in place (an
in/out tensor: it is passed once, among the outputs). For each token in order: window =
[state, x_t], out_t = act(bias + sum_k weight[:, k]·window[k]), then the state shifts left and
takes x_t. conv_state_indices (B,) (i32, i64 accepted) picks row b's state; an index < 0 marks
a padding slot (out 0, no state touched). Indices are data, never validated; two more cases
are padding slots as well, so that no index reaches outside conv_state and every result is the
same run to run: an index >= S, and a slot that more than one row names (each of those rows).
"""

from __future__ import annotations

import numpy as np

from infiniop_py.causal import common
from infiniop_py.dtypes import IDX
from infiniop_py.spec import Checker, Info, inout, inp, out
from infiniop_py.status import Status

from . import cuda


def padding_free(idx: np.ndarray, S: int) -> np.ndarray:  # noqa: N803
    """Rows that update a state: index in [0, S) and named by no other row."""
    live = (idx >= 0) & (idx < S)
    vals, counts = np.unique(idx[live], return_counts=True)
    return live & ~np.isin(idx, vals[counts > 1])


def validate(check: Checker) -> Info:
    check.dtype_in("x", common.XDT)
    x = check["x"]
    if x.ndim not in (2, 3):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' must be (B, D) or (B, D, T), got shape {list(x.shape)}")
    B, D = x.shape[:2]  # noqa: N806
    T = x.shape[2] if x.ndim == 3 else 1  # noqa: N806
    if not 1 <= T <= common.MAX_T:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' has {T} new tokens (1 <= T <= {common.MAX_T})")
    W = common.check_weight(check, D, common.FAST_W)  # noqa: N806
    for name in ("out", "conv_state"):
        common.need_dtype(check, name, x.dtype, f"{name} has x's dtype")
    common.need_shape(check, "out", x.shape)
    cs = check["conv_state"]
    if cs.ndim != 3 or cs.shape[1:] != (D, W - 1):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'conv_state' shape {list(cs.shape)} must be (S, {D}, {W - 1})")
    S = cs.shape[0]  # noqa: N806
    if check["conv_state_indices"] is None:
        if S != B:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'conv_state' has {S} states but x has batch {B} (no conv_state_indices)")
    else:
        check.dtype_in("conv_state_indices", IDX)
        common.need_shape(check, "conv_state_indices", (B,))
    check.writable("out", "conv_state")
    return common.info_of(check, B=B, D=D, T=T, W=W, S=S)


def cpu(info: Info):
    B, D, T, W, S, silu = info.B, info.D, info.T, info.W, info.S, info.silu  # noqa: N806
    H = W - 1  # noqa: N806

    def run(views, ws, rt):
        x, o, cs, ind = views["x"], views["out"], views["conv_state"], views["conv_state_indices"]
        if x.ndim == 2:
            x, o = x[:, :, None], o[:, :, None]
        if o.size == 0:
            return
        idx = np.arange(B, dtype=np.int64) if ind is None else np.asarray(ind).astype(np.int64)
        live = padding_free(idx, S)
        rows = idx[live]
        win = np.zeros((B, D, H + T), np.float32)
        win[live, :, :H] = common.f32(cs[rows])
        win[..., H:] = common.f32(x)
        w, bias = common.f32(views["weight"]), common.f32(views["bias"])
        res = np.empty((B, D, T), np.float32)
        for t in range(T):
            acc = np.zeros((B, D), np.float32) if bias is None else np.repeat(bias[None, :], B, 0)
            for k in range(W):
                acc += w[None, :, k] * win[:, :, t + k]
            res[..., t] = acc
        if silu:
            common.silu_(res)
        res[~live] = 0.0
        common.store(o, res)
        if rows.size:
            new = np.empty((rows.size, D, H), cs.dtype)
            common.store(new, win[live, :, T:])
            cs[rows] = new

    return run


def reference(x, conv_state, weight, bias=None, conv_state_indices=None, activation="none"):
    """An explicit loop over the new tokens, in float64."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    x3 = x if x.ndim == 3 else x.unsqueeze(-1)
    B, D, T = x3.shape  # noqa: N806
    S = conv_state.shape[0]  # noqa: N806
    state = conv_state.clone()
    out_ = x3.new_zeros(B, D, T)
    idx = np.arange(B) if conv_state_indices is None else conv_state_indices.detach().cpu().numpy().astype(np.int64)
    live = padding_free(idx, S)
    for b in range(B):
        s = int(idx[b])
        if not live[b]:
            continue  # padding slot: out 0, no state touched
        win = state[s].clone()
        for t in range(T):
            full = torch.cat([win, x3[b, :, t : t + 1]], dim=-1)
            y = (full * weight).sum(-1) + (bias if bias is not None else 0.0)
            out_[b, :, t] = F.silu(y) if common.is_silu(activation) else y
            win = full[:, 1:]
        state[s] = win
    return {"out": out_.reshape(x.shape), "conv_state": state}


SPEC = common.causal_op(
    name="causal_conv1d_update",
    stem="CausalConv1dUpdate",
    tensors=(
        out("out"),
        inout("conv_state"),
        inp("x"),
        inp("weight"),
        inp("bias", optional=True),
        inp("conv_state_indices", optional=True),
    ),
    validate=validate,
    cpu=cpu,
    nvidia=cuda.factory,
    reference=reference,
    torch="causal_conv1d_update(x, conv_state, weight, bias, activation, conv_state_indices=...) (Dao-AILab)",
    summary="one decode step (1-8 tokens) of causal_conv1d against conv_state, updated in place",
)
