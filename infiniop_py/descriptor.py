"""The operator descriptor: create (validate + plan + compile) -> workspace -> calculate -> destroy."""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from .buffers import IMMUTABLE_VIEWS, REVALIDATED_VIEWS, address, host_view
from .devices import Device, Handle
from .dtypes import INFO, DType
from .spec import REQUIRED, Checker, Info, OpSpec
from .status import InfiniopError, Status, error
from .tensor import TensorDescriptor


def merge_named(fn: str, what: str, pairs, into: dict) -> dict:
    """Add the (name, value) ``pairs`` to ``into`` and return it; a name already there is
    BAD_PARAM "<fn>: <what> '<name>' given twice" (a value given both by position and by keyword)."""
    for key, value in pairs:
        if key in into:
            raise error(Status.BAD_PARAM, f"{fn}: {what} '{key}' given twice")
        into[key] = value
    return into


def construct(cls, spec: OpSpec, *args):
    """``cls(spec, *args)`` (a descriptor); an exception other than InfiniopError, a bug, becomes
    INTERNAL_ERROR naming the operator."""
    try:
        return cls(spec, *args)
    except InfiniopError:
        raise
    except Exception as exc:
        raise error(Status.INTERNAL_ERROR, f"{spec.name}: create failed: {type(exc).__name__}: {exc}") from exc


def _bind(spec: OpSpec, what: str, roles, args, kwargs, allow_missing_optional=True) -> dict:
    """Bind positional/keyword arguments to roles (names or aliases)."""
    names = [r.name for r in roles]
    if len(args) > len(names):
        raise error(Status.BAD_PARAM, f"{spec.name}: {what} takes {len(names)} tensors, got {len(args)}")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        key = spec.alias.get(key, key)
        if key not in names:
            raise error(Status.BAD_PARAM, f"{spec.name}: unknown tensor argument '{key}' for {what}")
        if key in bound:
            raise error(Status.BAD_PARAM, f"{spec.name}: tensor '{key}' given twice")
        bound[key] = value
    for r in roles:
        if r.name not in bound:
            if r.optional and allow_missing_optional:
                bound[r.name] = None
            else:
                raise error(Status.NULL_POINTER, f"{spec.name}: missing tensor '{r.name}'")
    return bound


def parse_attrs(spec: OpSpec, attrs: tuple, values: dict, what: str = "attribute") -> dict:
    out = {}
    table = {a.name: a for a in attrs}
    alias = {al: a.name for a in attrs for al in a.aliases}
    for key, value in values.items():
        key = alias.get(key, key)
        if key not in table:
            raise error(Status.BAD_PARAM, f"{spec.name}: unknown {what} '{key}'")
        out[key] = table[key].coerce(value, spec.name)
    for a in attrs:
        if a.name not in out:
            if a.default is REQUIRED:
                raise error(Status.BAD_PARAM, f"{spec.name}: missing {what} '{a.name}'")
            out[a.name] = a.default
    return out


