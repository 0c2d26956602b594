"""cuDNN as a candidate for the dense convolutions, through NVIDIA's cuDNN frontend (``cudnn``).

``available()`` says whether the frontend package imports and a cuDNN 9 library loads. The
library is looked for where the pip wheels put it (``nvidia/cudnn/lib/libcudnn.so.9`` next to
torch, or the ``nvidia-cudnn-cu12/cu13`` packages), then on the loader path; it is loaded with
``RTLD_GLOBAL`` before the frontend is imported, so the frontend and torch use the same copy.

``CudnnConv`` builds one frontend graph for one problem at construction: forward (``fprop``, with
an optional bias fused in the graph), data gradient (``dgrad``; also the forward of a transposed
convolution) or weight gradient (``wgrad``). Tensors keep their own strides (1-d problems get a
unit spatial dimension); the compute type is f32 (f64 for f64). Plans are filtered by cuDNN's
numerical notes: f32 input never runs on TF32 tensor cores or down-converted inputs unless
``allow_tf32`` (TENSOR_CORE and DOWN_CONVERT_INPUTS excluded, as torch does with TF32 off), no
plan reduces in reduced precision (REDUCED_PRECISION_REDUCTION), f16/bf16 plans use no FFT or
Winograd transform, and ``deterministic`` excludes
NONDETERMINISTIC. Plans are proposed by cuDNN's heuristics (modes A, then FALLBACK); the first
``max_plans`` that pass (10, like torch's cudnn.benchmark_limit; None: all) are built and the
fastest is chosen by timing them on scratch buffers (``autotune.choose``; the first within 2%
wins, so heuristic order breaks ties). Built graphs are cached per problem, so a second
descriptor of the same problem builds nothing.

A call writes the pointers into a ctypes array built at construction, sets the handle's stream
if it changed, and executes the plan (one C++ call). Everything that fails at construction raises
InfiniopError(NOT_IMPLEMENTED) naming the reason, so callers fall back to their own kernels.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib
import importlib.util
import os
import site
import sys
import threading

from ..dtypes import DType
from ..lru import LRU
from ..status import InfiniopError, Status, error
from ..tensor import TensorDescriptor
from . import autotune, runtime

KINDS = ("fprop", "dgrad", "wgrad")
MIN_BACKEND = 90000  # cuDNN 9
GRAPH_CACHE_LIMIT = 64
_SONAME = "libcudnn.so.9"


# ---------------------------------------------------------------------------------------------
# locating the library and the frontend


def _site_roots() -> list[str]:
    """Folders that may hold an ``nvidia/`` wheel tree, without importing torch."""
    roots: list[str] = []
    try:
        spec = importlib.util.find_spec("nvidia")
        if spec is not None and spec.submodule_search_locations:
            roots += [os.path.dirname(p) for p in spec.submodule_search_locations]
    except Exception:  # noqa: BLE001 - a broken namespace package only hides one place to look
        pass
    try:
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.submodule_search_locations:
            roots += [os.path.dirname(p) for p in spec.submodule_search_locations]
    except Exception:  # noqa: BLE001
        pass
    for getter in (site.getsitepackages, lambda: [site.getusersitepackages()]):
        try:
            roots += list(getter())
        except Exception:  # noqa: BLE001 - missing in some virtualenv layouts
            pass
    roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    out = []
    for r in roots:
        if r and r not in out and os.path.isdir(r):
            out.append(r)
    return out


def libcudnn_candidates() -> list[str]:
    """Paths of cuDNN 9 libraries, most preferred first: the wheel layouts (``nvidia/cudnn/lib``,
    then ``nvidia/cu13|cu12/lib`` and any ``nvidia/*/lib``), torch's own ``torch/lib``, then the
    folders of ``LD_LIBRARY_PATH``. The exact soname ``libcudnn.so.9`` is preferred in a folder."""
    patterns = []
    for root in _site_roots():
        for sub in ("cudnn", "cu13", "cu12", "*"):
            patterns.append(os.path.join(root, "nvidia", sub, "lib"))
        patterns.append(os.path.join(root, "torch", "lib"))
    patterns += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    found, seen = [], set()
    for pattern in patterns:
        for folder in sorted(glob.glob(pattern)):
            exact = os.path.join(folder, _SONAME)
            names = [exact] if os.path.exists(exact) else sorted(glob.glob(os.path.join(folder, _SONAME + ".*")))
            for path in names:
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    found.append(path)
    return found


def _load_library():
    """(path, version) of the first cuDNN >= 9 that loads, else (None, reason)."""
    reasons = []
    for path in [*libcudnn_candidates(), _SONAME]:
        try:
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            lib.cudnnGetVersion.restype = ctypes.c_size_t
            version = int(lib.cudnnGetVersion())
        except (OSError, AttributeError) as exc:
            reasons.append(f"{path}: {exc}")
            continue
        if version >= MIN_BACKEND:
            return path, version
        reasons.append(f"{path}: version {version} < {MIN_BACKEND}")
    return None, "no cuDNN 9 library found (" + "; ".join(reasons) + ")"


@functools.cache
def _state() -> dict:
    """Load once: {'module', 'library', 'backend', 'frontend', 'error'}; never raises."""
    st = {"module": None, "library": None, "backend": None, "frontend": None, "error": None}
    try:
        if importlib.util.find_spec("cudnn") is None:
            st["error"] = "the cuDNN frontend package (nvidia-cudnn-frontend) is not installed"
            return st
        path, version = _load_library()
        if path is None:
            st["error"] = version
            return st
        st["library"], st["backend"] = path, version
        # The frontend dlopens the first libcudnn it finds in LD_LIBRARY_PATH (read from
        # os.environ at import): point it at the copy loaded above for the import only.
        old = os.environ.get("LD_LIBRARY_PATH")
        folder = os.path.dirname(path)
        if folder:
            os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([folder, *([old] if old else [])])
        try:
            mod = importlib.import_module("cudnn")
        finally:
            if folder:
                if old is None:
                    os.environ.pop("LD_LIBRARY_PATH", None)
                else:
                    os.environ["LD_LIBRARY_PATH"] = old
        if not hasattr(mod, "pygraph") or not hasattr(mod, "create_handle"):
            st["error"] = f"the 'cudnn' module at {getattr(mod, '__file__', '?')} is not the cuDNN frontend"
            return st
        st["frontend"] = getattr(mod, "__version__", None)
        backend = int(mod.backend_version())
        if backend < MIN_BACKEND:
            st["error"] = f"the frontend sees cuDNN {backend} (< 9)"
            return st
        st["backend"] = backend
        st["module"] = mod
    except BaseException as exc:  # noqa: BLE001 - available() must never raise
        if isinstance(exc, KeyboardInterrupt):
            raise
        st["error"] = f"{type(exc).__name__}: {exc}"
    return st


def available() -> bool:
    """True when the cuDNN frontend imports and a cuDNN 9 library is loaded. Never raises."""
    return _state()["module"] is not None


def info() -> dict:
    """Versions and library path (or why cuDNN is unavailable), for logs and benchmark records."""
    st = _state()
    return {k: st[k] for k in ("frontend", "backend", "library", "error")}


def _frontend():
    st = _state()
    if st["module"] is None:
        raise error(Status.NOT_IMPLEMENTED, f"cuDNN is unavailable: {st['error']}")
    return st["module"]


class _Handle:
    """One cuDNN handle per device, with the lock that keeps set-stream + execute together."""

    def __init__(self, cudnn, device_id: int):
        self.device_id = device_id
        with runtime.cupy().cuda.Device(device_id):
            self.handle = cudnn.create_handle()
        self.raw = int(self.handle.backend_handle)
        self.lock = threading.Lock()
        self._set_stream = cudnn.set_stream

    def set_stream(self, stream: int) -> None:
        if self.handle.stream != stream:
            self._set_stream(self.handle, stream)


_handles: dict[int, _Handle] = {}
_handles_lock = threading.Lock()


def handle(device_id: int) -> _Handle:
    h = _handles.get(device_id)
    if h is None:
        with _handles_lock:
            h = _handles.get(device_id)
            if h is None:
                h = _handles[device_id] = _Handle(_frontend(), device_id)
    return h


# ---------------------------------------------------------------------------------------------
# one convolution

_IO = {DType.F16: "HALF", DType.BF16: "BFLOAT16", DType.F32: "FLOAT", DType.F64: "DOUBLE"}
_ROLES = ("x", "w", "y", "b")


def _ints(values, n: int, what: str) -> list[int]:
    """n ints (the callers validated the attribute; a single int or 1-list broadcasts)."""
    if isinstance(values, int):
        values = (values,)
    try:
        out = [int(v) for v in values]
    except TypeError:
        raise error(Status.BAD_PARAM, f"CudnnConv: {what} must be a list of ints, got {values!r}") from None
    if len(out) == 1 and n > 1:
        out *= n
    if len(out) != n:
        raise error(Status.BAD_PARAM, f"CudnnConv: {what} {out} must hold {n} ints")
    return out


def _dims4(t: TensorDescriptor, one_d: bool) -> tuple[list[int], list[int]]:
    """dims and strides for cuDNN (at least 4-d: a 1-d problem gets a unit height)."""
    dims, strides = list(t.shape), list(t.strides)
    if one_d:
        dims.insert(2, 1)
        strides.insert(2, strides[-1] * dims[-1])
    return dims, strides


def _note(cudnn, name: str):
    for enum in ("numerical_note", "behavior_note"):
        v = getattr(getattr(cudnn, enum, None), name, None)
        if v is not None:
            return v
    return None


class _Built:
    """A built graph with its chosen plan and the fast way to execute it."""

    def __init__(self, graph, tensors, order, cpp_index, plan_index, plan_name, workspace, raw, times=None):
        self.graph = graph
        self.tensors = tensors  # role -> frontend tensor
        self.order = order  # roles in the backend's operand order (ascending uid)
        self.cpp_index = cpp_index
        self.plan_index = plan_index
        self.plan_name = plan_name
        self.workspace = workspace
        self.raw = raw  # the lowered graph's _execute_with_raw_ptrs, or None: the public execute
        self.times = times or {}  # "index:plan name" -> measured seconds per call (when tuned)


_graphs = LRU(GRAPH_CACHE_LIMIT)
_graphs_lock = threading.Lock()


class CudnnConv:
    """One cuDNN convolution, built and tuned at construction; ``__call__`` runs it.

    kind "fprop": y = conv(x, w) [+ bias]; "dgrad": x = the data gradient of dy = y through w
    (also conv_transpose's forward, with y its input and x its output); "wgrad": w = the weight
    gradient from x and dy = y. x, w, y (and bias, shape (C,)) are TensorDescriptors of one
    dtype (f16, bf16, f32, f64); w is (Cout, Cin/groups, *k). pads are symmetric.

    A transposed convolution (input X, weight (Cin, Cout/groups, *k), output Y) is
    ``CudnnConv("dgrad", x=Y, w=weight, y=X, ...)`` with the same pads, strides, dilations and
    groups; its output_padding is carried by Y's shape. ``workspace_size`` is in bytes;
    ``plan_name`` names the cuDNN engine chosen. Unsupported problems raise NOT_IMPLEMENTED.
    """

    def __init__(
        self,
        kind: str,
        x: TensorDescriptor,
        w: TensorDescriptor,
        y: TensorDescriptor,
        pads,
        strides,
        dilations,
        groups: int = 1,
        *,
        bias: TensorDescriptor | None = None,
        allow_tf32: bool = False,
        deterministic: bool = True,
        device_id: int = 0,
        max_plans: int | None = 10,
        workspace_limit: int | None = None,
        tune: bool = True,
    ):
        if kind not in KINDS:
            raise error(Status.BAD_PARAM, f"CudnnConv: kind must be one of {KINDS}, got {kind!r}")
        for name, t in (("x", x), ("w", w), ("y", y), ("bias", bias)):
            if t is not None and not isinstance(t, TensorDescriptor):
                raise error(Status.BAD_PARAM, f"CudnnConv: {name} must be a TensorDescriptor, got {type(t).__name__}")
        dt = x.dtype
        if dt not in _IO or w.dtype != dt or y.dtype != dt or (bias is not None and bias.dtype != dt):
            raise error(
                Status.NOT_IMPLEMENTED,
                f"CudnnConv: dtypes {x.dtype.name}/{w.dtype.name}/{y.dtype.name} (one of f16, bf16, f32, f64)",
            )
        nd = x.ndim
        if nd not in (3, 4, 5) or w.ndim != nd or y.ndim != nd:
            raise error(
                Status.BAD_TENSOR_SHAPE, f"CudnnConv: x, w, y must all be 3-, 4- or 5-d, got {x.ndim}, {w.ndim}, {y.ndim}"
            )
        n = nd - 2
        pads, strides, dilations = _ints(pads, n, "pads"), _ints(strides, n, "strides"), _ints(dilations, n, "dilations")
        groups = int(groups)
        if (
            groups < 1
            or x.shape[1] != w.shape[1] * groups
            or w.shape[0] % groups
            or y.shape[1] != w.shape[0]
            or x.shape[0] != y.shape[0]
        ):
            raise error(
                Status.BAD_TENSOR_SHAPE,
                f"CudnnConv: x {list(x.shape)}, w {list(w.shape)}, y {list(y.shape)} do not fit groups={groups}",
            )
        if bias is not None:
            channels = y.shape[1] if kind == "fprop" else x.shape[1]
            if kind == "wgrad" or bias.shape != (channels,):
                raise error(Status.BAD_PARAM, f"CudnnConv: a bias of shape ({channels},) goes with fprop or dgrad only")
        if 0 in x.shape or 0 in w.shape or 0 in y.shape:
            raise error(Status.NOT_IMPLEMENTED, "CudnnConv: empty tensors (nothing to compute)")
        self.kind, self.dtype, self.device_id = kind, dt, int(device_id)
        self.has_bias = bias is not None
        key = (
            kind,
            *((t.shape, t.strides) for t in (x, w, y)),
            None if bias is None else bias.strides,
            dt,
            tuple(pads),
            tuple(strides),
            tuple(dilations),
            groups,
            bool(allow_tf32),
            bool(deterministic),
            self.device_id,
            None if max_plans is None else max(int(max_plans), 1),
            workspace_limit,
            bool(tune),
        )
        with _graphs_lock:
            built = _graphs.get(key)
        if built is None:
            cudnn = _frontend()
            problem = (kind, x, w, y, bias, pads, strides, dilations, allow_tf32, deterministic, max_plans, workspace_limit, tune)
            try:
                h = handle(self.device_id)
                with runtime.cupy().cuda.Device(self.device_id):
                    built = _build(cudnn, h, key, *problem)
            except Exception as exc:  # noqa: BLE001 - anything cuDNN refuses is a fallback signal
                why = exc.message if isinstance(exc, InfiniopError) else f"{type(exc).__name__}: {exc}"
                raise error(
                    Status.NOT_IMPLEMENTED, f"CudnnConv: cuDNN refused {kind} x {x.shape_text()}, w {w.shape_text()}: {why}"
                ) from exc
            with _graphs_lock:
                _graphs.put(key, built)
        self._built = built
        self._handle = handle(self.device_id)
        self.workspace_size = built.workspace
        self.plan_name = built.plan_name
        self.plan_times = dict(built.times)
        roles = {r: i for i, r in enumerate(_ROLES)}
        self._perm = tuple(roles[r] for r in built.order)
        self._nptr = len(built.order)
        self._ptrs = (ctypes.c_void_p * max(self._nptr, 1))()
        self._ptrs_addr = ctypes.addressof(self._ptrs)
        self._multi = runtime.device_count() > 1

    def __call__(self, x_ptr: int, w_ptr: int, y_ptr: int, ws_ptr: int, stream, bias_ptr: int | None = None) -> None:
        """Run on ``stream`` (an int cudaStream_t, or anything runtime.stream_ptr takes) with raw
        device pointers; ``ws_ptr`` holds at least ``workspace_size`` bytes."""
        if self.has_bias and not bias_ptr:
            raise error(Status.NULL_POINTER, "CudnnConv: this convolution was built with a bias; bias_ptr is missing")
        s = stream if type(stream) is int else runtime.stream_ptr(stream)
        args = (x_ptr, w_ptr, y_ptr, bias_ptr)
        b, h = self._built, self._handle
        try:
            if self._multi:
                with runtime.cupy().cuda.Device(self.device_id):
                    self._locked_run(b, h, s, ws_ptr, args)
            else:
                with h.lock:  # the pointer array and the handle's stream are shared state
                    ptrs = self._ptrs
                    for j, r in enumerate(self._perm):
                        ptrs[j] = args[r]
                    if h.handle.stream != s:
                        h.set_stream(s)
                    if b.raw is not None:
                        b.raw(self._ptrs_addr, self._nptr, ws_ptr or 0, h.raw, b.cpp_index)
                    else:
                        self._public(b, h, ws_ptr)
        except InfiniopError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise error(
                Status.INTERNAL_ERROR, f"CudnnConv {self.kind}: cuDNN execution failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _locked_run(self, b: _Built, h: _Handle, s: int, ws_ptr: int, args) -> None:
        with h.lock:
            for j, r in enumerate(self._perm):
                self._ptrs[j] = args[r]
            h.set_stream(s)
            if b.raw is not None:
                b.raw(self._ptrs_addr, self._nptr, ws_ptr or 0, h.raw, b.cpp_index)
            else:
                self._public(b, h, ws_ptr)

    def _public(self, b: _Built, h: _Handle, ws_ptr: int) -> None:
        pack = {b.tensors[r]: int(self._ptrs[j] or 0) for j, r in enumerate(b.order)}
        b.graph.execute_plan_at_index(pack, ws_ptr or 0, index=b.plan_index, handle=h.handle)


def _build(
    cudnn, h, key, kind, x, w, y, bias, pads, strides, dilations, allow_tf32, deterministic, max_plans, workspace_limit, tune
) -> _Built:
    one_d = x.ndim == 3
    if one_d:
        pads, strides, dilations = [0, *pads], [1, *strides], [1, *dilations]
    dt = getattr(cudnn.data_type, _IO[x.dtype])
    compute = cudnn.data_type.DOUBLE if x.dtype == DType.F64 else cudnn.data_type.FLOAT

    def make(mode):
        g = cudnn.pygraph(io_data_type=dt, intermediate_data_type=compute, compute_data_type=compute, handle=h.handle)

        def tensor(role, desc):
            dims, st = _dims4(desc, one_d)
            return g.tensor(name=role.upper(), dim=dims, stride=st, data_type=dt)

        attrs = dict(padding=pads, stride=strides, dilation=dilations, compute_data_type=compute)
        if mode is not None:
            attrs["convolution_mode"] = mode
        tensors = {}
        if kind == "fprop":
            tensors["x"], tensors["w"] = tensor("x", x), tensor("w", w)
            out_desc, out_role = y, "y"
            out = g.conv_fprop(image=tensors["x"], weight=tensors["w"], **attrs)
        elif kind == "dgrad":
            tensors["w"], tensors["y"] = tensor("w", w), tensor("y", y)
            out_desc, out_role = x, "x"
            out = g.conv_dgrad(loss=tensors["y"], filter=tensors["w"], out_dims=_dims4(x, one_d)[0], **attrs)
        else:
            tensors["x"], tensors["y"] = tensor("x", x), tensor("y", y)
            out_desc, out_role = w, "w"
            out = g.conv_wgrad(image=tensors["x"], loss=tensors["y"], out_dims=_dims4(w, one_d)[0], **attrs)
        dims, st = _dims4(out_desc, one_d)
        if bias is not None:
            out.set_dim(dims)
            c, bs = bias.shape[0], bias.strides[0]
            rest = [1] * (len(dims) - 2)
            tensors["b"] = g.tensor(name="B", dim=[1, c, *rest], stride=[c * bs, bs, *rest], data_type=dt)
            out = g.bias(input=out, bias=tensors["b"], compute_data_type=compute)
        out.set_output(True).set_data_type(dt).set_dim(dims).set_stride(st)
        tensors[out_role] = out
        g.validate()  # lowers to the C++ graph: the frontend rejects what it cannot express here
        g.build_operation_graph()
        return g, tensors, out_role

    enum = getattr(cudnn, "convolution_mode", None) or getattr(getattr(cudnn, "_pybind_module", None), "convolution_mode", None)
    mode = getattr(enum, "CROSS_CORRELATION", None)
    try:
        g, tensors, out_role = make(mode)
    except TypeError:
        if mode is None:
            raise
        g, tensors, out_role = make(None)  # a binding without the keyword: its default is cross-correlation
    notes = []
    if deterministic:
        notes.append(_note(cudnn, "NONDETERMINISTIC"))
    if x.dtype in (DType.F32, DType.F64) and not allow_tf32:
        notes += [_note(cudnn, "TENSOR_CORE"), _note(cudnn, "DOWN_CONVERT_INPUTS")]
    notes.append(_note(cudnn, "REDUCED_PRECISION_REDUCTION"))  # accumulate in f32 (f64), never in the io type
    if x.dtype in (DType.F16, DType.BF16):  # their FFT and Winograd plans: errors of 0.5 at 1 in bf16
        notes += [_note(cudnn, n) for n in ("FFT", "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6", "WINOGRAD_TILE_13x13")]
    notes = [n for n in notes if n is not None]
    if notes:
        g.deselect_numeric_notes(notes)
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    try:
        g.check_support()  # the documented order; each plan is still tried on its own below
    except Exception:  # noqa: BLE001 - the plan loop reports what cuDNN refuses
        pass
    count = g.get_execution_plan_count()
    built, refused = [], []
    for i in range(count):
        if max_plans is not None and len(built) >= max(int(max_plans), 1):
            break
        try:
            g.build_plan_at_index(i)
            ws = int(g.get_workspace_size_plan_at_index(i))
        except Exception as exc:  # noqa: BLE001 - a plan cuDNN declines (or we filtered) is skipped
            refused.append(f"{i}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if workspace_limit is not None and ws > workspace_limit:
            refused.append(f"{i}: workspace {ws} > {workspace_limit}")
            continue
        built.append((i, ws))
    if not built:
        raise error(Status.NOT_IMPLEMENTED, f"CudnnConv: no cuDNN plan builds ({count} proposed; {'; '.join(refused[:4])})")

    # Executors: the lowered graph's raw-pointer entry (what the frontend's own execute ends in)
    # when it is there and the operand order is the graph's tensors, else the public execute.
    roles_by_uid = {t.uid: r for r, t in tensors.items()}
    order, raw = None, None
    lowered = getattr(g, "_lowered_graph", None)
    try:
        uids = list(g._variant_pack_uids() or [])
        if (
            lowered is not None
            and hasattr(lowered, "_execute_with_raw_ptrs")
            and sorted(uids) == uids
            and set(uids) == set(roles_by_uid)
        ):
            order, raw = tuple(roles_by_uid[u] for u in uids), lowered._execute_with_raw_ptrs
    except Exception:  # noqa: BLE001 - private API moved: use the public path
        order, raw = None, None
    if order is None:
        order = tuple(sorted(tensors, key=lambda r: tensors[r].uid))
    plans = g.plans
    cpp = {i: getattr(plans[i], "cpp_index", None) for i, _ in built}

    # Scratch buffers: inputs get a fixed finite pattern, the output is written.
    cp = runtime.cupy()
    descs = {"x": x, "w": w, "y": y, "b": bias}
    scratch = {r: cp.empty(max(descs[r].span_bytes, 1), dtype=cp.uint8) for r in tensors}
    for r, buf in scratch.items():
        if r != out_role:
            buf.fill(0x3C if r != "w" else 0x3B)
    ws_buf = None
    while ws_buf is None:  # plans whose workspace cannot be had are dropped, largest first
        max_ws = max(ws for _, ws in built)
        try:
            ws_buf = cp.empty(max(max_ws, 1), dtype=cp.uint8)
        except Exception:  # noqa: BLE001 - CuPy's OutOfMemoryError
            built = [(i, ws) for i, ws in built if ws < max_ws]
            if not built:
                raise
    ptr = {r: int(b.data.ptr) for r, b in scratch.items()}
    ptrs = (ctypes.c_void_p * len(order))(*[ptr[r] for r in order])
    ptrs_addr = ctypes.addressof(ptrs)
    cp.cuda.Device().synchronize()

    def public(i):
        def run(stream):
            h.set_stream(stream)
            g.execute_plan_at_index({tensors[r]: ptr[r] for r in order}, int(ws_buf.data.ptr), index=i, handle=h.handle)

        return run

    def fast(i):
        def run(stream):
            h.set_stream(stream)
            raw(ptrs_addr, len(order), int(ws_buf.data.ptr), h.raw, cpp[i])

        return run

    use_raw = raw is not None and all(cpp[i] is not None for i, _ in built)
    names = [f"{i}:{g.get_plan_name_at_index(i)}" for i, _ in built]
    out_buf = scratch[out_role]
    with h.lock:
        # Which entry runs: the raw one must write the bytes the public one writes (same plan,
        # same inputs; compared for deterministic plans). A public path that fails while the raw
        # one runs still leaves the raw one (it is what the public path ends in).
        stream = cp.cuda.get_current_stream()
        first = built[0][0]
        public_error = None
        try:
            public(first)(stream.ptr)
            stream.synchronize()
        except Exception as exc:  # noqa: BLE001
            public_error = exc
        if use_raw:
            expect = out_buf.copy()
            out_buf.fill(0)
            try:
                fast(first)(stream.ptr)
                stream.synchronize()
                if public_error is None and deterministic and not bool((out_buf == expect).all()):
                    use_raw = False
            except Exception:  # noqa: BLE001 - the raw entry failed: the public path it is
                use_raw = False
        if not use_raw and public_error is not None:
            raise public_error
        runner = fast if use_raw else public
        if tune and len(built) > 1:
            candidates = [(nm, runner(i)) for nm, (i, _) in zip(names, built)]
            winner = autotune.choose(("cudnn", key), candidates, device_id=h.device_id)
        else:
            winner = names[0]
    chosen, ws = built[names.index(winner)]
    times = autotune.last_times(("cudnn", key), h.device_id) if tune and len(built) > 1 else None
    return _Built(g, tensors, order, cpp[chosen], chosen, winner.split(":", 1)[1], ws, raw if use_raw else None, times)
