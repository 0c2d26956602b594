"""rope: rotary position embedding with sin/cos tables, GPT_J or GPT_NEOX pairing (ops.md §1.11).

x, y: [seq, nhead, dhead] or [batch, seq, nhead, dhead], dhead even, last-dim stride 1, any
other strides. pos_ids: [seq] (also accepted with 4-D x: shared by every batch) or
[batch, seq] with 4-D x, any integer dtype, any strides. sin_table, cos_table: contiguous
[table_len, dhead/2] in x's dtype. For p = pos_ids[(b,) s] and i < dhead/2, with c = cos[p, i]
and s = sin[p, i]: y0 = x0 c - x1 s, y1 = x0 s + x1 c, where (x0, x1) = (x[2i], x[2i+1])
(GPT_J, algo 0) or (x[i], x[i + dhead/2]) (GPT_NEOX, algo 1). A position outside
[0, table_len) writes zeros for its row. Computed in f32 (f64 for f64). y may alias x.
"""

from __future__ import annotations

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, contiguous, run_rows, split
from infiniop_py.dtypes import SI, UI, F
from infiniop_py.halfconv import to_f32
from infiniop_py.spec import Attr, Info, declare, inp, out
from infiniop_py.status import Status

from . import cuda

GPT_J, GPT_NEOX = 0, 1


def validate(check) -> Info:
    for n in ("y", "x", "pos_ids", "sin_table", "cos_table"):
        if check[n] is None:
            check.fail(Status.NULL_POINTER, f"tensor '{n}' is required")
    x, y, pos, st, ct = (check[n] for n in ("x", "y", "pos_ids", "sin_table", "cos_table"))
    check.dtype_in("x", F)
    check.same_dtype("x", "y", "sin_table", "cos_table")
    check.dtype_in("pos_ids", SI | UI)
    nd = check.ndim_in("x", (3, 4))
    if y.shape != x.shape:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'y' shape {list(y.shape)} does not match 'x' shape {list(x.shape)}")
    dhead = x.shape[-1]
    if dhead % 2:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' head dim {dhead} must be even")
    half = dhead // 2
    seq = x.shape[-3]
    batch = x.shape[0] if nd == 4 else None
    ok_pos = pos.shape == (seq,) or (nd == 4 and pos.shape == (batch, seq))
    if not ok_pos:
        want = f"[{seq}]" + (f" or [{batch}, {seq}]" if nd == 4 else "")
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'pos_ids' shape {list(pos.shape)} must be {want}")
    for n, t in (("sin_table", st), ("cos_table", ct)):
        if t.ndim != 2 or t.shape[1] != half:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{n}' shape {list(t.shape)} must be [table_len, {half}]")
    if st.shape != ct.shape:
        check.fail(
            Status.BAD_TENSOR_SHAPE, f"tensor 'cos_table' shape {list(ct.shape)} does not match 'sin_table' {list(st.shape)}"
        )
    for n, t in (("sin_table", st), ("cos_table", ct)):
        if not t.is_contiguous():
            check.fail(Status.BAD_TENSOR_STRIDES, f"tensor '{n}' must be contiguous, strides {list(t.strides)}")
    for n, t in (("x", x), ("y", y)):
        if dhead > 1 and t.strides[-1] != 1:
            check.fail(Status.BAD_TENSOR_STRIDES, f"tensor '{n}' last-dim stride must be 1, strides {list(t.strides)}")
    check.writable("y")
    return Info(check.op, check.tensors, check.attrs, half=half, table_len=st.shape[0])


def _rotate(x0, x1, c, s):
    return x0 * c - x1 * s, x0 * s + x1 * c


def _pairs(algo, half):
    """The index expressions of the two members of each rotated pair along the last dim:
    interleaved (GPT-J) or the two halves (GPT-NeoX); for NumPy arrays and torch tensors."""
    if algo == GPT_J:
        return (..., slice(0, None, 2)), (..., slice(1, None, 2))
    return (..., slice(None, half)), (..., slice(half, None))


