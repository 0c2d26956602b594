"""cross_entropy_loss: F.cross_entropy(logits, target), mean reduction, class dim 1 (ops.md §2.6).

Targets equal to -100, and any other target outside [0, C), are dropped from sum and count;
all dropped -> NaN. NVIDIA: per-position losses and counts go to the workspace (f32, f64 for
f64), then one block sums them in a fixed order (deterministic, no atomics).
"""

import numpy as np

from infiniop_py.dtypes import IDX, DType, F, to_numpy
from infiniop_py.reduce.rowwise import RowLayout, RowwiseKernel, row_factory
from infiniop_py.reduce.softmax_ops import row_losses
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status

TI = {DType.I32: "int", DType.I64: "long long"}


def validate(check: Checker) -> Info:
    x, t, loss = check["logits"], check["target"], check["loss"]
    check.dtype_in("logits", F)
    check.dtype_in("target", IDX)
    check.same_dtype("logits", "loss")
    if x.ndim == 0:
        check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'logits' must be (C,) or (N, C, d1, ...), got a 0-d tensor")
    want = () if x.ndim == 1 else (x.shape[0], *x.shape[2:])
    if t.shape != want and not (x.ndim == 1 and t.shape == (1,)):
        check.fail(
            Status.BAD_TENSOR_SHAPE, f"tensor 'target' shape {list(t.shape)} must be {list(want)} for logits {list(x.shape)}"
        )
    if loss.shape not in ((), (1,)):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'loss' must be 0-d or [1], got {list(loss.shape)}")
    cdim = 0 if x.ndim == 1 else 1
    return Info(check.op, check.tensors, check.attrs, cdim=cdim)


def _moved(x: np.ndarray, cdim: int) -> np.ndarray:
    return np.moveaxis(x, cdim, -1) if x.ndim > 1 else x


def cpu_impl(info: Info):
    dtype = info.tensors["logits"].dtype
    cdim = info.cdim

    def run(views, ws, rt):
        x = _moved(views["logits"], cdim)
        t = np.asarray(views["target"]).reshape(x.shape[:-1])
        loss, ok = row_losses(x, t, dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            val = loss.sum(dtype=loss.dtype) / ok.sum(dtype=loss.dtype)
        views["loss"][...] = np.asarray(val).astype(to_numpy(dtype))

    return run


def nvidia(info: Info, handle):
    x, t = info.tensors["logits"], info.tensors["target"]
    cdim = info.cdim
    if x.ndim == 1:
        rshape, rx, rt = (1,), [0], [0]
    else:
        keep = [i for i in range(x.ndim) if i != cdim]
        rshape = tuple(x.shape[i] for i in keep)
        rx = [x.strides[i] for i in keep]
        rt = list(t.strides)
    lay = RowLayout(x.shape[cdim], x.strides[cdim], 0, rshape, [rx, [0] * len(rshape), rt])
    return RowwiseKernel(handle, lay, x.dtype, "ce_loss", (None, 1, 2), ti=TI[t.dtype], loss_slot=0)


row_factory(nvidia, "ce_loss", F, TI.values())


def reference(logits, target, out_shapes=None):
    import torch

    C = logits.shape[0] if logits.ndim == 1 else logits.shape[1]
    t = target.reshape(()) if logits.ndim == 1 else target
    t = torch.where((t >= 0) & (t < C), t, torch.full_like(t, -100))
    shape = (out_shapes or {}).get("loss", ())
    return torch.nn.functional.cross_entropy(logits, t.reshape(()) if logits.ndim == 1 else t).reshape(shape)


try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.dialect import GGUFDialect
except ImportError:  # pragma: no cover
    GGUFDialect = object


class CrossEntropyLossFiles(GGUFDialect):
    """Named-output style: loss allocated in the logits' dtype; 0-d when loss_shape is empty."""

    output_dtype_from = "logits"


SPEC = declare(
    globals(),
    name="cross_entropy_loss",
    stem="CrossEntropyLoss",
    tensors=(out("loss"), inp("logits"), inp("target")),
    dtypes=F,
    cpu=cpu_impl,
    infer=None,
    torch="F.cross_entropy(logits, target)",
    summary="mean cross entropy, class dim 1, -100/out-of-range targets ignored",
    gguf=CrossEntropyLossFiles(),
)