class Descriptor:
    """An operator instance bound to a handle and fixed tensor layouts.

    Created by :func:`infiniop_py.create_descriptor`; use as a context manager or call
    :meth:`destroy`. All validation and kernel compilation happen at creation.
    """

    def __init__(self, spec: OpSpec, handle: Handle, tensors: dict, attrs: dict):
        if not isinstance(handle, Handle):
            raise error(Status.BAD_PARAM, f"{spec.name}: first argument must be a handle, got {type(handle).__name__}")
        handle.check_alive(spec.name)
        self.spec = spec
        self.handle = handle
        for name, desc in tensors.items():
            if desc is not None and not isinstance(desc, TensorDescriptor):
                raise error(
                    Status.BAD_PARAM, f"{spec.name}: tensor '{name}' must be a TensorDescriptor, got {type(desc).__name__}"
                )
            if desc is None and not spec.role[name].optional:
                raise error(Status.NULL_POINTER, f"{spec.name}: tensor '{name}' is required")
            if desc is not None and desc.dtype not in INFO:  # e.g. INVALID, set behind validation's back
                raise error(Status.BAD_TENSOR_DTYPE, f"{spec.name}: tensor '{name}' has dtype {desc.dtype!r}")
        parsed = parse_attrs(spec, spec.attrs, attrs)
        # Canonical (spec) order: backends index tensor pointers by this order, whatever order
        # the caller named the tensors in.
        tensors = {t.name: tensors.get(t.name) for t in spec.tensors}
        check = Checker(spec.name, tensors, parsed, handle.device)
        info = spec.validate(check)
        if not isinstance(info, Info):
            info = Info(spec.name, tensors, parsed)
        self.info = info
        gpu = handle.device is Device.NVIDIA
        factory = spec.nvidia if gpu else spec.cpu
        if factory is None:
            raise error(Status.NOT_IMPLEMENTED, f"{spec.name}: no {handle.device.name} backend")
        if gpu:
            from .buffers import register_fast_types

            register_fast_types()
            self._kernel = factory(info, handle)
        else:
            self._kernel = _CpuKernel(info, [t.name for t in spec.tensors], factory(info))
        self._ws_size = int(getattr(self._kernel, "workspace_size", 0))
        # Precomputed per-tensor facts for the calculate fast path.
        self._gpu = gpu
        self._dev = handle.device_id
        order = [t.name for t in spec.tensors]
        self._names = order
        self._nbytes = [info.tensors[n].span_bytes if info.tensors.get(n) is not None else 0 for n in order]
        self._write = [spec.role[n].is_output for n in order]
        self._present = [info.tensors.get(n) is not None for n in order]
        self._facts = list(zip(order, self._nbytes, self._write, self._present, strict=True))
        self._pairs = overlap_pairs(spec, info, order)
        # CPU, no workspace: the NumPy-view fast path of calculate (None: always the general path)
        self._np_slots = None if gpu or self._ws_size else numpy_slots(spec, info, order)
        # weak references to the arrays of the last NumPy-view call (none yet)
        self._np_last = (_NOREF,) * len(order)
        self._last = [None] * len(order)  # (weakref, address) of the last buffer per tensor
        self._ws_last = None  # (weakref, address, revalidator) of the last checked workspace
        self._nrt = len(spec.runtime)
        # Runtime scalars that all have defaults may be omitted positionally: their parsed
        # defaults, precomputed (None if one is required; () when every default is None, e.g.
        # sum's C-style repeats, so kernels see "nothing given").
        self._rt_defaults = None
        if spec.runtime and all(a.default is not REQUIRED for a in spec.runtime):
            vals = tuple(a.coerce(a.default, spec.name) for a in spec.runtime)
            self._rt_defaults = () if all(v is None for v in vals) else vals
        self._rt_floats = all(a.kind == "float" and a.choices is None for a in spec.runtime)
        # calls giving just the tensors, which need no binding: their count and runtime scalars
        plain = self._np_slots is not None and (not spec.runtime or self._rt_defaults is not None)
        self._np_nargs = len(order) if plain else -1
        self._np_rt = self._rt_defaults if spec.runtime else ()
        # One call at a time per descriptor: kernels keep per-call host state (the packed pointer
        # slots of each launch, runtime scalars written into parameter blocks, per-stream ticket
        # arrays), so calls from several threads take turns for the few microseconds of enqueueing
        # (each on its own stream; the GPU work still overlaps).
        lock = threading.Lock()
        self._acquire, self._release = lock.acquire, lock.release
        self._destroyed = False

    # -- lifecycle -----------------------------------------------------------------------
    def destroy(self) -> None:
        if self._destroyed:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: descriptor already destroyed")
        self._destroyed = True
        # Drop the kernel (its device memory and cached host views) and every remembered buffer.
        self._kernel = None
        self._last = [None] * len(self._names)
        self._ws_last = None
        self._np_last = (_NOREF,) * len(self._names)

    @property
    def plan(self) -> str | None:
        """Name of the plan the backend chose at create, for operators whose backends name
        their plans (a ``plan_name`` on the NVIDIA kernel or on the CPU function); else None."""
        kernel = self._kernel
        if kernel is None:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: plan query after destroy")
        return getattr(getattr(kernel, "fn", kernel), "plan_name", None)

    @property
    def workspace_size(self) -> int:
        """Bytes of workspace that calculate needs (BAD_PARAM once destroyed or its handle is)."""
        if self._destroyed:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: workspace size query after destroy")
        self.handle.check_alive(self.spec.name)
        return self._ws_size

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self._destroyed:
            self.destroy()

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else self.handle.name
        return f"<{self.spec.name} descriptor on {state}>"

    # -- calculate -----------------------------------------------------------------------
    def calculate(self, workspace, *args, stream=None, workspace_size: int | None = None, **kwargs):
        """Run the operator: ``calculate(ws, *outputs, *inputs, *runtime_scalars, stream=None)``."""
        kernel = self._kernel
        if kernel is None:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: calculate after destroy")
        if self.handle._destroyed:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: calculate after its handle was destroyed")
        nargs = len(args)
        np_views = self._np_slots is not None
        if np_views and nargs == self._np_nargs and not kwargs:
            # CPU, only the tensors given (no runtime scalars, or all at their defaults): the
            # NumPy-view path with the least work in front of it
            views = self._numpy_views(args)
            if views is not None:
                self._acquire()
                try:
                    kernel.call_views(views, self._np_rt)
                finally:
                    self._release()
                return
            np_views = False  # these buffers take the general path
        ntensor = len(self._names)
        if kwargs:
            args, rt = self._bind_call(args, kwargs)
        elif nargs == ntensor + self._nrt:
            if self._nrt:
                rt = args[ntensor:]
                args = args[:ntensor]
                if self._rt_floats:  # all plain float attributes: a Python float needs no conversion
                    for v in rt:
                        if type(v) is not float:
                            rt = self._coerce_rt(rt)
                            break
                else:
                    rt = self._coerce_rt(rt)
            else:
                rt = ()
        elif nargs == ntensor and self._rt_defaults is not None:
            rt = self._rt_defaults
        else:
            args, rt = self._bind_call(args, kwargs)
        if np_views:
            views = self._numpy_views(args)
            if views is not None:
                self._acquire()
                try:
                    kernel.call_views(views, rt)
                finally:
                    self._release()
                return
        ptrs = []
        append = ptrs.append
        cache = self._last
        i = 0
        for buf in args:
            hit = cache[i]
            if hit is not None and hit[0]() is buf and (hit[2] is None or hit[2](buf) == hit[1]):
                append(hit[1])  # same object as last call, same address: already checked
            else:
                append(self._check_buffer(i, buf))
            i += 1
        # Outputs against every other tensor: byte spans [p, p + span) that meet are refused
        # unless they are an in-place pair at the same address (same layout, checked at create).
        for i, j, ni, nj, same in self._pairs:
            pi = ptrs[i]
            pj = ptrs[j]
            if pi < pj + nj and pj < pi + ni and not (same and pi == pj):
                self._check_overlap(i, j, pi, pj)
        need = self._ws_size
        if need:
            if workspace_size is not None and workspace_size < need:
                raise error(
                    Status.INSUFFICIENT_WORKSPACE,
                    f"{self.spec.name}: workspace of {workspace_size} bytes, {need} required",
                )
            if workspace is None:
                raise error(Status.INSUFFICIENT_WORKSPACE, f"{self.spec.name}: no workspace given, {need} bytes required")
            hit = self._ws_last
            if hit is not None and hit[0]() is workspace and (hit[2] is None or hit[2](workspace) == hit[1]):
                ws_ptr = hit[1]  # same object, same address as last call: extent already checked
            else:
                ws_ptr = self._check_workspace(workspace, need)
        else:
            ws_ptr = 0
        self._acquire()
        try:
            kernel(ptrs, ws_ptr, rt, stream)
        finally:
            self._release()

    def _numpy_views(self, args):
        """CPU: when every buffer is a NumPy array laid out exactly as its descriptor (shape,
        byte strides, dtype; outputs writable) and no output may share memory with another
        buffer, the arrays themselves are the kernel's views: no address, extent or overlap
        arithmetic, and no view to rebuild. Anything else (raw addresses, other layouts,
        possible overlaps such as in-place calls) returns None: the general path checks it."""
        views = {}
        ndarray = np.ndarray
        same = True
        for buf, (name, layout), ref in zip(args, self._np_slots, self._np_last):
            if layout is None:  # absent at create
                if buf is not None:
                    return None
                views[name] = None
                continue
            shape, strides, dtype, write = layout
            if type(buf) is not ndarray or buf.shape != shape or buf.strides != strides:
                return None
            d = buf.dtype
            if (d is not dtype and d != dtype) or (write and not buf.flags.writeable):
                return None
            views[name] = buf
            if ref() is not buf:
                same = False
        # The same array objects as the last call, with the layouts just checked, still do not
        # overlap: a view's address never changes, and an array owning its memory (the only kind
        # resize can move) moves within its own allocation.
        if same:
            return views
        share = np.may_share_memory
        for i, j, _, _, _ in self._pairs:
            if share(args[i], args[j]):
                return None
        self._np_last = tuple([_NOREF if b is None else weakref.ref(b) for b in args])
        return views

    def _coerce_rt(self, values) -> tuple:
        op = self.spec.name
        return tuple([a.coerce(v, op) for a, v in zip(self.spec.runtime, values)])

    def _check_buffer(self, i: int, buf) -> int:
        """Address of tensor ``i``'s buffer after the full check; remembers it for the next call."""
        name, nbytes, write, present = self._facts[i]
        op = self.spec.name
        if present:
            ptr = address(buf, op, name, nbytes, self._gpu, self._dev, write)
            kind = type(buf)
            if kind in IMMUTABLE_VIEWS:
                self._last[i] = (weakref.ref(buf), ptr, None)
            elif kind in REVALIDATED_VIEWS:
                self._last[i] = (weakref.ref(buf), ptr, kind.data_ptr)  # unbound: holds no reference
            return ptr
        if buf is None:
            return 0
        raise error(Status.BAD_PARAM, f"{op}: tensor '{name}' was absent at create but a buffer was given")

    def _check_overlap(self, i: int, j: int, pi: int, pj: int) -> None:
        """Tensors ``i`` (an output) and ``j`` have meeting byte spans: raise unless provably disjoint."""
        a = self.info.tensors[self._names[i]]
        b = self.info.tensors[self._names[j]]
        if interleaved_disjoint(a, pi, b, pj):
            return
        op, n, m = self.spec.name, self._names[i], self._names[j]
        kind = "output" if self._write[j] else "input"
        pair = (n, m) in self.spec.inplace or (m, n) in self.spec.inplace
        if pair and pi == pj and a.shape == b.shape and a.strides == b.strides:
            why = f"in place needs one element size, got {a.dtype.name} and {b.dtype.name}"
        elif pair:
            why = "in place needs the same address, shape and strides"
        elif kind == "input":
            why = f"{op} has no in-place pair ('{n}', '{m}')"
        else:
            why = "two outputs may not share memory"
        raise error(
            Status.BAD_TENSOR_STRIDES,
            f"{op}: output '{n}' ({a.shape_text()} at {pi:#x}, {a.span_bytes} bytes) overlaps {kind} '{m}' "
            f"({b.shape_text()} at {pj:#x}, {b.span_bytes} bytes): {why}",
        )

    def _check_workspace(self, workspace, need: int) -> int:
        """Address of a workspace buffer that holds at least ``need`` bytes."""
        op = self.spec.name
        ws_ptr = address(workspace, op, "workspace", 0, self._gpu, self._dev, True)
        if not isinstance(workspace, int):
            from .buffers import describe

            ext = describe(workspace)[3]
            if ext is not None and ext < need:
                raise error(Status.INSUFFICIENT_WORKSPACE, f"{op}: workspace of {ext} bytes, {need} required")
            kind = type(workspace)
            if kind in IMMUTABLE_VIEWS:
                self._ws_last = (weakref.ref(workspace), ws_ptr, None)
            elif kind in REVALIDATED_VIEWS:  # torch: reused while data_ptr() is unchanged
                self._ws_last = (weakref.ref(workspace), ws_ptr, kind.data_ptr)
        return ws_ptr

    def _bind_call(self, args, kwargs):
        spec = self.spec
        ntensor = len(self._names)
        tensors = args[:ntensor]
        rt_pos = args[ntensor:]
        tkw = {k: v for k, v in kwargs.items() if spec.alias.get(k, k) in spec.role}
        rkw = {k: v for k, v in kwargs.items() if k not in tkw}
        bound = _bind(spec, "calculate", spec.tensors, tensors, tkw)
        if len(rt_pos) > len(spec.runtime):
            raise error(Status.BAD_PARAM, f"{spec.name}: too many arguments to calculate")
        rt_vals = merge_named(spec.name, "runtime scalar", rkw.items(), dict(zip((a.name for a in spec.runtime), rt_pos)))
        rt = parse_attrs(spec, spec.runtime, rt_vals, "runtime scalar")
        return [bound[n] for n in self._names], tuple(a.coerce(rt[a.name], spec.name) for a in spec.runtime)


