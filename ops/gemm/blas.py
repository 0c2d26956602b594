"""cuBLAS GEMM through CuPy, shared by gemm, linear and linear_backward.

Row-major thinking, column-major cuBLAS: a logical matrix X (r x c, strides (sr, sc)) is
usable when one of its strides is 1.

* "row" layout (sc == 1): in memory it is the column-major matrix Xᵀ (c x r) with ld = sr;
* "col" layout (sr == 1): in memory it is the column-major matrix X (r x c) with ld = sc.

C = A·B is computed without copies: when C is "row", cuBLAS computes Cᵀ = Bᵀ·Aᵀ (m=N, n=M),
otherwise C = A·B (m=M, n=N); each operand gets transpose flag N or T from its own layout.
Compute type is CUBLAS_COMPUTE_32F for f16/bf16/f32 (true fp32: the handle's math mode is
checked and a TF32 mode is masked off for the call) and CUBLAS_COMPUTE_64F for f64.

Default path (``LtPlan``, see its docstring): one ``cublasLtMatmul`` per call with the algorithm
chosen at create by cuBLASLt's heuristic (cached per pointer-alignment class), on an Lt handle per
device and a 32 MiB workspace per stream (GEMMs running at once on two streams never share one);
linear uses its BIAS epilogue. Where cuBLASLt cannot be loaded or has no algorithm, the GemmEx
path below runs. A call repeating (pointers, alpha, beta, stream) for the third time is captured
once into a one-call CUDA graph and replayed from then on: one ``cudaGraphLaunch`` instead of the
host path inside cuBLASLt.

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
import warnings

from infiniop_py.dtypes import DType
from infiniop_py.lru import LRU

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


def _libcublas():
    """The libcublas CuPy loaded (same library, so handles and streams agree), via ctypes."""
    try:
        from cupy_backends.cuda.libs import cublas  # noqa: F401  (makes CuPy load libcublas)
    except ImportError:  # pragma: no cover - older CuPy
        from cupy.cuda import cublas  # noqa: F401
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.rsplit(None, 1)[-1] if line.strip() else ""
                base = name.rsplit("/", 1)[-1]
                if base.startswith("libcublas.so") and name not in paths:
                    paths.append(name)
    except OSError:  # pragma: no cover - not Linux
        pass
    for cand in paths + ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]:
        try:
            lib = ctypes.CDLL(cand)
            lib.cublasGemmStridedBatchedEx  # noqa: B018  (raises AttributeError when absent)
            return lib
        except (OSError, AttributeError):
            continue
    raise OSError("libcublas not found")


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
        lib = _libcublas()
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


# ---- cuBLASLt path -------------------------------------------------------------------------
# Enum values and struct sizes from cublasLt.h (CUDA 12/13; unchanged between them).
LT_WORKSPACE = 32 * 1024 * 1024  # what cuBLAS and torch give Hopper GEMMs
LT_LAYOUT_ORDER, LT_LAYOUT_BATCH_COUNT, LT_LAYOUT_BATCH_OFFSET = 1, 5, 6
LT_DESC_TRANSA, LT_DESC_TRANSB, LT_DESC_EPILOGUE, LT_DESC_BIAS_POINTER = 3, 4, 7, 8
LT_EPILOGUE_DEFAULT, LT_EPILOGUE_BIAS = 1, 4
LT_PREF_MAX_WORKSPACE = 1
LT_PREF_MIN_ALIGN = (5, 6, 7, 8)  # A, B, C, D bytes
CUDA_R_32F, CUDA_R_64F = 0, 1
_U32, _I32, _I64, _U64, _SZ = ctypes.c_uint32, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t


class LtNoAlgorithmError(RuntimeError):
    """cuBLASLt's heuristic has no algorithm for this problem / alignment class."""


class LtHeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: algo (uint64[8]), workspaceSize, state, wavesCount, reserved[4]."""

    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspace_size", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("waves", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


assert ctypes.sizeof(LtHeuristicResult) == 96


GRAPH_AFTER = 3  # a pointer set (and alpha, beta) seen this many times gets its own graph
GRAPH_MAX = 8  # graphs per plan (captured at most this many times: bounded create cost)
LT_WS_STREAMS = 8  # streams per device that keep a cuBLASLt workspace of their own
_CAPTURE_RELAXED = 2  # cudaStreamCaptureModeRelaxed


def _runtime():
    """CuPy's Cython CUDA runtime bindings (graph launch / capture queries: no ctypes cost)."""
    from cupy_backends.cuda.api import runtime as rt

    return rt


def _find_lib(prefix: str, probe: str, names):
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