def cpu(info):
    algo, half, n = info.attrs["algo"], info.half, info.table_len
    x_desc = info["x"]
    f64 = x_desc.itemsize == 8

    def compiled(k, views, p) -> bool:
        """The compiled kernel (cpu/kernels.py: rope) on f32/f16/bf16, any layout."""
        x, y = views["x"], views["y"]
        if bits(x) is None:
            return False
        x4 = x if x.ndim == 4 else x[None]
        p2 = np.array(np.broadcast_to(p if p.ndim == 2 else p[None], x4.shape[:2]), np.int64)  # writable: one kernel type
        out = Outputs()
        y4 = out.full(y if y.ndim == 4 else y[None])
        xb, yb = bits(contiguous(x4)), bits(y4)
        sin, cos = (np.ascontiguousarray(to_f32(views[t])) for t in ("sin_table", "cos_table"))
        rows = x4.shape[0] * x4.shape[1]
        run_rows(lambda _, r0, r1: k.rope(xb, p2, sin, cos, algo == GPT_NEOX, yb, r0, r1), split(rows, x4[0, 0].size))
        out.done()
        return True

    def run(views, ws, rt):
        x, y = views["x"], views["y"]
        if y.size == 0:
            return
        ct = np.float64 if f64 else np.float32
        pos = views["pos_ids"]
        # uint64 positions above the int64 range reinterpret as negative: out of range, row -> 0.
        p = pos.view(np.int64) if pos.dtype == np.uint64 else pos.astype(np.int64)
        k = jit.kernels()
        if k is not None and n and compiled(k, views, p):
            return
        valid = (p >= 0) & (p < n)
        pc = np.where(valid, p, 0)
        if n:
            cos = views["cos_table"].astype(ct)[pc]
            sin = views["sin_table"].astype(ct)[pc]
        else:
            cos = sin = np.zeros((*p.shape, half), ct)
        cos, sin = cos[..., None, :], sin[..., None, :]  # broadcast over heads
        xf = x.astype(ct)
        i0, i1 = _pairs(algo, half)
        y0, y1 = _rotate(xf[i0], xf[i1], cos, sin)
        keep = valid[..., None, None]
        y[i0], y[i1] = np.where(keep, y0, 0), np.where(keep, y1, 0)

    return run


def reference(x, pos_ids, sin_table, cos_table, algo=GPT_J):
    import torch

    half = x.shape[-1] // 2
    n = sin_table.shape[0]
    valid = (pos_ids >= 0) & (pos_ids < n)
    pc = torch.where(valid, pos_ids, torch.zeros_like(pos_ids))
    if n:
        cos, sin = cos_table[pc], sin_table[pc]
    else:
        cos = sin = torch.zeros((*pos_ids.shape, half), dtype=x.dtype)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    i0, i1 = _pairs(algo, half)
    y0, y1 = _rotate(x[i0], x[i1], cos, sin)
    keep = valid[..., None, None]
    y = torch.empty_like(x)
    y[i0], y[i1] = torch.where(keep, y0, 0.0), torch.where(keep, y1, 0.0)
    return y


SPEC = declare(
    globals(),
    name="rope",
    stem="RoPE",
    tensors=(out("y"), inp("x"), inp("pos_ids"), inp("sin_table"), inp("cos_table")),
    attrs=(Attr("algo", "int", GPT_J, choices=(GPT_J, GPT_NEOX), doc="0 = GPT_J, 1 = GPT_NEOX"),),
    dtypes=F,
    nvidia=cuda.factory,
    torch="none (rotation computed in f64)",
    summary="rotary embedding of x by sin/cos tables at pos_ids (GPT_J or GPT_NEOX pairs)",
    inplace=(("y", "x"),),
    kernel_sources=("kernel.cu",),
)