def _NOREF():  # noqa: N802 - stands in for a weak reference to an absent (None) buffer
    return None


def numpy_slots(spec: OpSpec, info: Info, order: list[str]):
    """Per tensor of a CPU descriptor: ``(name, (shape, byte strides, NumPy dtype, output?))``,
    or ``(name, None)`` if absent, for the NumPy-view fast path of calculate (None when a tensor
    is empty or its dtype has no NumPy equivalent: the general path handles those)."""
    from .dtypes import to_numpy

    slots = []
    for n in order:
        d = info.tensors.get(n)
        if d is None:
            slots.append((n, None))
            continue
        try:
            npd = to_numpy(d.dtype)
        except Exception:
            return None
        if d.numel == 0:
            return None
        slots.append((n, (tuple(d.shape), tuple(s * npd.itemsize for s in d.strides), npd, spec.role[n].is_output)))
    return tuple(slots)


def overlap_pairs(spec: OpSpec, info: Info, order: list[str]) -> tuple:
    """``(i, j, span_i, span_j, same)`` for every output ``i`` and other tensor ``j`` (pairs of
    outputs once) that calculate checks for overlap; ``same``: the pair may alias at one address
    (declared in place by the operator, identical shape, strides and element size). Absent and
    empty tensors occupy no memory and are left out; inputs may alias each other freely."""
    allowed = {tuple(p) for p in spec.inplace} | {(b, a) for a, b in spec.inplace}
    descs = [info.tensors.get(n) for n in order]
    pairs = []
    for i, n in enumerate(order):
        a = descs[i]
        if a is None or not spec.role[n].is_output or a.numel == 0:
            continue
        for j, m in enumerate(order):
            b = descs[j]
            if j == i or b is None or b.numel == 0 or (spec.role[m].is_output and j < i):
                continue
            same = (n, m) in allowed and a.shape == b.shape and a.strides == b.strides and a.itemsize == b.itemsize
            pairs.append((i, j, a.span_bytes, b.span_bytes, same))
    return tuple(pairs)


