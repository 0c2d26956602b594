"""causal_softmax: softmax over the last dim with a bottom-right aligned causal mask (ops.md §2.4).

Row i of [.., seq, total] keeps columns j <= i + (total - seq); masked outputs are written as 0.
2-D or 3-D, any strides on every dim, in-place allowed.
"""

import numpy as np

from infiniop_py.dtypes import F
from infiniop_py.halfconv import copy_into
from infiniop_py.reduce.rowwise import RowLayout, RowwiseKernel, row_factory
from infiniop_py.reduce.softmax_ops import softmax_numpy
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status


def validate(check: Checker) -> Info:
    x = check["x"]
    check.dtype_in("x", F)
    check.same_dtype("x", "y")
    check.same_shape("x", "y")
    check.ndim_in("x", (2, 3))
    seq, total = x.shape[-2], x.shape[-1]
    if total < seq:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' shape {list(x.shape)}: total length {total} < seq length {seq}")
    check.writable("y")
    return Info(check.op, check.tensors, check.attrs, seq=seq, total=total)


def mask(seq: int, total: int) -> np.ndarray:
    i = np.arange(seq)[:, None]
    j = np.arange(total)[None, :]
    return j <= i + (total - seq)


def cpu(info: Info):
    dtype = info.tensors["x"].dtype
    valid = mask(info.seq, info.total)

    def run(views, ws, rt):
        y = views["y"]
        if y.size == 0:
            return
        copy_into(y, softmax_numpy(views["x"], -1, False, dtype, valid))

    return run


def nvidia(info: Info, handle):
    x, y = info.tensors["x"], info.tensors["y"]
    nd = x.ndim
    lay = RowLayout(
        info.total,
        x.strides[-1],
        y.strides[-1],
        x.shape[:-1],
        [list(x.strides[:-1]), list(y.strides[:-1]), [0] * (nd - 1)],
        collapse_rows=False,
        seq=max(info.seq, 1),
        shift=info.total - info.seq,
    )
    return RowwiseKernel(handle, lay, x.dtype, "causal", (0, 1, None))


row_factory(nvidia, "causal", F)


def reference(x):
    import torch

    seq, total = x.shape[-2], x.shape[-1]
    valid = torch.from_numpy(mask(seq, total))
    z = torch.softmax(x.masked_fill(~valid, float("-inf")), dim=-1)
    return z.masked_fill(~valid, 0.0)


SPEC = declare(
    globals(),
    name="causal_softmax",
    stem="CausalSoftmax",
    tensors=(out("y"), inp("x")),
    dtypes=F,
    infer=lambda x: {"y": x},
    torch="torch.softmax(x.masked_fill(~mask, -inf), -1).masked_fill(~mask, 0)",
    summary="softmax over the last dim with a bottom-right causal mask; masked outputs 0",
    inplace=(("y", "x"),),
)
