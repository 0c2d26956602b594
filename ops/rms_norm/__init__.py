"""rms_norm: y = x * w / sqrt(mean(x^2, last) + eps) (ops.md §3.1).

Any ndim >= 1 (leading dims are rows); x, y and w need unit stride along the last dim. The
weight may be f16/bf16/f32 when x is f16/bf16 (mixed-precision RMSNorm), else x's dtype.
"""

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, f32vec, rows2d, run_rows, split
from infiniop_py.dtypes import DType, F, H, acc_numpy
from infiniop_py.norm import check_positive, check_rows, check_shape
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status

from . import cuda

W_MIXED = frozenset({DType.F16, DType.BF16, DType.F32})


def weight_ok(x: DType, w: DType) -> bool:
    return w == x or (x in H and w in W_MIXED)


def validate(check: Checker) -> Info:
    dt = check.dtype_in("x", F)
    check.same_dtype("x", "y")
    shape = check_rows(check, "x", "y")
    check_shape(check, "w", (shape[-1],))
    w = check["w"].dtype
    if not weight_ok(dt, w):
        check.fail(Status.BAD_TENSOR_DTYPE, f"tensor 'w' dtype {w.name} is not allowed with x dtype {dt.name}")
    if shape[-1] > 1:
        for n in ("y", "x", "w"):
            if check[n].strides[-1] != 1:
                check.fail(
                    Status.BAD_TENSOR_STRIDES, f"tensor '{n}' needs last-dim stride 1, got strides {list(check[n].strides)}"
                )
    check.writable("y")
    check_positive(check, "epsilon")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    acc = acc_numpy(info.tensors["x"].dtype)
    eps = acc(info.attrs["epsilon"])

    def run(views, ws, rt):
        x, y, w = views["x"], views["y"], views["w"]
        if y.size == 0:
            return
        k = jit.kernels()
        if k is not None and bits(x) is not None:
            out = Outputs()
            x2, y2 = rows2d(x), out.rows(y)
            xb, yb, wf = bits(x2), bits(y2), f32vec(w, x2.shape[1])
            run_rows(lambda _, r0, r1: k.rms_norm(xb, wf, float(eps), yb, r0, r1), split(*x2.shape))
            out.done()
            return
        xf = x.astype(acc)
        rinv = acc(1) / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + eps)
        y[...] = (xf * rinv * w.astype(acc)).astype(y.dtype)

    return run


def reference(x, w, epsilon=1e-5):
    return x * w / (x.pow(2).mean(-1, keepdim=True) + epsilon).sqrt()


SPEC = declare(
    globals(),
    name="rms_norm",
    stem="RMSNorm",
    tensors=(out("y"), inp("x", aliases=("input",)), inp("w", aliases=("weight",))),
    attrs=(Attr("epsilon", "float", 1e-5, aliases=("eps",)),),
    dtypes=F,
    nvidia=cuda.factory,
    infer=lambda x, w, **_: {"y": x},
    torch="torch.nn.functional.rms_norm(x, (D,), w, eps)",
    summary="y = x·w / sqrt(mean(x², last) + eps), any leading dims, mixed-precision weight",
    inplace=(("y", "x"),),
    kernel_sources=("kernel.cu",),
)
