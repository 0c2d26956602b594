"""rms_norm_backward: grad_x and grad_w of rms_norm (ops.md §3.2).

grad_w is reduced in two deterministic stages (per-block f32 partial rows in the workspace, then
a fixed-order column sum), so it is bitwise identical run to run.
"""

import numpy as np

from infiniop_py.cpu import jit
from infiniop_py.cpu.rows import Outputs, bits, f32vec, parts, rows2d, run_rows, split
from infiniop_py.dtypes import DType, F, H, acc_numpy
from infiniop_py.norm import check_positive, check_rows, check_shape
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status

from . import cuda


def validate(check: Checker) -> Info:
    dt = check.dtype_in("x", F)
    check.same_dtype("x", "grad_y", "grad_x")
    shape = check_rows(check, "x", "grad_y", "grad_x")
    check_shape(check, "w", (shape[-1],))
    check_shape(check, "grad_w", (shape[-1],))
    w = check["w"].dtype
    if not (w == dt or (dt in H and w is DType.F32)):
        check.fail(
            Status.BAD_TENSOR_DTYPE,
            f"tensor 'w' dtype {w.name} is not allowed with x dtype {dt.name} (x's dtype, or F32 for F16/BF16)",
        )
    check.same_dtype("w", "grad_w")
    check.writable("grad_x", "grad_w")
    check_positive(check, "epsilon")
    return Info(check.op, check.tensors, check.attrs)


def cpu(info: Info):
    acc = acc_numpy(info.tensors["x"].dtype)
    eps = acc(info.attrs["epsilon"])

    def run(views, ws, rt):
        x, gy, w = views["x"], views["grad_y"], views["w"]
        gx, gw = views["grad_x"], views["grad_w"]
        D = x.shape[-1]
        k = jit.kernels()
        if k is not None and x.size and bits(x) is not None:
            out = Outputs()
            x2, gy2, gx2 = rows2d(x), rows2d(gy), out.rows(gx)
            bounds = parts(*x2.shape)  # row ranges fixed by the shape, one grad_w row each
            partial = np.zeros((len(bounds) - 1, D), np.float64)
            xb, gyb, gxb, wf = bits(x2), bits(gy2), bits(gx2), f32vec(w, D)
            run_rows(
                lambda _, p0, p1: k.rms_norm_backward(xb, gyb, wf, float(eps), gxb, partial, bounds, p0, p1),
                split(len(bounds) - 1, x2.size // (len(bounds) - 1)),
            )
            out.done()
            gw[...] = partial.sum(axis=0).astype(gw.dtype)
            return
        # C order: the row sums below then run over contiguous rows (NumPy's pairwise summation);
        # a column-major x summed sequentially lost ~20x accuracy in grad_w.
        xf, dy, wf = x.astype(acc, order="C"), gy.astype(acc, order="C"), w.astype(acc)
        rinv = acc(1) / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + eps)
        xh = xf * rinv
        u = wf * dy
        c = np.sum(u * xh, axis=-1, keepdims=True) / acc(D)
        if gx.size:
            gx[...] = ((u - xh * c) * rinv).astype(gx.dtype)
        gw[...] = np.sum((dy * xh).reshape(-1, D), axis=0, dtype=np.float64).astype(gw.dtype)

    return run


def reference(grad_y, x, w, epsilon=1e-5):
    D = x.shape[-1]
    rinv = 1.0 / (x.pow(2).mean(-1, keepdim=True) + epsilon).sqrt()
    xh = x * rinv
    u = w * grad_y
    gx = (u - xh * (u * xh).mean(-1, keepdim=True)) * rinv
    gw = (grad_y * xh).reshape(-1, D).sum(0)
    return {"grad_x": gx, "grad_w": gw}


SPEC = declare(
    globals(),
    name="rms_norm_backward",
    stem="RMSNormBackward",
    tensors=(
        out("grad_x", aliases=("grad_input",)),
        out("grad_w", aliases=("grad_weight",)),
        inp("grad_y", aliases=("grad_output",)),
        inp("x", aliases=("input",)),
        inp("w", aliases=("weight",)),
    ),
    attrs=(Attr("epsilon", "float", 1e-5, aliases=("eps",)),),
    dtypes=F,
    nvidia=cuda.factory,
    infer=lambda grad_y, x, w, **_: {"grad_x": x, "grad_w": w},
    torch="torch.autograd.grad(F.rms_norm(x, (D,), w, eps), (x, w), grad_y)",
    summary="gradients of rms_norm: grad_x and grad_w (deterministic two-stage column sum)",
    kernel_sources=("kernel.cu",),
)
