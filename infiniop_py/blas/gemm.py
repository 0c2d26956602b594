"""cuBLAS GEMMs through ctypes: the layout rules, the per-call arguments (``GemmPlan``) and the
``cublasGemmStridedBatchedEx`` path (``Blas``), shared by gemm, linear and linear_backward.

Row-major thinking, column-major cuBLAS: a logical matrix X (r x c, strides (sr, sc)) is
usable when one of its strides is 1.

* "row" layout (sc == 1): in memory it is the column-major matrix Xᵀ (c x r) with ld = sr;
* "col" layout (sr == 1): in memory it is the column-major matrix X (r x c) with ld = sc.

C = A·B is computed without copies: when C is "row", cuBLAS computes Cᵀ = Bᵀ·Aᵀ (m=N, n=M),
otherwise C = A·B (m=M, n=N); each operand gets transpose flag N or T from its own layout.
Compute type is CUBLAS_COMPUTE_32F for f16/bf16/f32 (true fp32: the handle's math mode is
checked and a TF32 mode is masked off for the call) and CUBLAS_COMPUTE_64F for f64.

gemm and linear take the cuBLASLt path (:mod:`infiniop_py.blas.lt`) where cuBLASLt has an
algorithm; this module's path runs otherwise, and for linear_backward.

Calls (``Blas``): ``cublasGemmStridedBatchedEx`` is called through ctypes on the libcublas that
CuPy loaded, with a handle of our own per device (created once, default math mode, so f32 is
never TF32 whatever CuPy's handle is set to). The handle is rebound only when the stream
changes, and nothing else ever rebinds it. Every argument but the three pointers and the
scalars is prepared at create (``GemmPlan``). This path also works under CUDA graph capture.
If libcublas cannot be opened that way, the CuPy wrapper is used instead (it binds CuPy's
handle to CuPy's *current* stream on every call: the caller's stream is made current through a
cached ``ExternalStream``, and a TF32 math mode on that handle is masked off for the call).
"""

from __future__ import annotations

import ctypes
import threading

from ..dtypes import DType

OP_N, OP_T = 0, 1
CUDA_TYPE = {DType.F16: 2, DType.BF16: 14, DType.F32: 0, DType.F64: 1}
COMPUTE_32F, COMPUTE_64F = 68, 70
TF32_MATH = 3  # CUBLAS_TF32_TENSOR_OP_MATH
ALGO_DEFAULT = -1
INT_MAX = 2**31 - 1


def layout(rows: int, cols: int, sr: int, sc: int):
    """('row', ld) or ('col', ld) for cuBLAS, or None when neither stride is usable.

    ld must be at least the leading extent; dims of size 1 make their stride irrelevant.
    """
    if (sc == 1 or cols <= 1) and (rows <= 1 or sr >= max(cols, 1)):
        return "row", (sr if rows > 1 else max(cols, 1))
    if (sr == 1 or rows <= 1) and (cols <= 1 or sc >= max(rows, 1)):
        return "col", (sc if cols > 1 else max(rows, 1))
    return None


def has_unit_stride(rows, cols, sr, sc) -> bool:
    return sr == 1 or sc == 1 or rows <= 1 or cols <= 1