def interleaved_disjoint(a: TensorDescriptor, pa: int, b: TensorDescriptor, pb: int) -> bool:
    """True when tensors ``a`` at address ``pa`` and ``b`` at ``pb`` provably share no byte
    although their spans meet: every element of either starts at its base plus a multiple of
    ``g``, the gcd of all their byte strides, so their bytes fill the residues ``[pa, pa + size)``
    and ``[pb, pb + size)`` modulo ``g``; if those do not meet, the tensors are disjoint (e.g. the
    even and odd columns of one matrix). Exact for such interleavings, conservative otherwise."""
    g = 0
    for t in (a, b):
        for d, s in zip(t.shape, t.strides, strict=True):
            if d > 1:
                g = math.gcd(g, s * t.itemsize)
    if g == 0:
        return False  # single elements: the spans are exact
    diff = (pb - pa) % g
    return diff >= a.itemsize and g - diff >= b.itemsize


class _CpuKernel:
    """Adapts a NumPy implementation ``fn(views, workspace, runtime)`` to the pointer interface.

    The NumPy view of each tensor is rebuilt only when its address changes: at a given address
    the caller's buffer was just checked to cover the descriptor's span, so a view made for
    that address earlier describes the same memory.
    """

    def __init__(self, info: Info, order: list[str], fn):
        self.info = info
        self.fn = fn
        self.slots = [(name, info.tensors.get(name)) for name in order]
        self.last = [None] * len(order)
        self.workspace_size = getattr(fn, "workspace_size", 0)
        self.ws_desc = None
        if self.workspace_size:
            self.ws_desc = TensorDescriptor((self.workspace_size,), (1,), DType.U8)

    def call_views(self, views: dict, rt, ws=None) -> None:
        """Run on ``views``: the caller's arrays themselves (see Descriptor._numpy_views) or the
        views :meth:`__call__` made from addresses."""
        try:
            self.fn(views, ws, rt)
        except InfiniopError:
            raise
        except Exception as exc:  # never let a NumPy error escape the public API
            raise error(Status.INTERNAL_ERROR, f"{self.info.op}: CPU backend failed: {type(exc).__name__}: {exc}") from exc

    def __call__(self, ptrs, ws_ptr, rt, stream):
        views = {}
        last = self.last
        for i, ((name, desc), ptr) in enumerate(zip(self.slots, ptrs, strict=True)):
            if desc is None:
                views[name] = None
                continue
            hit = last[i]
            if hit is not None and hit[0] == ptr:
                views[name] = hit[1]
            else:
                view = host_view(ptr, desc)
                last[i] = (ptr, view)
                views[name] = view
        ws = None
        if self.workspace_size:
            import numpy as np

            ws = host_view(ws_ptr, self.ws_desc) if ws_ptr else np.empty(self.workspace_size, np.uint8)
        self.call_views(views, rt, ws)


