"""Rules shared by the causal conv1d family (ops.md §7): attributes, validation, the NumPy
backend's arithmetic and the float64 PyTorch references (the GGUF dialect: infiniop_py/gguf).

Conventions: x is (B, D, L), weight (D, W) and H = W - 1. x̃ is x with H columns in front
(initial_states, or zeros). pre[t] = bias + sum_k weight[k]·x̃[t + k]; with seq_idx, the tap k
of position t counts only when t' = t - H + k >= 0 and seq_idx[t'] == seq_idx[t], and a
position with seq_idx < 0 gives 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infiniop_py.dtypes import IDX, DType
from infiniop_py.halfconv import copy_into, to_f32
from infiniop_py.spec import Attr, Checker, Info, OpSpec
from infiniop_py.status import Status

XDT = frozenset({DType.F16, DType.BF16, DType.F32})  # x and weight, chosen independently
MAX_W = 64  # any width up to this is correct (the generic path)
FAST_W = 8  # widths 2..FAST_W have kernels specialised on the width
MAX_T = 8  # causal_conv1d_update: new tokens per step
SILU = ("silu", "swish")


@dataclass(frozen=True)
class ActivationAttr(Attr):
    """``activation``: "none" or "silu"; "swish" and None are aliases."""

    def coerce(self, value, op: str):
        return "none" if value is None else super().coerce(value, op)


def activation_attr() -> ActivationAttr:
    return ActivationAttr("activation", "str", "none", choices=("none", "silu", "swish"), doc='"none" or "silu" (alias "swish")')


def is_silu(activation) -> bool:
    return activation in SILU


def gguf_dialect(single_ans: bool = False):
    """The family's GGUF dialect (infiniop_py.gguf.causal_conv1d), None where GGUF support is
    not installed (the registry must import without it)."""
    try:
        from infiniop_py.gguf.causal_conv1d import ConvFiles
    except ImportError:  # pragma: no cover - GGUF support not installed
        return None
    return ConvFiles(single_ans)


# -- validation --------------------------------------------------------------------------------
def need_shape(check: Checker, name: str, shape) -> None:
    d = check[name]
    if d is not None and tuple(d.shape) != tuple(shape):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(d.shape)} must be {list(shape)}")


def need_dtype(check: Checker, name: str, dtype: DType, why: str) -> None:
    d = check[name]
    if d is not None and d.dtype != dtype:
        check.fail(Status.BAD_TENSOR_DTYPE, f"tensor '{name}' dtype {d.dtype.name} must be {dtype.name} ({why})")


def check_weight(check: Checker, D: int, max_w: int) -> int:  # noqa: N803
    """weight (D, W) with 2 <= W <= max_w, bias (D,) in weight's dtype; returns W."""
    check.dtype_in("weight", XDT)
    w = check["weight"]
    if w.ndim != 2 or w.shape[0] != D:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'weight' shape {list(w.shape)} must be (D, W) = ({D}, W)")
    W = w.shape[1]  # noqa: N806
    if not 2 <= W <= max_w:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'weight' width {W} is out of range (2 <= W <= {max_w})")
    need_dtype(check, "bias", w.dtype, "bias has weight's dtype")
    need_shape(check, "bias", (D,))
    return W


def check_x(check: Checker, name: str = "x"):
    """x (B, D, L) in f32/f16/bf16; returns its shape."""
    check.dtype_in(name, XDT)
    x = check[name]
    if x.ndim != 3:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' must be (B, D, L), got shape {list(x.shape)}")
    return x.shape


def check_sequence_inputs(check: Checker, B: int, D: int, L: int, W: int) -> None:  # noqa: N803
    """initial_states (B, D, W-1) in x's dtype; seq_idx (B, L) i32/i64; not both."""
    xdt = check["x"].dtype
    need_dtype(check, "initial_states", xdt, "initial_states has x's dtype")
    need_shape(check, "initial_states", (B, D, W - 1))
    if check["seq_idx"] is not None:
        check.dtype_in("seq_idx", IDX)
        need_shape(check, "seq_idx", (B, L))
        if check["initial_states"] is not None:
            check.fail(Status.BAD_PARAM, "tensors 'seq_idx' and 'initial_states' are mutually exclusive")


def check_inputs(check: Checker):
    """x (B, D, L), weight (D, W) with 2 <= W <= MAX_W, bias, initial_states and seq_idx (the
    forward's and the backward's inputs); returns (B, D, L, W)."""
    B, D, L = check_x(check)  # noqa: N806
    W = check_weight(check, D, MAX_W)  # noqa: N806
    check_sequence_inputs(check, B, D, L, W)
    return B, D, L, W


def info_of(check: Checker, **sizes) -> Info:
    """The Info of a validated call: the ``sizes`` and ``silu`` (the activation attribute)."""
    return Info(check.op, check.tensors, check.attrs, **sizes, silu=is_silu(check.attrs["activation"]))


def causal_op(*, single_ans: bool = False, attrs=(), **fields) -> OpSpec:
    """The OpSpec of one of the family's operators: the x dtypes, the ``activation`` attribute
    (then ``attrs``), the GGUF dialect (``single_ans``: the forward's file form), the kernel
    sources (common.cuh, then the operator's kernel.cu); ``fields``: the rest of the OpSpec."""
    return OpSpec(
        dtypes=XDT,
        attrs=(activation_attr(), *attrs),
        gguf=gguf_dialect(single_ans),
        kernel_sources=("../../infiniop_py/causal/common.cuh", "kernel.cu"),
        **fields,
    )


