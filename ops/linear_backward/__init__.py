"""linear_backward: grad_x = grad_y·w, grad_w = Σ grad_yᵀ·x, grad_b = Σ grad_y (ops.md §4.3).

NVIDIA: two cuBLAS GEMMs on the caller's layouts (staging through the workspace only where a
matrix has no usable unit stride) and a deterministic two-stage column sum for grad_b.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from infiniop_py import blas
from infiniop_py.cuda.compiler import Launch, Slot, get_module
from infiniop_py.cuda.kernel import CudaKernel, ctype, runtime
from infiniop_py.dtypes import DType, F
from infiniop_py.elementwise import copy as staging
from infiniop_py.halfconv import copy_into, to_f32
from infiniop_py.layout import collapse
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status

try:  # the gguf package is optional at run time (the registry must import without it)
    from infiniop_py.gguf.linear import BACKWARD_DIALECT
except ImportError:  # pragma: no cover
    BACKWARD_DIALECT = None

SOURCE = (Path(__file__).parent / "kernel.cu").read_text()


def validate(check: Checker) -> Info:
    gx, gw, gb, gy, x, w = (check[n] for n in ("grad_x", "grad_w", "grad_b", "grad_y", "x", "w"))
    check.dtype_in("grad_y", F)
    check.same_dtype("grad_y", "grad_x", "grad_w", "grad_b", "x", "w")
    if w.ndim != 2:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'w' must be 2-d [N, K], got shape {list(w.shape)}")
    n, k = w.shape
    if x.ndim < 1 or x.shape[-1] != k:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'x' shape {list(x.shape)} must end with K = {k}")
    if gy.shape != tuple(x.shape[:-1]) + (n,):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'grad_y' shape {list(gy.shape)} must be {list(x.shape[:-1]) + [n]}")
    check.same_shape("x", "grad_x")
    check.same_shape("w", "grad_w")
    if gb is not None and gb.shape != (n,):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'grad_b' shape {list(gb.shape)} must be [{n}]")
    check.writable("grad_x", "grad_w", "grad_b")
    return Info(check.op, check.tensors, check.attrs, m=math.prod(x.shape[:-1]), n=n, k=k)


def cpu(info: Info):
    """grad_x = gy w, grad_w = gyᵀ x, grad_b = column sums of gy: NumPy's matmul written straight
    into f32/f64 outputs; f16/bf16 through f32 (converted once, rounded once)."""
    dt = info["grad_y"].dtype
    work = np.float64 if dt is DType.F64 else np.float32
    n, k = info.n, info.k

    def put(dst, a, b):
        if dst.dtype == work:
            np.matmul(a, b, out=dst)
        else:
            copy_into(dst, np.matmul(a, b))

    def run(views, ws, rt):
        gx, gw, gb, gy, x, w = (views[s] for s in ("grad_x", "grad_w", "grad_b", "grad_y", "x", "w"))
        if work is np.float32:
            gy, x, w = to_f32(gy), to_f32(x), to_f32(w)
        g2 = gy.reshape(-1, n)
        if gx.size:
            put(gx.reshape(-1, k) if gx.flags.c_contiguous else gx, g2 if gx.flags.c_contiguous else gy, w)
        if gw.size:
            put(gw, g2.T, x.reshape(-1, k))
        if gb is not None and gb.size:
            copy_into(gb, g2.sum(axis=0))

    return run


def _rows(shape, strides_list):
    """Single row stride per tensor for the collapsed leading dims, or None."""
    shp, sts = collapse(shape, strides_list)
    if len(shp) > 1:
        return None
    return [s[0] if shp else 1 for s in sts]


class LinearBackwardKernel(CudaKernel):
    def __init__(self, info: Info, handle):
        super().__init__(handle)
        gx, gw, gb, gy, x, w = (info[s] for s in ("grad_x", "grad_w", "grad_b", "grad_y", "x", "w"))
        dt = gy.dtype
        m, n, k = info.m, info.n, info.k
        item = gy.itemsize
        arena = staging.Arena()
        self.pre, self.post = [], []
        rows = _rows(x.shape[:-1], [gy.strides[:-1], x.strides[:-1], gx.strides[:-1]])
        direct = rows is not None
        sgy, sx, sgx = rows if direct else (n, k, k)
        gym = (m, n, sgy if m > 1 else max(n, 1), gy.strides[-1])
        xm = (m, k, sx if m > 1 else max(k, 1), x.strides[-1])
        gxm = (m, k, sgx if m > 1 else max(k, 1), gx.strides[-1])

        def stage_in(slot, desc, shape2):
            off = arena.take(math.prod(desc.shape) * item)
            cp = staging.Copy(handle, staging.contiguous(desc.shape, dt), desc)
            self.pre.append((slot, off, cp))
            return off, (shape2[0], shape2[1], max(shape2[1], 1), 1)

        self.src = {3: None, 4: None, 5: None}
        if not direct or blas.layout(*gym) is None or blas.layout(gym[1], gym[0], gym[3], gym[2]) is None:
            self.src[3], gym = stage_in(3, gy, (m, n))
        if not direct or blas.layout(*xm) is None:
            self.src[4], xm = stage_in(4, x, (m, k))
        wm = (n, k, w.strides[0], w.strides[1])
        if blas.layout(*wm) is None:
            self.src[5], wm = stage_in(5, w, (n, k))
        self.gx_off = None
        if m and k and (not direct or blas.layout(*gxm) is None):
            self.gx_off = arena.take(m * k * item)
            self.copy_gx = staging.Copy(handle, gx, staging.contiguous(gx.shape, dt))
            gxm = (m, k, max(k, 1), 1)
        gwm = (n, k, gw.strides[0], gw.strides[1])
        self.gw_off = None
        if n and k and blas.layout(*gwm) is None:
            self.gw_off = arena.take(n * k * item)
            self.copy_gw = staging.Copy(handle, gw, staging.contiguous(gw.shape, dt))
            gwm = (n, k, max(k, 1), 1)
        # grad_x (M x K) = grad_y (M x N) · w (N x K); grad_w (N x K) = grad_yᵀ (N x M) · x (M x K)
        self.plan_x = blas.GemmPlan(dt, m, k, n, (*gym, 0), (*wm, 0), (*gxm, 0), 1)
        gyt = (n, m, gym[3], gym[2], 0)
        self.plan_w = blas.GemmPlan(dt, n, k, m, gyt, (*xm, 0), (*gwm, 0), 1)
        self.blas = blas.blas_for(handle.device_id)
        self.gb = None
        if gb is not None and n:
            acc = "double" if dt is DType.F64 else "float"
            asz = 8 if dt is DType.F64 else 4
            sm = runtime.properties(handle.device_id)["sm_count"]
            cols = -(-n // 32)
            splits = max(1, min(-(-m // 64) if m else 1, max(1, (sm * 8) // cols), 1024))
            per = -(-m // splits) if m else 0
            self.part_off = arena.take(splits * n * asz)
            t = ctype(dt)
            names = [f"colsum_partial<{t}, {acc}>", f"colsum_final<{t}, {acc}>"]
            mod = get_module(SOURCE, names, handle.device_id)
            import ctypes as ct

            self.gb_src_slot = 3
            self.k1 = Launch(
                mod.ptr[names[0]],
                (cols, splits),
                (32, 8),
                [
                    Slot("ws", self.part_off),
                    Slot(3),
                    ct.c_longlong(m),
                    ct.c_longlong(n),
                    ct.c_longlong(gym[2]),
                    ct.c_longlong(gym[3]),
                    ct.c_longlong(per),
                ],
            )
            self.k2 = Launch(
                mod.ptr[names[1]],
                (-(-n // 256),),
                (256,),
                [Slot(2), Slot("ws", self.part_off), ct.c_longlong(n), ct.c_longlong(gb.strides[0]), ct.c_int(splits)],
            )
            self.gb = True
        self.workspace_size = arena.size
        self.dims = (m, n, k)

    def launch(self, ptrs, ws, rt, stream):
        p = list(ptrs)
        for slot, off, cp in self.pre:
            cp(ws + off, ptrs[slot], stream)
            p[slot] = ws + off
        gxp = p[0] if self.gx_off is None else ws + self.gx_off
        gwp = p[1] if self.gw_off is None else ws + self.gw_off
        self.blas.gemm(self.plan_x, p[3], p[5], gxp, 1.0, 0.0, stream)
        self.blas.gemm(self.plan_w, p[3], p[4], gwp, 1.0, 0.0, stream)
        if self.gx_off is not None:
            self.copy_gx(p[0], gxp, stream)
        if self.gw_off is not None:
            self.copy_gw(p[1], gwp, stream)
        if self.gb:
            self.k1(p, ws, stream)
            self.k2(p, ws, stream)


def nvidia(info, handle):
    return LinearBackwardKernel(info, handle)


def compile_units():
    names = []
    for d in sorted(F):
        acc = "double" if d is DType.F64 else "float"
        names += [f"colsum_partial<{ctype(d)}, {acc}>", f"colsum_final<{ctype(d)}, {acc}>"]
    return [(SOURCE, names)] + staging.compile_units()


nvidia.compile_units = compile_units


def reference(grad_y, x, w):
    n, k = w.shape
    g2 = grad_y.reshape(-1, n)
    return {
        "grad_x": (g2 @ w).reshape(x.shape),
        "grad_w": g2.T @ x.reshape(-1, k),
        "grad_b": g2.sum(0),
    }


SPEC = declare(
    globals(),
    name="linear_backward",
    stem="LinearBackward",
    tensors=(out("grad_x"), out("grad_w"), out("grad_b", optional=True), inp("grad_y"), inp("x"), inp("w")),
    dtypes=F,
    torch="torch.autograd (F.linear backward)",
    summary="grad_x = grad_y·w, grad_w = grad_yᵀ·x, grad_b = Σ grad_y",
    gguf=BACKWARD_DIALECT,
    kernel_sources=("kernel.cu",),
)