def check_attr_names(spec, attrs) -> None:
    """BAD_PARAM naming any keyword that is neither a tensor of ``spec`` nor one of its attributes
    (a misspelt attribute would otherwise be ignored and its default used)."""
    unknown = [k for k in attrs if k not in spec.attr]
    if unknown:
        known = ", ".join(a.name for a in spec.attrs) or "none"
        raise error(Status.BAD_PARAM, f"{spec.name}: unknown argument(s) {', '.join(map(repr, unknown))} (attributes: {known})")


def create_descriptor(name: str, handle: Handle, *tensors, **kwargs) -> Descriptor:
    """Generic create: ``create_descriptor("add", h, c_desc, a_desc, b_desc, **attrs)``.

    Positional arguments are the tensor descriptors (outputs, then inputs, per ops.md), then
    attributes in declaration order; keywords may name tensors (or their aliases) and attributes.
    """
    from .registry import get_spec

    spec = get_spec(name)
    ntensor = len(spec.tensors)
    tdescs, attr_pos = tensors[:ntensor], tensors[ntensor:]
    if len(attr_pos) > len(spec.attrs):
        raise error(Status.BAD_PARAM, f"{spec.name}: too many positional arguments to create")
    tkw = {k: v for k, v in kwargs.items() if spec.alias.get(k, k) in spec.role}
    akw = {k: v for k, v in kwargs.items() if k not in tkw}
    check_attr_names(spec, akw)
    bound = _bind(spec, "create", spec.tensors, tdescs, tkw)
    attrs = merge_named(spec.name, "attribute", akw.items(), dict(zip((a.name for a in spec.attrs), attr_pos)))
    return construct(Descriptor, spec, handle, bound, attrs)
