"""C-style entry points (``infiniopCreateAddDescriptor`` ...) generated from the registry."""

from __future__ import annotations

import re

from .descriptor import Descriptor, construct, create_descriptor, merge_named
from .registry import all_specs, by_stem
from .status import Status, error

_PATTERNS = [
    ("create", re.compile(r"^infiniopCreate(\w+)Descriptor$")),
    ("workspace", re.compile(r"^infiniopGet(\w+)WorkspaceSize$")),
    ("destroy", re.compile(r"^infiniopDestroy(\w+)Descriptor$")),
    ("calculate", re.compile(r"^infiniop(\w+)$")),
]


class DeferredDescriptor:
    """A C-style descriptor of an operator whose upstream create takes only some of its tensors
    (``OpSpec.c_create_tensors``; e.g. topksoftmax's create(x) with calculate(values, indices,
    x, topk, norm)).

    At create the given tensors are validated with a probe layout of the others from
    ``OpSpec.c_infer(given, None)``; its workspace size is the descriptor's. At calculate the
    others come from ``c_infer(given, runtime)`` and a full descriptor per distinct inferred
    layout is created once and cached (kernels compile on first use of a layout). The inferred
    layouts must not need more workspace than the probe (INSUFFICIENT_WORKSPACE otherwise).
    """

    def __init__(self, spec, handle, given: dict, attrs: dict):
        from .tensor import create_tensor_descriptor

        self.spec = spec
        self.handle = handle
        self._given = {n: None if d is None else create_tensor_descriptor(d.shape, d.strides, d.dtype) for n, d in given.items()}
        self._attrs = dict(attrs)
        self._cache: dict = {}
        self._destroyed = False
        self._ws_size = self._full(None).workspace_size

    @property
    def workspace_size(self) -> int:
        if self._destroyed:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: workspace size queried after destroy")
        return self._ws_size

    def _full(self, runtime) -> Descriptor:
        spec = self.spec
        inferred = spec.c_infer(dict(self._given), runtime)
        key = tuple(sorted((n, None if d is None else (d.shape, d.strides, d.dtype.name)) for n, d in inferred.items()))
        d = self._cache.get(key)
        if d is None:
            d = create_descriptor(spec.name, self.handle, **self._given, **inferred, **self._attrs)
            self._cache[key] = d
        return d

    def calculate(self, workspace, *args, stream=None, workspace_size: int | None = None, **kwargs):
        """``calculate(ws, *outputs, *inputs, *runtime_scalars)``, as for :class:`Descriptor`."""
        from .descriptor import parse_attrs

        spec = self.spec
        if self._destroyed:
            raise error(Status.BAD_PARAM, f"{spec.name}: calculate after destroy")
        ntensor = len(spec.tensors)
        rt_names = [a.name for a in spec.runtime]
        if len(args) > ntensor + len(rt_names):
            raise error(Status.BAD_PARAM, f"{spec.name}: too many arguments to calculate")
        named = ((k, v) for k, v in kwargs.items() if k in rt_names)
        rt_vals = merge_named(spec.name, "runtime scalar", named, dict(zip(rt_names, args[ntensor:])))
        runtime = parse_attrs(spec, spec.runtime, rt_vals, "runtime scalar")
        d = self._full(runtime)
        if d.workspace_size > self._ws_size:
            raise error(
                Status.INSUFFICIENT_WORKSPACE,
                f"{spec.name}: this call's layout needs {d.workspace_size} bytes of workspace, {self._ws_size} reported",
            )
        d.calculate(workspace, *args, stream=stream, workspace_size=workspace_size, **kwargs)

    def destroy(self) -> None:
        if self._destroyed:
            raise error(Status.BAD_PARAM, f"{self.spec.name}: descriptor already destroyed")
        self._destroyed = True
        for d in self._cache.values():
            d.destroy()
        self._cache = {}

    def __repr__(self) -> str:
        return f"<{self.spec.name} C-style descriptor (create takes {', '.join(self.spec.c_create_tensors)})>"


def _short_create(spec, handle, args, kwargs, fn: str):
    """Upstream's short create form (``OpSpec.c_create_tensors``), or None for the full form."""
    from .tensor import TensorDescriptor

    names = spec.c_create_tensors
    if not names or spec.c_infer is None:
        return None
    ntd = 0
    for a in args:
        if a is not None and not isinstance(a, TensorDescriptor):
            break
        ntd += 1
    kw_tensors = {spec.alias.get(k, k) for k in kwargs} & set(spec.role)
    if ntd + len(kw_tensors) >= len(spec.tensors):
        return None  # every tensor given: the ordinary create
    if ntd > len(names):
        raise error(Status.BAD_PARAM, f"{fn}: takes {len(names)} tensors ({', '.join(names)}), got {ntd}")
    given = dict(zip(names, args[:ntd]))
    extra = args[ntd:]
    attr_order = spec.c_attrs or tuple(a.name for a in spec.attrs)
    if len(extra) > len(attr_order):
        raise error(Status.BAD_PARAM, f"{fn}: too many arguments")
    attrs = {}
    for key, value in kwargs.items():
        name = spec.alias.get(key, key)
        if name in spec.role:
            if name not in names:
                raise error(Status.BAD_PARAM, f"{fn}: tensor '{name}' is not taken by this create (only {', '.join(names)})")
            if name in given:
                raise error(Status.BAD_PARAM, f"{fn}: tensor '{name}' given twice")
            given[name] = value
        else:
            attrs[key] = value
    merge_named(fn, "attribute", zip(attr_order, extra), attrs)
    for n in names:
        if given.get(n) is None and not spec.role[n].optional:
            raise error(Status.NULL_POINTER, f"{spec.name}: missing tensor '{n}'")
        if given.get(n) is not None and not isinstance(given[n], TensorDescriptor):
            raise error(Status.BAD_PARAM, f"{spec.name}: tensor '{n}' must be a TensorDescriptor, got {type(given[n]).__name__}")
        given.setdefault(n, None)
    return construct(DeferredDescriptor, spec, handle, given, attrs)


