"""gemm: c = alpha·(a @ b) + beta·c, 2-D or batched 3-D (ops.md §4.1).

alpha and beta are runtime scalars (calculate, C-style alias too). A batch of 1 (or a 2-D
operand) broadcasts. Every matrix needs a unit row or column stride; batch strides are free.
beta == 0 ignores c's prior contents (NaN included). NVIDIA: one cublasLtMatmul with the
algorithm chosen at create (``infiniop_py.blas.lt``), else cublasGemmStridedBatchedEx
(``infiniop_py.blas.gemm``);
transposes expressed as cuBLAS flags, never copies; true fp32. Repeated calls on the same
buffers with the same alpha/beta replay a captured one-call CUDA graph (``LtPlan``).
"""

from __future__ import annotations

import numpy as np

from infiniop_py import blas
from infiniop_py.cpu.matmul import bf16_matmul
from infiniop_py.cuda.kernel import CudaKernel
from infiniop_py.dtypes import DType, F
from infiniop_py.halfconv import copy_into, to_f32
from infiniop_py.spec import Attr, Checker, Info, declare, inout, inp
from infiniop_py.status import Status

COMPILE_CHECK_EXEMPT = "cuBLAS only (no CUDA source)"


def _mat(check: Checker, name: str):
    """(batch, rows, cols, row stride, col stride, batch stride) of a 2-D or 3-D tensor."""
    d = check[name]
    if d.ndim == 2:
        return 1, d.shape[0], d.shape[1], d.strides[0], d.strides[1], 0
    return d.shape[0], d.shape[1], d.shape[2], d.strides[1], d.strides[2], d.strides[0]


def validate(check: Checker) -> Info:
    for n in ("c", "a", "b"):
        check.ndim_in(n, (2, 3))
    check.dtype_in("c", F)
    check.same_dtype("c", "a", "b")
    cb, m, n, src, scc, sbc = _mat(check, "c")
    ab, am, k, sra, sca, sba = _mat(check, "a")
    bb, bk, bn, srb, scb, sbb = _mat(check, "b")
    if am != m:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'a' has {am} rows but 'c' has {m}")
    if bn != n:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'b' has {bn} columns but 'c' has {n}")
    if bk != k:
        check.fail(Status.BAD_TENSOR_SHAPE, f"inner dimensions differ: 'a' has {k} columns, 'b' has {bk} rows")
    for name, bt in (("a", ab), ("b", bb)):
        if bt not in (1, cb):
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' batch {bt} does not match 'c' batch {cb} (nor is 1)")
    check.writable("c")
    mats = {"c": (m, n, src, scc), "a": (m, k, sra, sca), "b": (k, n, srb, scb)}
    for name, (r, cc, sr, sc) in mats.items():
        if not blas.has_unit_stride(r, cc, sr, sc):
            check.fail(Status.BAD_TENSOR_STRIDES, f"matrix '{name}' has no unit stride: strides {list(check[name].strides)}")
        if blas.layout(r, cc, sr, sc) is None:
            check.fail(
                Status.BAD_TENSOR_STRIDES,
                f"matrix '{name}' leading stride is smaller than its extent: shape {list(check[name].shape)} "
                f"strides {list(check[name].strides)}",
            )
    batch = cb
    return Info(
        check.op,
        check.tensors,
        check.attrs,
        m=m,
        n=n,
        k=k,
        batch=batch,
        a=(m, k, sra, sca, sba if ab > 1 else 0),
        b=(k, n, srb, scb, sbb if bb > 1 else 0),
        c=(m, n, src, scc, sbc),
    )


def cpu(info: Info):
    """BLAS through NumPy's matmul, f16/bf16 through f32 (converted once, rounded once); an f32/f64
    product goes straight into c when beta is 0. bf16 products large enough take the CPU's
    bfloat16 dot products where it has them (``infiniop_py.cpu.matmul``)."""
    dt = info["c"].dtype
    work = np.float64 if dt is DType.F64 else np.float32
    bf16 = dt is DType.BF16

    def run(views, ws, rt):
        c, a, b = views["c"], views["a"], views["b"]
        alpha, beta = rt
        if c.size == 0:
            return
        a3 = a.reshape((1,) + a.shape) if a.ndim == 2 else a
        b3 = b.reshape((1,) + b.shape) if b.ndim == 2 else b
        c3 = c.reshape((1,) + c.shape) if c.ndim == 2 else c
        prod = bf16_matmul(a3, b3) if bf16 else None  # None: through the f32 BLAS
        if prod is None:
            a3, b3 = to_f32(a3) if work is np.float32 else a3, to_f32(b3) if work is np.float32 else b3
            if c.dtype == work and beta == 0.0 and np.broadcast_shapes(a3.shape[:-2], b3.shape[:-2]) == c3.shape[:-2]:
                np.matmul(a3, b3, out=c3)
                if alpha != 1.0:
                    c3 *= work(alpha)
                return
            prod = np.matmul(a3, b3)
        if alpha != 1.0:
            prod *= work(alpha)
        if beta != 0.0:
            prod = prod + work(beta) * to_f32(c3) if work is np.float32 else prod + work(beta) * c3
        copy_into(c3, np.broadcast_to(prod, c3.shape))

    return run


class GemmKernel(CudaKernel):
    """Plans the cuBLAS call at create; calculate binds stream and scalars and launches."""

    workspace_size = 0

    def __init__(self, info: Info, handle):
        super().__init__(handle)
        self.info = info
        self.plan = blas.GemmPlan(info["c"].dtype, info.m, info.n, info.k, info.a, info.b, info.c, info.batch)
        self.blas = blas.blas_for(handle.device_id)
        self.empty = info.m == 0 or info.n == 0
        # cuBLASLt with the algorithm chosen once (None: K = 0, no cuBLASLt or no algorithm)
        self.lt = None if self.empty else blas.lt_plan(handle.device_id, self.plan)
        if self.lt is not None:
            self.launch = self._launch_lt

    def _launch_lt(self, ptrs, ws_ptr, rt, stream):
        if not self.lt(ptrs[1], ptrs[2], ptrs[0], rt[0], rt[1], stream):
            self.blas.gemm(self.plan, ptrs[1], ptrs[2], ptrs[0], rt[0], rt[1], stream)

    def launch(self, ptrs, ws_ptr, rt, stream):
        if not self.empty:
            self.blas.gemm(self.plan, ptrs[1], ptrs[2], ptrs[0], rt[0], rt[1], stream)


def nvidia(info: Info, handle):
    return GemmKernel(info, handle)


nvidia.compile_units = lambda: []
nvidia.compile_exempt = "cuBLAS only (no CUDA source)"


def reference(c, a, b, alpha=1.0, beta=0.0):
    import torch

    r = alpha * torch.matmul(a, b)
    if beta != 0:
        r = r + beta * (c if c.ndim == 3 else c.unsqueeze(0))
    return {"c": r.reshape(c.shape) if r.shape != c.shape and r.numel() == c.numel() else r}


SPEC = declare(
    globals(),
    name="gemm",
    stem="Gemm",
    tensors=(inout("c"), inp("a"), inp("b")),
    dtypes=F,
    runtime=(Attr("alpha", "float", 1.0), Attr("beta", "float", 0.0)),
    torch="torch.baddbmm(c, a, b, beta=beta, alpha=alpha)",
    summary="c = alpha·(a @ b) + beta·c (2-D or batched, batch 1 broadcasts)",
)
