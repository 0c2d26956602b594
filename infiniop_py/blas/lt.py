"""The cuBLASLt path of the GEMMs (the default; :mod:`infiniop_py.blas.gemm` is the fallback).

One ``cublasLtMatmul`` per call with the algorithm chosen at create by cuBLASLt's heuristic
(cached per pointer-alignment class), on an Lt handle per device and a 32 MiB workspace per
stream (GEMMs running at once on two streams never share one); linear uses its BIAS epilogue.
A call repeating (pointers, alpha, beta, stream) for the third time is captured once into a
one-call CUDA graph and replayed from then on: one ``cudaGraphLaunch`` instead of the host path
inside cuBLASLt (``LtPlan``).
"""

from __future__ import annotations

import ctypes
import threading
import warnings

from ..lru import LRU
from .gemm import _I, _VP, COMPUTE_64F, OP_N, GemmPlan, find_lib, libcublas

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


def _libcublaslt():
    """libcublasLt next to the libcublas CuPy loaded (libcublas depends on it, so it is mapped)."""
    libcublas()
    return find_lib("libcublasLt.so", "cublasLtMatmul", ["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"])


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
