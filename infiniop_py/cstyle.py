"""C-style entry points (``infiniopCreateAddDescriptor`` ...) generated from the registry."""

from __future__ import annotations

import re

from .descriptor import Descriptor, create_descriptor
from .registry import all_specs, by_stem
from .status import Status, error

_PATTERNS = [
    ("create", re.compile(r"^infiniopCreate(\w+)Descriptor$")),
    ("workspace", re.compile(r"^infiniopGet(\w+)WorkspaceSize$")),
    ("destroy", re.compile(r"^infiniopDestroy(\w+)Descriptor$")),
    ("calculate", re.compile(r"^infiniop(\w+)$")),
]


def _check(desc, spec, fn: str) -> Descriptor:
    if not isinstance(desc, Descriptor):
        raise error(Status.BAD_PARAM, f"{fn}: expected a descriptor, got {type(desc).__name__}")
    if desc.spec is not spec:
        raise error(Status.BAD_PARAM, f"{fn}: descriptor is for '{desc.spec.name}', not '{spec.name}'")
    return desc


def _make(kind: str, spec):
    stem = spec.stem
    if kind == "create":

        def create(handle, *args, **kwargs):
            if spec.c_create_args:  # upstream interleaves tensors and attributes (e.g. index_copy)
                if len(args) > len(spec.c_create_args):
                    raise error(Status.BAD_PARAM, f"{create.__name__}: too many arguments")
                for key, value in zip(spec.c_create_args, args):
                    if key in kwargs:
                        raise error(Status.BAD_PARAM, f"{create.__name__}: argument '{key}' given twice")
                    kwargs[key] = value
                args = ()
            elif spec.c_attrs:  # upstream's positional attribute order differs from the Pythonic one
                ntensor = len(spec.tensors)
                extra, args = args[ntensor:], args[:ntensor]
                if len(extra) > len(spec.c_attrs):
                    raise error(Status.BAD_PARAM, f"{create.__name__}: too many arguments")
                for key, value in zip(spec.c_attrs, extra):
                    if key in kwargs:
                        raise error(Status.BAD_PARAM, f"{create.__name__}: attribute '{key}' given twice")
                    kwargs[key] = value
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
