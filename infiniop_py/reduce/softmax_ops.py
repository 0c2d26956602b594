"""The softmax family's shared parts: max-subtracted (log-)softmax and per-row cross entropy in
NumPy, and ``softmax_op``, the builder of a softmax-along-a-dim operator (validation, CPU and
NVIDIA backends) from the declaration in its ``ops/<name>`` folder."""

from __future__ import annotations

import numpy as np

from ..cpu import jit
from ..cpu.rows import Outputs, bits, rows2d, run_rows, split
from ..dtypes import DType, F, acc_numpy
from ..halfconv import copy_into
from ..spec import Attr, Checker, Info, OpSpec, inp, out
from ..status import Status
from ..tensor import create_tensor_descriptor
from .rowwise import RowLayout, RowwiseKernel, row_factory, split_dim


def softmax_numpy(x: np.ndarray, axis: int, log: bool, dtype: DType, valid=None) -> np.ndarray:
    """Max-subtracted (log-)softmax in the accumulator type; ``valid`` masks excluded entries."""
    a = np.array(x, dtype=acc_numpy(dtype))  # a private copy: worked on in place below
    if valid is not None:
        a = np.where(valid, a, -np.inf)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(a, axis=axis, keepdims=True)
        np.subtract(a, m, out=a)
        if log:
            s = np.sum(np.exp(a), axis=axis, keepdims=True)
            np.subtract(a, np.log(s), out=a)
        else:
            np.exp(a, out=a)
            np.divide(a, np.sum(a, axis=axis, keepdims=True), out=a)
    if valid is not None:
        a = np.where(valid, a, 0)
    return a


def row_losses(x: np.ndarray, labels: np.ndarray, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """(logsumexp over the last dim minus the label's logit, 0 where the label is out of range;
    whether it is in range) in the accumulator type."""
    a = x.astype(acc_numpy(dtype), copy=False)
    V = a.shape[-1]
    lab = labels.astype(np.int64)
    ok = (lab >= 0) & (lab < V)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(a, axis=-1) if V else np.full(a.shape[:-1], -np.inf, a.dtype)
        lse = m + np.log(np.sum(np.exp(a - m[..., None]), axis=-1))
        picked = np.take_along_axis(a, np.where(ok, lab, 0)[..., None], axis=-1)[..., 0] if V else np.zeros(lab.shape, a.dtype)
        return np.where(ok, lse - picked, 0), ok


def softmax_op(*, name: str, stem: str, log: bool, torch: str, summary: str, gguf_names=()) -> OpSpec:
    """The OpSpec of (log-)softmax of ``input`` along ``dim`` into ``output`` (same shape and
    dtype, any strides, in place allowed); ``torch`` is the torch function's name, the reference.
    The NVIDIA backend is the row-wise kernels' ``log_softmax`` / ``softmax`` mode."""

    def validate(check: Checker) -> Info:
        x = check["input"]
        check.dtype_in("input", F)
        check.same_dtype("input", "output")
        check.same_shape("input", "output")
        if x.ndim < 1:
            check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'input' must have ndim >= 1, got a 0-d tensor")
        check.writable("output")
        axis = check.axis("dim", check.attrs["dim"], x.ndim)
        return Info(check.op, check.tensors, check.attrs, axis=axis)

    def cpu(info: Info):
        from ..elementwise import parallel_chunks

        axis = info.axis
        dtype = info.tensors["input"].dtype

        def run(views, ws, rt):
            y = views["output"]
            if y.size == 0:
                return
            k = jit.kernels()
            if k is not None and axis == y.ndim - 1 and bits(y) is not None:
                out = Outputs()
                x2, y2 = rows2d(views["input"]), out.rows(y)
                xb, yb = bits(x2), bits(y2)
                ranges = split(*x2.shape)
                tmp = np.empty((len(ranges), x2.shape[1]), np.float32)  # a scratch row per range
                run_rows(lambda i, r0, r1: k.softmax(xb, yb, log, tmp[i], r0, r1), ranges)
                out.done()
                return

            def part(yp, xp):  # rows are independent: thread over the other axes
                copy_into(yp, softmax_numpy(xp, axis, log, dtype))

            parallel_chunks(part, y, (views["input"],), keep_axis=axis)

        return run

    mode = "log_softmax" if log else "softmax"

    def nvidia(info: Info, handle):
        x, y = info.tensors["input"], info.tensors["output"]
        axis = info.axis
        rs, (rx, ry) = split_dim(x.shape, [x.strides, y.strides], axis)
        lay = RowLayout(x.shape[axis], x.strides[axis], y.strides[axis], rs, [rx, ry, [0] * len(rs)])
        return RowwiseKernel(handle, lay, x.dtype, mode, (0, 1, None))

    row_factory(nvidia, mode, F)

    def reference(input, dim=-1):
        import torch as th

        return getattr(th, torch)(input, dim)

    return OpSpec(
        name=name,
        stem=stem,
        tensors=(out("output", aliases=("y",)), inp("input", aliases=("x",))),
        attrs=(Attr("dim", "int", -1, aliases=("axis",)),),
        validate=validate,
        dtypes=F,
        cpu=cpu,
        nvidia=nvidia,
        reference=reference,
        infer=lambda input, dim=-1: {"output": create_tensor_descriptor(input.shape, None, input.dtype)},
        torch=f"torch.{torch}(input, dim)",
        summary=summary,
        gguf_names=gguf_names,
        inplace=(("output", "input"),),
    )
