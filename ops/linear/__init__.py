"""linear: y = x·wᵀ + b, x N-D (1-D allowed), optional bias, any strides (ops.md §4.2).

NVIDIA: one cuBLAS GEMM on the caller's layouts when they allow it (leading dims of x and y
collapse to one row stride, each matrix has a unit stride); otherwise the odd tensor is staged
through the workspace with a strided copy. The GEMM is one cublasLtMatmul with the algorithm
chosen at create (``blas.LtPlan``); a contiguous bias on a row-major y is added by cuBLASLt's
BIAS epilogue (rounded once). Otherwise (column-major y, strided bias, no cuBLASLt algorithm)
the bias is broadcast into y first and the GEMM runs with beta = 1. Repeated calls on the same
buffers replay a captured one-call CUDA graph of the cuBLASLt call (``blas.LtPlan``).
"""

from __future__ import annotations

import math

import numpy as np

from infiniop_py import blas
from infiniop_py.cuda.kernel import CudaKernel
from infiniop_py.dtypes import DType, F
from infiniop_py.elementwise import copy as staging
from infiniop_py.halfconv import copy_into, to_f32
from infiniop_py.layout import collapse
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status
from infiniop_py.tensor import TensorDescriptor

try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.linear import DIALECT
except ImportError:  # pragma: no cover
    DIALECT = None


def validate(check: Checker) -> Info:
    x, w, b, y = check["x"], check["w"], check["b"], check["y"]
    check.dtype_in("y", F)
    check.same_dtype("y", "x", "w", "b")
    if x.ndim < 1:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' must have at least 1 dim, got shape {list(x.shape)}")
    if w.ndim != 2:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'w' must be 2-d [N, K], got shape {list(w.shape)}")
    n, k = w.shape
    if x.shape[-1] != k:
        check.fail(Status.BAD_TENSOR_SHAPE, f"inner dimensions differ: 'x' has {x.shape[-1]} columns, 'w' has {k}")
    want = tuple(x.shape[:-1]) + (n,)
    if y.shape != want:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'y' shape {list(y.shape)} does not match x·wᵀ shape {list(want)}")
    if b is not None and b.shape != (n,):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'b' shape {list(b.shape)} must be [{n}]")
    check.writable("y")
    return Info(check.op, check.tensors, check.attrs, m=math.prod(x.shape[:-1]), n=n, k=k)


def cpu(info: Info):
    """y = x wᵀ (+ b) through NumPy's matmul, written straight into y for f32/f64; f16/bf16
    through f32 (converted once, rounded once)."""
    dt = info["y"].dtype
    work = np.float64 if dt is DType.F64 else np.float32

    def run(views, ws, rt):
        y, x, w, b = views["y"], views["x"], views["w"], views["b"]
        if y.size == 0:
            return
        if work is np.float32:
            x, w, b = to_f32(x), to_f32(w), None if b is None else to_f32(b)
        if y.dtype == work:
            np.matmul(x, w.T, out=y)
            if b is not None:
                y += b
            return
        r = np.matmul(x, w.T)
        if b is not None:
            r += b
        copy_into(y, r)

    return run


class LinearKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        x, w, b, y = info["x"], info["w"], info["b"], info["y"]
        dt = y.dtype
        m, n, k = info.m, info.n, info.k
        self.empty = m == 0 or n == 0
        self.steps_before, self.steps_after = [], []
        arena = staging.Arena()
        item = y.itemsize
        lead = x.shape[:-1]
        shp, (sx, sy) = collapse(lead, [x.strides[:-1], y.strides[:-1]])
        direct = len(shp) <= 1
        sxm = sx[0] if shp else max(k, 1)
        sym = sy[0] if shp else max(n, 1)
        xm = (m, k, sxm, x.strides[-1])
        ym = (m, n, sym, y.strides[-1])
        wm = (k, n, w.strides[1], w.strides[0])  # B = wᵀ
        self.x_off = self.w_off = self.y_off = None
        if not direct or blas.layout(*xm) is None:
            self.x_off = arena.take(m * k * item)
            self.copy_x = staging.Copy(handle, staging.contiguous(x.shape, dt), x)
            xm = (m, k, max(k, 1), 1)
        if blas.layout(*wm) is None:
            self.w_off = arena.take(n * k * item)
            self.copy_w = staging.Copy(handle, staging.contiguous(w.shape, dt), w)
            wm = (k, n, 1, max(k, 1))
        target = y
        if not direct or blas.layout(*ym) is None:
            self.y_off = arena.take(m * n * item)
            target = staging.contiguous(y.shape, dt)
            self.copy_y = staging.Copy(handle, y, target)
            ym = (m, n, max(n, 1), 1)
        self.plan = blas.GemmPlan(dt, m, n, k, (*xm, 0), (*wm, 0), (*ym, 0), 1)
        self.blas = blas.blas_for(handle.device_id)
        self.workspace_size = arena.size
        self.bias = None
        self.lt = self.lt_bias = None
        if not self.empty and b is not None and self.plan.swap and (b.strides[0] == 1 or n == 1):
            # y row-major: cuBLAS's D is yᵀ (N rows), so the bias runs along D's rows: BIAS epilogue
            self.lt_bias = blas.lt_plan(handle.device_id, self.plan, bias=True)
        if b is not None:  # also the fallback of the epilogue (no algorithm for some alignment)
            bview = TensorDescriptor(target.shape, (0,) * (target.ndim - 1) + (b.strides[0],), dt)
            self.bias = staging.Copy(handle, target, bview)
        self.lt = None if self.empty else blas.lt_plan(handle.device_id, self.plan)

    def launch(self, ptrs, ws, rt, stream):
        if self.empty:
            return
        yp, xp, wp, bp = ptrs
        if self.x_off is not None:
            self.copy_x(ws + self.x_off, xp, stream)
            xp = ws + self.x_off
        if self.w_off is not None:
            self.copy_w(ws + self.w_off, wp, stream)
            wp = ws + self.w_off
        out_p = yp if self.y_off is None else ws + self.y_off
        if self.lt_bias is None or not self.lt_bias(xp, wp, out_p, 1.0, 0.0, stream, bp):
            beta = 0.0
            if self.bias is not None:
                self.bias(out_p, bp, stream)
                beta = 1.0
            if self.lt is None or not self.lt(xp, wp, out_p, 1.0, beta, stream):
                self.blas.gemm(self.plan, xp, wp, out_p, 1.0, beta, stream)
        if self.y_off is not None:
            self.copy_y(yp, out_p, stream)


def nvidia(info: Info, handle):
    return LinearKernel(info, handle)


nvidia.compile_units = staging.compile_units


def reference(x, w, b=None):
    import torch

    return torch.nn.functional.linear(x, w, b)


SPEC = declare(
    globals(),
    name="linear",
    stem="Linear",
    tensors=(
        out("y", aliases=("output",)),
        inp("x", aliases=("input",)),
        inp("w", aliases=("weight",)),
        inp("b", optional=True, aliases=("bias",)),
    ),
    dtypes=F,
    infer=None,
    torch="torch.nn.functional.linear(x, w, b)",
    summary="y = x·wᵀ + b (x N-D, optional bias, any strides)",
    gguf=DIALECT,
)