def _check(desc, spec, fn: str) -> Descriptor:
    if not isinstance(desc, (Descriptor, DeferredDescriptor)):
        raise error(Status.BAD_PARAM, f"{fn}: expected a descriptor, got {type(desc).__name__}")
    if desc.spec is not spec:
        raise error(Status.BAD_PARAM, f"{fn}: descriptor is for '{desc.spec.name}', not '{spec.name}'")
    return desc


def _make(kind: str, spec):
    stem = spec.stem
    if kind == "create":

        def create(handle, *args, **kwargs):
            short = _short_create(spec, handle, args, kwargs, create.__name__)
            if short is not None:
                return short
            if spec.c_create_args:  # upstream interleaves tensors and attributes (e.g. index_copy)
                if len(args) > len(spec.c_create_args):
                    raise error(Status.BAD_PARAM, f"{create.__name__}: too many arguments")
                merge_named(create.__name__, "argument", zip(spec.c_create_args, args), kwargs)
                args = ()
            elif spec.c_attrs:  # upstream's positional attribute order differs from the Pythonic one
                ntensor = len(spec.tensors)
                extra, args = args[ntensor:], args[:ntensor]
                if len(extra) > len(spec.c_attrs):
                    raise error(Status.BAD_PARAM, f"{create.__name__}: too many arguments")
                merge_named(create.__name__, "attribute", zip(spec.c_attrs, extra), kwargs)
            return create_descriptor(spec.name, handle, *args, **kwargs)

        fn = create
        fn.__name__ = f"infiniopCreate{stem}Descriptor"
    elif kind == "workspace":

        def workspace(desc):
            return _check(desc, spec, workspace.__name__).workspace_size

        fn = workspace
        fn.__name__ = f"infiniopGet{stem}WorkspaceSize"
    elif kind == "destroy":

        def destroy(desc):
            _check(desc, spec, destroy.__name__).destroy()

        fn = destroy
        fn.__name__ = f"infiniopDestroy{stem}Descriptor"
    else:
        ntensor = len(spec.tensors)
        nrt = len(spec.runtime)

        def calculate(desc, *args, stream=None, **kwargs):
            _check(desc, spec, calculate.__name__)
            if spec.c_workspace_args:
                if len(args) < 2:
                    raise error(Status.BAD_PARAM, f"{calculate.__name__}: expected workspace and workspace_size")
                ws, ws_size, rest = args[0], args[1], args[2:]
                if not isinstance(ws_size, int) or isinstance(ws_size, bool) or ws_size < 0:
                    raise error(Status.BAD_PARAM, f"{calculate.__name__}: workspace_size must be a non-negative int")
            else:
                ws, ws_size, rest = None, 0, args
            if len(rest) == ntensor + nrt + 1 and stream is None:
                stream, rest = rest[-1], rest[:-1]
            elif len(rest) > ntensor + nrt:
                raise error(Status.BAD_PARAM, f"{calculate.__name__}: too many arguments")
            desc.calculate(ws, *rest, stream=stream, workspace_size=ws_size, **kwargs)

        fn = calculate
        fn.__name__ = f"infiniop{stem}"
    fn.__qualname__ = fn.__name__
    fn.__doc__ = f"C-style {kind} for operator '{spec.name}' (see ops.md)."
    return fn


def lookup(name: str):
    """Return the generated C-style function called ``name``, or None."""
    stems = by_stem()
    for kind, pattern in _PATTERNS:
        m = pattern.match(name)
        if m and m.group(1) in stems:
            spec = stems[m.group(1)]
            if kind == "workspace" and not spec.c_workspace_args:
                return None
            return _make(kind, spec)
    return None


def all_names() -> list[str]:
    names = []
    for spec in all_specs():
        for s in (spec.stem, *spec.stem_aliases):
            names += [f"infiniopCreate{s}Descriptor", f"infiniop{s}", f"infiniopDestroy{s}Descriptor"]
            if spec.c_workspace_args:
                names.append(f"infiniopGet{s}WorkspaceSize")
    return sorted(names)