class GemmPlan:
    """Arguments of one cublasGemmStridedBatchedEx call for C[b] = alpha·A[b]·B[b] + beta·C[b].

    a, b, c: (rows, cols, row stride, col stride, batch stride) in elements; batch: count.
    ``offsets`` of the three base pointers in bytes are added at call time.
    """

    def __init__(self, dtype: DType, m, n, k, a, b, c, batch: int):
        self.dtype = dtype
        self.m, self.n, self.k, self.batch = m, n, k, batch
        la = layout(m, k, a[2], a[3])
        lb = layout(k, n, b[2], b[3])
        lc = layout(m, n, c[2], c[3])
        if la is None or lb is None or lc is None:
            raise ValueError("matrix without a usable unit stride")
        item = {DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8}[dtype]
        self.item = item
        if lc[0] == "row":
            # Cᵀ (N x M) = Bᵀ (N x K) · Aᵀ (K x M)
            first, second = (lb, b), (la, a)
            cm, cn = n, m
            self.ta = OP_N if lb[0] == "row" else OP_T
            self.tb = OP_N if la[0] == "row" else OP_T
        else:
            first, second = (la, a), (lb, b)
            cm, cn = m, n
            self.ta = OP_N if la[0] == "col" else OP_T
            self.tb = OP_N if lb[0] == "col" else OP_T
        self.cm, self.cn = cm, cn
        self.lda, self.ldb, self.ldc = first[0][1], second[0][1], lc[1]
        self.sa, self.sb, self.sc = first[1][4], second[1][4], c[4]
        self.swap = lc[0] == "row"  # first operand is B
        if max(cm, cn, k, self.lda, self.ldb, self.ldc, batch) > INT_MAX:
            raise OverflowError("GEMM dimensions exceed 32-bit cuBLAS limits")
        self.ctype = CUDA_TYPE[dtype]
        self.compute = COMPUTE_64F if dtype is DType.F64 else COMPUTE_32F
        scal = ctypes.c_double if dtype is DType.F64 else ctypes.c_float
        self.alpha, self.beta = scal(1.0), scal(0.0)
        self.alpha_ptr, self.beta_ptr = ctypes.addressof(self.alpha), ctypes.addressof(self.beta)
        # cublasGemmStridedBatchedEx arguments except handle and the A, B, C pointers, in order
        self.args = (
            self.ta, self.tb, cm, cn, k, self.alpha_ptr, self.ctype, self.lda, self.sa,
            self.ctype, self.ldb, self.sb, self.beta_ptr, self.ctype, self.ldc, self.sc,
            batch, self.compute, ALGO_DEFAULT,
        )  # fmt: skip