def _libcublaslt():
    """libcublasLt next to the libcublas CuPy loaded (libcublas depends on it, so it is mapped)."""
    _libcublas()
    return _find_lib("libcublasLt.so", "cublasLtMatmul", ["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"])


def _bind(lib, name, argtypes, restype=_I):
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = argtypes, restype
    return fn


class Lt:
    """One cuBLASLt handle per device, and a 32 MiB workspace per stream.

    GEMMs running at the same time on two streams must not share a workspace, so each stream
    gets its own (``stream_workspace``) for the ``LT_WS_STREAMS`` most recently used streams.
    A workspace is allocated in its stream's part of CuPy's pool (memory freed there is reused
    only by later work on that stream), and a workspace is only ever used on its stream: one
    dropped from the table here, or still held by a plan or a graph, is safe whoever frees it
    last. A call captured into a caller's own graph uses the device's fallback workspace
    (``ws_ptr``, allocated once), since nothing may be allocated during a capture. Descriptors,
    layouts and heuristics live in ``LtPlan``.
    """

    def __init__(self, device_id: int):
        from infiniop_py.cuda import runtime

        cp = runtime.cupy()
        lib = _libcublaslt()
        pvp = ctypes.POINTER(_VP)
        self.create_layout = _bind(lib, "cublasLtMatrixLayoutCreate", [pvp, _I, _U64, _U64, _I64])
        self.destroy_layout = _bind(lib, "cublasLtMatrixLayoutDestroy", [_VP])
        self.set_layout = _bind(lib, "cublasLtMatrixLayoutSetAttribute", [_VP, _I, _VP, _SZ])
        self.create_desc = _bind(lib, "cublasLtMatmulDescCreate", [pvp, _I, _I])
        self.destroy_desc = _bind(lib, "cublasLtMatmulDescDestroy", [_VP])
        self.set_desc = _bind(lib, "cublasLtMatmulDescSetAttribute", [_VP, _I, _VP, _SZ])
        self.create_pref = _bind(lib, "cublasLtMatmulPreferenceCreate", [pvp])
        self.destroy_pref = _bind(lib, "cublasLtMatmulPreferenceDestroy", [_VP])
        self.set_pref = _bind(lib, "cublasLtMatmulPreferenceSetAttribute", [_VP, _I, _VP, _SZ])
        self.heuristic = _bind(
            lib,
            "cublasLtMatmulAlgoGetHeuristic",
            [_VP, _VP, _VP, _VP, _VP, _VP, _VP, _I, ctypes.POINTER(LtHeuristicResult), ctypes.POINTER(_I)],
        )
        self.matmul = _bind(
            lib, "cublasLtMatmul", [_VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _VP, _SZ, _VP]
        )
        create = _bind(lib, "cublasLtCreate", [pvp])
        h = _VP()
        with cp.cuda.Device(device_id):
            st = create(ctypes.byref(h))
            if st != 0:
                raise RuntimeError(f"cublasLtCreate failed: status {st}")
            self.workspace = cp.cuda.alloc(LT_WORKSPACE)  # kept for the life of the process
        self.lib, self.handle = lib, h.value
        self.ws_ptr, self.ws_size = int(self.workspace.ptr), LT_WORKSPACE
        self.device_id = device_id
        self.capture_lock = threading.Lock()
        self._capture_stream = None
        self._ws = LRU(LT_WS_STREAMS)  # stream -> (memory, address) of its workspace
        self._ws_lock = threading.Lock()

    def stream_workspace(self, stream: int):
        """(memory, address) of ``stream``'s own workspace, allocated on first use; None while
        ``stream`` is being captured (the caller then uses ``ws_ptr``)."""
        with self._ws_lock:
            hit = self._ws.get(stream)
        if hit is not None:
            return hit
        rt = _RT
        try:
            if rt is None or rt.streamIsCapturing(stream):
                return None
        except Exception:  # noqa: BLE001 - e.g. the legacy stream during a global capture
            return None
        from infiniop_py.cuda import runtime

        cp = runtime.cupy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # CuPy 14 deprecates ExternalStream
            on_stream = cp.cuda.ExternalStream(stream, self.device_id)
        with cp.cuda.Device(self.device_id), on_stream:
            mem = cp.cuda.alloc(LT_WORKSPACE)
        hit = (mem, int(mem.ptr))
        with self._ws_lock:  # a concurrent first call on the same stream may replace it: both
            self._ws.put(stream, hit)  # are only used on that stream
        return hit

    def capture_stream(self) -> int:
        """A private non-blocking stream of this device, only ever used to capture graphs."""
        if self._capture_stream is None:
            from infiniop_py.cuda import runtime

            with runtime.cupy().cuda.Device(self.device_id):
                self._capture_stream = _runtime().streamCreateWithFlags(1)  # cudaStreamNonBlocking
        return self._capture_stream


