"""cross_entropy: per-row loss logsumexp(x_row) - x_row[label], class dim last (ops.md §2.5).

Labels outside [0, V) give 0 (like torch's ignore_index -100) and are never used as an index.
"""

from infiniop_py.dtypes import IDX, DType, F, to_numpy
from infiniop_py.reduce.rowwise import RowLayout, RowwiseKernel, row_factory
from infiniop_py.reduce.softmax_ops import row_losses
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status

TI = {DType.I32: "int", DType.I64: "long long"}


def validate(check: Checker) -> Info:
    x, t = check["x"], check["target"]
    check.dtype_in("x", F)
    check.dtype_in("target", IDX)
    check.same_dtype("x", "y")
    if x.ndim < 1:
        check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'x' must have ndim >= 1 (class dim last)")
    if t.shape != x.shape[:-1]:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'target' shape {list(t.shape)} must be x.shape[:-1] = {list(x.shape[:-1])}")
    check.same_shape("target", "y")
    check.writable("y")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    dtype = info.tensors["x"].dtype

    def run(views, ws, rt):
        y = views["y"]
        if y.size == 0:
            return
        loss, _ = row_losses(views["x"], views["target"], dtype)
        y[...] = loss.astype(to_numpy(dtype))

    return run


def nvidia(info: Info, handle):
    x, t, y = info.tensors["x"], info.tensors["target"], info.tensors["y"]
    lay = RowLayout(x.shape[-1], x.strides[-1], 0, x.shape[:-1], [list(x.strides[:-1]), list(y.strides), list(t.strides)])
    return RowwiseKernel(handle, lay, x.dtype, "ce", (0, 1, 2), ti=TI[t.dtype])


row_factory(nvidia, "ce", F, TI.values())


def reference(x, target):
    import torch

    V = x.shape[-1]
    t = target.reshape(-1)
    ok = (t >= 0) & (t < V)
    loss = torch.nn.functional.cross_entropy(x.reshape(-1, V), torch.where(ok, t, -100), reduction="none")
    return loss.reshape(target.shape)


SPEC = declare(
    globals(),
    name="cross_entropy",
    stem="CrossEntropy",
    tensors=(out("y"), inp("x"), inp("target")),
    dtypes=F,
    torch='F.cross_entropy(x.reshape(-1, V), target.reshape(-1), reduction="none").reshape(target.shape)',
    summary="per-row cross entropy, class dim last, int32/int64 labels",
)