def find_lib(prefix: str, probe: str, names):
    """The shared library whose file name starts with ``prefix`` that this process has mapped
    (the copy CuPy loaded, so handles and streams agree), else the first of ``names`` that loads;
    ``probe`` is a symbol it must export."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.rsplit(None, 1)[-1] if line.strip() else ""
                if name.rsplit("/", 1)[-1].startswith(prefix) and name not in paths:
                    paths.append(name)
    except OSError:  # pragma: no cover - not Linux
        pass
    for cand in paths + list(names):
        try:
            lib = ctypes.CDLL(cand)
            getattr(lib, probe)
            return lib
        except (OSError, AttributeError):
            continue
    raise OSError(f"{prefix} not found")


def libcublas():
    """The libcublas CuPy loaded, via ctypes."""
    try:
        from cupy_backends.cuda.libs import cublas  # noqa: F401  (makes CuPy load libcublas)
    except ImportError:  # pragma: no cover - older CuPy
        from cupy.cuda import cublas  # noqa: F401
    return find_lib("libcublas.so", "cublasGemmStridedBatchedEx", ["libcublas.so.13", "libcublas.so.12", "libcublas.so"])


_VP, _I, _LL = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong


class Blas:
    """cuBLAS GEMMs for one device: our own handle through ctypes, or CuPy's wrapper (fallback).

    ``backend`` says which ("ctypes" or "cupy"). The ctypes handle is shared by the threads of
    the process; a lock keeps each (bind stream, GEMM) pair together.
    """

    def __init__(self, device_id: int):
        from infiniop_py.cuda import runtime

        self.cp = runtime.cupy()
        self.device_id = device_id
        self._streams: dict[int, object] = {}
        self._lock = threading.Lock()
        self._bound = None
        try:
            self._init_ctypes()
            self.backend = "ctypes"
        except Exception:  # noqa: BLE001 - any failure: the CuPy path still works
            self._init_cupy()
            self.backend = "cupy"

    # ---- ctypes path ----------------------------------------------------------------------
    def _init_ctypes(self):
        lib = libcublas()
        create, set_stream, set_math = lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasSetMathMode
        create.argtypes, create.restype = [ctypes.POINTER(_VP)], _I
        set_stream.argtypes, set_stream.restype = [_VP, _VP], _I
        set_math.argtypes, set_math.restype = [_VP, _I], _I
        fn = lib.cublasGemmStridedBatchedEx
        fn.argtypes = [_VP, _I, _I, _I, _I, _I, _VP, _VP, _I, _I, _LL, _VP, _I, _I, _LL,
                       _VP, _VP, _I, _I, _LL, _I, _I, _I]  # fmt: skip
        fn.restype = _I
        h = _VP()
        with self.cp.cuda.Device(self.device_id):
            st = create(ctypes.byref(h))
            if st != 0:
                raise RuntimeError(f"cublasCreate failed: status {st}")
            st = set_math(h, 0)  # CUBLAS_DEFAULT_MATH: no TF32 for CUBLAS_COMPUTE_32F
            if st != 0:
                raise RuntimeError(f"cublasSetMathMode failed: status {st}")
        self.lib, self.handle = lib, h.value
        self._set_stream, self._fn = set_stream, fn

    def gemm(self, plan: GemmPlan, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float, stream: int) -> None:
        """Run ``plan`` on the given device pointers (bytes), on ``stream``."""
        if plan.m == 0 or plan.n == 0 or plan.batch == 0:
            return
        if self.backend != "ctypes":
            return self._gemm_cupy(plan, a_ptr, b_ptr, c_ptr, alpha, beta, stream)
        if plan.alpha.value != alpha:
            plan.alpha.value = alpha
        if plan.beta.value != beta:
            plan.beta.value = beta
        first, second = (b_ptr, a_ptr) if plan.swap else (a_ptr, b_ptr)
        with self._lock:
            if stream != self._bound:
                st = self._set_stream(self.handle, stream)
                if st != 0:
                    raise RuntimeError(f"cublasSetStream failed: status {st}")
                self._bound = stream
            p = plan.args
            st = self._fn(self.handle, p[0], p[1], p[2], p[3], p[4], p[5], first, p[6], p[7], p[8], second,
                          p[9], p[10], p[11], p[12], c_ptr, p[13], p[14], p[15], p[16], p[17], p[18])  # fmt: skip
        if st != 0:
            raise RuntimeError(f"cublasGemmStridedBatchedEx failed: status {st}")

    # ---- CuPy path (fallback) ---------------------------------------------------------------
    def _init_cupy(self):
        cp = self.cp
        try:
            from cupy_backends.cuda.libs import cublas
        except ImportError:  # pragma: no cover - older CuPy
            from cupy.cuda import cublas
        self.cublas = cublas
        with cp.cuda.Device(self.device_id):
            self.handle = cp.cuda.device.get_cublas_handle()

    def _stream(self, ptr: int):
        s = self._streams.get(ptr)
        if s is None:
            if len(self._streams) > 64:
                self._streams.clear()
            s = self.cp.cuda.ExternalStream(ptr, self.device_id)
            self._streams[ptr] = s
        return s

    def _gemm_cupy(self, plan, a_ptr, b_ptr, c_ptr, alpha, beta, stream):
        plan.alpha.value = alpha
        plan.beta.value = beta
        first, second = (b_ptr, a_ptr) if plan.swap else (a_ptr, b_ptr)
        cur = self.cp.cuda.get_current_stream()
        if cur.ptr == stream:
            self._call(plan, first, second, c_ptr)
        else:
            with self._stream(stream):
                self._call(plan, first, second, c_ptr)

    def _call(self, plan, first, second, c_ptr):
        cb = self.cublas
        h = self.handle
        restore = None
        if plan.compute == COMPUTE_32F and plan.dtype is DType.F32:
            mode = cb.getMathMode(h)
            if (mode & 0xF) == TF32_MATH:
                restore = mode
                cb.setMathMode(h, mode & ~0xF)
        try:
            cb.gemmStridedBatchedEx(
                h, plan.ta, plan.tb, plan.cm, plan.cn, plan.k,
                plan.alpha_ptr, first, plan.ctype, plan.lda, plan.sa,
                second, plan.ctype, plan.ldb, plan.sb,
                plan.beta_ptr, c_ptr, plan.ctype, plan.ldc, plan.sc,
                plan.batch, plan.compute, ALGO_DEFAULT,
            )  # fmt: skip
        finally:
            if restore is not None:
                cb.setMathMode(h, restore)


_BLAS: dict[int, Blas] = {}


def blas_for(device_id: int) -> Blas:
    b = _BLAS.get(device_id)
    if b is None:
        b = _BLAS[device_id] = Blas(device_id)
    return b