_LT: dict[int, object] = {}


def lt_for(device_id: int):
    """The device's ``Lt``, or None when cuBLASLt cannot be loaded (the GemmEx path is used)."""
    lt = _LT.get(device_id, False)
    if lt is False:
        try:
            lt = Lt(device_id)
        except Exception:  # noqa: BLE001 - any failure: the GemmEx path still works
            lt = None
        _LT[device_id] = lt
    return lt


def _check(st, what):
    if st != 0:
        raise RuntimeError(f"{what} failed: status {st}")


def _alignment(ptr: int) -> int:
    """Largest power of two (at most 256) dividing a byte address."""
    return min(256, ptr & -ptr) if ptr else 256


class LtPlan:
    """One cublasLtMatmul for a ``GemmPlan`` (optionally with the BIAS epilogue), planned once.

    At create: matmul descriptor (compute type exact: CUBLAS_COMPUTE_32F for f16/bf16/f32, never
    the TF32 one; 64F for f64), the three layouts (strided batches, batch stride 0 = broadcast),
    and the heuristic's first algorithm for 256-byte aligned pointers. A call with a less aligned
    pointer asks the heuristic once for that alignment class and caches the answer. Per call:
    one ``cublasLtMatmul`` (plus, with a bias, one attribute write for its pointer).

    bias: the epilogue adds a vector along D's rows, i.e. along cuBLAS's m = ``plan.cm``; it must
    be contiguous. ``__init__`` raises when cuBLASLt has no algorithm (callers fall back).

    Graph replay: the host cost of one ``cublasLtMatmul`` (most of it inside cuBLASLt; see
    docs/perf/gemm_index.md) is paid again on every call, even with the same operands. A call whose (pointers, alpha, beta, stream) were seen ``GRAPH_AFTER``
    times is captured once on a private stream (nothing runs then) into a one-call CUDA graph
    with that stream's workspace; later calls with that key replay it with one
    ``cudaGraphLaunch`` on that stream. The graph holds the same kernel(s) with the same
    arguments (alpha/beta are read at capture), so results are bit-identical. Never used while the caller's stream is itself being captured
    (the direct call is captured then). At most ``GRAPH_MAX`` graphs per plan.
    """

    def __init__(self, lt: Lt, plan: GemmPlan, bias: bool = False):
        import weakref

        self.lt, self.plan, self.bias = lt, plan, bias
        self._lock = threading.RLock()  # heuristic look-ups and the bias pointer write
        if plan.k == 0 or plan.cm == 0 or plan.cn == 0 or plan.batch == 0:
            raise ValueError("empty GEMM: not for cuBLASLt")
        made = []  # (destroy, handle) for the finalizer
        self._made = made
        self._finalizer = weakref.finalize(self, _destroy_all, made)
        # graph replay: key (a, b, c, bias, alpha, beta, stream) -> graph exec; sightings of other keys
        self._graphs = {} if _RT is not None else None
        self._seen: dict = {}
        self._graph_ws: list = []  # the workspaces the graphs were captured with (kept alive)
        self._ws_last = (None, None)  # (stream, (memory, address)): the last stream's workspace
        scale = CUDA_R_64F if plan.compute == COMPUTE_64F else CUDA_R_32F
        d = _VP()
        _check(lt.create_desc(ctypes.byref(d), plan.compute, scale), "cublasLtMatmulDescCreate")
        made.append((lt.destroy_desc, d.value))
        self.desc = d.value
        self._set(lt.set_desc, self.desc, LT_DESC_TRANSA, _I32(plan.ta))
        self._set(lt.set_desc, self.desc, LT_DESC_TRANSB, _I32(plan.tb))
        if bias:
            self._set(lt.set_desc, self.desc, LT_DESC_EPILOGUE, _U32(LT_EPILOGUE_BIAS))
            self.bias_val = _VP(256)
            self._set(lt.set_desc, self.desc, LT_DESC_BIAS_POINTER, self.bias_val)
            self.bias_ref = ctypes.addressof(self.bias_val)
        cm, cn, k = plan.cm, plan.cn, plan.k
        a_shape = (cm, k) if plan.ta == OP_N else (k, cm)
        b_shape = (k, cn) if plan.tb == OP_N else (cn, k)
        self.la = self._layout(a_shape, plan.lda, plan.sa, made)
        self.lb = self._layout(b_shape, plan.ldb, plan.sb, made)
        self.lc = self._layout((cm, cn), plan.ldc, plan.sc, made)
        p = _VP()
        _check(lt.create_pref(ctypes.byref(p)), "cublasLtMatmulPreferenceCreate")
        made.append((lt.destroy_pref, p.value))
        self.pref = p.value
        self._set(lt.set_pref, self.pref, LT_PREF_MAX_WORKSPACE, _U64(lt.ws_size))
        self._algos: dict = {}
        self.result = self._find((256, 256, 256, 256), 0)
        self.algo = ctypes.addressof(self.result.algo)
        self.args_mm = (lt.handle, self.desc)

    @staticmethod
    def _set(fn, obj, attr, value):
        _check(fn(obj, attr, ctypes.addressof(value), ctypes.sizeof(value)), f"cuBLASLt attribute {attr}")

    def _layout(self, shape, ld, stride, made):
        lt, plan = self.lt, self.plan
        h = _VP()
        _check(lt.create_layout(ctypes.byref(h), plan.ctype, shape[0], shape[1], ld), "cublasLtMatrixLayoutCreate")
        made.append((lt.destroy_layout, h.value))
        if plan.batch > 1:
            self._set(lt.set_layout, h.value, LT_LAYOUT_BATCH_COUNT, _I32(plan.batch))
            self._set(lt.set_layout, h.value, LT_LAYOUT_BATCH_OFFSET, _I64(stride))
        return h.value

    def _find(self, aligns, bias_ptr):
        """The heuristic's first algorithm for alignment class ``aligns`` (A, B, C, D bytes)."""
        with self._lock:
            return self._find_locked(aligns, bias_ptr)

    def _find_locked(self, aligns, bias_ptr):
        lt = self.lt
        for attr, al in zip(LT_PREF_MIN_ALIGN, aligns):
            self._set(lt.set_pref, self.pref, attr, _U32(al))
        if self.bias:  # the heuristic reads the bias pointer's alignment from its value
            self.bias_val.value = bias_ptr or 256
            self._set(lt.set_desc, self.desc, LT_DESC_BIAS_POINTER, self.bias_val)
        res = LtHeuristicResult()
        count = _I(0)
        st = lt.heuristic(
            lt.handle, self.desc, self.la, self.lb, self.lc, self.lc, self.pref, 1, ctypes.byref(res), ctypes.byref(count)
        )
        key = aligns + ((_alignment(bias_ptr) if self.bias else 256),)
        if st != 0 or count.value < 1 or res.state != 0 or res.workspace_size > lt.ws_size:
            self._algos[key] = None  # remembered: callers take their fallback path
            raise LtNoAlgorithmError(f"cublasLtMatmulAlgoGetHeuristic: no algorithm (status {st}, count {count.value})")
        self._algos[key] = res
        return res

    def _workspace(self, stream: int) -> int:
        """Address of the workspace this call on ``stream`` uses (see ``Lt``)."""
        last = self._ws_last
        if last[0] == stream:
            return last[1][1]
        hit = self.lt.stream_workspace(stream)
        if hit is None:
            return self.lt.ws_ptr
        self._ws_last = (stream, hit)
        return hit[1]

    def _algo_for(self, first, second, c_ptr, bias_ptr):
        key = (_alignment(first), _alignment(second), _alignment(c_ptr), _alignment(c_ptr))
        full = key + ((_alignment(bias_ptr) if self.bias else 256),)
        res = self._algos.get(full, False)
        if res is False:
            try:
                res = self._find(key, bias_ptr)
            except LtNoAlgorithmError:
                return None
        return None if res is None else ctypes.addressof(res.algo)

    def __call__(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float, stream: int, bias_ptr: int = 0) -> bool:
        """Run on device pointers (bytes) on ``stream``. False (nothing launched) when cuBLASLt has
        no algorithm for these pointers' alignment: the caller then takes its fallback path."""
        graphs = self._graphs
        if graphs is not None:
            key = (a_ptr, b_ptr, c_ptr, bias_ptr, alpha, beta, stream)  # a graph holds its stream's workspace
            g = graphs.get(key)
            if g is not None:
                rt = _RT
                try:
                    capturing = rt.streamIsCapturing(stream)
                except Exception:  # noqa: BLE001 - e.g. legacy stream during a global capture
                    capturing = True
                if not capturing:
                    rt.graphLaunch(g, stream)
                    return True
        plan = self.plan
        if plan.alpha.value != alpha:
            plan.alpha.value = alpha
        if plan.beta.value != beta:
            plan.beta.value = beta
        if plan.swap:
            first, second = b_ptr, a_ptr
        else:
            first, second = a_ptr, b_ptr
        lt = self.lt
        ws = self._workspace(stream)
        if not self.bias:
            if (first | second | c_ptr) & 255:
                algo = self._algo_for(first, second, c_ptr, 0)
                if algo is None:
                    return False
            else:
                algo = self.algo
            st = lt.matmul(lt.handle, self.desc, plan.alpha_ptr, first, self.la, second, self.lb, plan.beta_ptr,
                           c_ptr, self.lc, c_ptr, self.lc, algo, ws, lt.ws_size, stream)  # fmt: skip
        else:
            with self._lock:
                if (first | second | c_ptr | bias_ptr) & 255:
                    algo = self._algo_for(first, second, c_ptr, bias_ptr)
                    if algo is None:
                        return False
                else:
                    algo = self.algo
                self.bias_val.value = bias_ptr
                lt.set_desc(self.desc, LT_DESC_BIAS_POINTER, self.bias_ref, 8)
                st = lt.matmul(lt.handle, self.desc, plan.alpha_ptr, first, self.la, second, self.lb, plan.beta_ptr,
                               c_ptr, self.lc, c_ptr, self.lc, algo, ws, lt.ws_size, stream)  # fmt: skip
        if st != 0:
            raise RuntimeError(f"cublasLtMatmul failed: status {st}")
        if graphs is not None and key not in graphs:  # (in graphs: the caller is capturing)
            seen = self._seen
            n = seen.get(key, 0) + 1
            if n < GRAPH_AFTER:
                if len(seen) >= 64:
                    seen.clear()
                seen[key] = n
            else:
                seen.pop(key, None)
                self._capture(key, first, second, c_ptr, algo, alpha, beta, bias_ptr, stream, ws)
        return True

    def _capture(self, key, first, second, c_ptr, algo, alpha, beta, bias_ptr, stream, ws):
        """Record this call into a one-call CUDA graph for ``key`` (see the class docstring), with
        ``stream``'s workspace ``ws`` (the graph is only replayed on ``stream``).

        Any failure switches graph replay off for this plan (the direct call already ran)."""
        graphs = self._graphs
        if len(graphs) >= GRAPH_MAX:
            return
        lt, plan, rt = self.lt, self.plan, _RT
        try:
            if rt.streamIsCapturing(stream):  # inside the caller's own capture: leave it alone
                return
            with lt.capture_lock, self._lock:
                cs = lt.capture_stream()
                plan.alpha.value, plan.beta.value = alpha, beta
                if self.bias:
                    self.bias_val.value = bias_ptr
                    lt.set_desc(self.desc, LT_DESC_BIAS_POINTER, self.bias_ref, 8)
                rt.streamBeginCapture(cs, _CAPTURE_RELAXED)
                try:
                    st = lt.matmul(lt.handle, self.desc, plan.alpha_ptr, first, self.la, second, self.lb,
                                   plan.beta_ptr, c_ptr, self.lc, c_ptr, self.lc, algo, ws, lt.ws_size, cs)  # fmt: skip
                finally:
                    g = rt.streamEndCapture(cs)
                try:
                    _check(st, "cublasLtMatmul (capture)")
                    ge = rt.graphInstantiate(g)
                finally:
                    rt.graphDestroy(g)
            self._made.append((rt.graphExecDestroy, ge))
            hit = self._ws_last[1]
            if hit is not None and hit[1] == ws:
                self._graph_ws.append(hit)
            graphs[key] = ge
        except Exception:  # noqa: BLE001 - no graphs for this plan; the direct path stays
            self._graphs = None


try:  # CuPy's Cython runtime (graph replay); None leaves graphs off
    _RT = _runtime()
except Exception:  # noqa: BLE001 - pragma: no cover - CuPy missing (CPU-only installs)
    _RT = None


def _destroy_all(made):
    for destroy, h in reversed(made):
        try:
            destroy(h)
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass
    made.clear()


def lt_plan(device_id: int, plan: GemmPlan, bias: bool = False):
    """An ``LtPlan`` for ``plan`` when cuBLASLt is loadable and has an algorithm; else None."""
    lt = lt_for(device_id)
    if lt is None:
        return None
    try:
        from infiniop_py.cuda import runtime

        with runtime.cupy().cuda.Device(device_id):
            return LtPlan(lt, plan, bias)
    except Exception:  # noqa: BLE001 - no algorithm / unsupported: the caller falls back
        return None