# -- NumPy backend -------------------------------------------------------------------------------
def f32(a):
    return None if a is None else to_f32(np.asarray(a))


def time_major(a) -> bool:
    """Whether a (B, D, L) view steps through channels faster than through time (channel-last):
    its f32 temporaries are then laid out the same way, so NumPy walks both in memory order."""
    return a.shape[1] > 1 and a.shape[2] > 1 and a.strides[1] < a.strides[2]


def empty_like_rows(B, D, L, cl: bool) -> np.ndarray:  # noqa: N803
    """An uninitialised f32 (B, D, L) array, channel-last in memory when ``cl``."""
    if cl:
        return np.empty((B, L, D), np.float32).transpose(0, 2, 1)
    return np.empty((B, D, L), np.float32)


def extended(x, init, H: int) -> np.ndarray:  # noqa: N803
    """x̃ in f32: (B, D, H + L), initial_states (or zeros) in front, in x's memory order."""
    B, D, L = x.shape  # noqa: N806
    xt = empty_like_rows(B, D, H + L, time_major(x))
    xt[..., :H] = 0.0 if init is None else f32(init)
    xt[..., H:] = f32(x)
    return xt


def seq_masks(seq, W: int):  # noqa: N803
    """Per tap k, (B, L) bools: t - H + k >= 0 and seq[t - H + k] == seq[t]; None without seq_idx."""
    if seq is None:
        return None
    s = np.asarray(seq).astype(np.int64)
    L = s.shape[1]  # noqa: N806
    H = W - 1  # noqa: N806
    masks = []
    for k in range(W):
        sh = H - k
        m = np.zeros(s.shape, bool)
        if sh < L:
            np.equal(s[:, sh:], s[:, : L - sh], out=m[:, sh:])
        masks.append(m)
    return masks


def conv_pre(xt, w, bias, masks, L: int, out=None) -> np.ndarray:  # noqa: N803
    """pre (B, D, L) in f32: bias + sum_k w[:, k]·x̃[..., k:k+L], masked taps skipped; written
    into ``out`` (an f32 view) when given, else into a new array in x̃'s memory order."""
    B, D, _ = xt.shape  # noqa: N806
    pre = empty_like_rows(B, D, L, time_major(xt)) if out is None else out
    tmp = np.empty_like(pre)
    for k in range(w.shape[1]):
        dst = pre if k == 0 else tmp
        np.multiply(xt[..., k : k + L], w[None, :, k, None], out=dst)
        if masks is not None:
            np.copyto(dst, 0.0, where=~masks[k][:, None, :])
        if k == 0:
            if bias is not None:
                pre += bias[None, :, None]
        else:
            pre += tmp
    return pre


def silu_(pre: np.ndarray) -> np.ndarray:
    """pre / (1 + exp(-pre)) in place (f32)."""
    with np.errstate(over="ignore"):
        e = np.exp(-pre)
    e += 1.0
    pre /= e
    return pre


def dsilu(pre: np.ndarray) -> np.ndarray:
    """d silu / d pre = σ(pre)·(1 + pre·(1 - σ(pre))) in f32."""
    with np.errstate(over="ignore"):
        sig = 1.0 / (1.0 + np.exp(-pre))
    return sig * (1.0 + pre * (1.0 - sig))


def store(dst, value) -> None:
    if dst is not None and dst.size:
        copy_into(dst, value)


# -- float64 references ----------------------------------------------------------------------------
def ref_forward(x, weight, bias=None, initial_states=None, seq_idx=None, activation="none"):
    """(out, x̃) in float64: the depthwise conv1d of ops.md §7.1 (torch.nn.functional.conv1d)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    B, D, L = x.shape  # noqa: N806
    W = weight.shape[1]  # noqa: N806
    H = W - 1  # noqa: N806
    front = initial_states if initial_states is not None else x.new_zeros(B, D, H)
    xt = torch.cat([front, x], dim=-1)
    if L == 0:
        return x[..., :0] * 1.0, xt  # empty, still a function of x for autograd
    if seq_idx is None:
        pre = F.conv1d(xt, weight.unsqueeze(1), bias, groups=D)
    else:
        s = seq_idx.to(torch.int64)
        spad = torch.cat([s.new_zeros(B, H), s], dim=-1).unfold(-1, W, 1)  # (B, L, W): seq at t - H + k
        live = torch.cat([torch.zeros(B, H, dtype=torch.bool), torch.ones(B, L, dtype=torch.bool)], -1).unfold(-1, W, 1)
        keep = live & (spad == s.unsqueeze(-1))
        win = xt.unfold(-1, W, 1)  # (B, D, L, W)
        pre = torch.where(keep.unsqueeze(1), win * weight[None, :, None, :], win.new_zeros(())).sum(-1)
        if bias is not None:
            pre = pre + bias[None, :, None]
    out = F.silu(pre) if is_silu(activation) else pre
    if seq_idx is not None:
        out = torch.where((seq_idx < 0).unsqueeze(1), out.new_zeros(()), out)
    return out, xt
