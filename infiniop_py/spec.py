"""How an operator is declared: tensor roles, attributes, dtypes, backends, reference.

An operator folder ``ops/<name>/__init__.py`` defines ``SPEC = OpSpec(...)``; the registry
discovers it. Everything else (descriptors, C-style names, the GGUF runner, the generic tests,
the docs table) reads the spec, so nothing is listed by hand anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .dtypes import DType
from .status import Status, error
from .tensor import TensorDescriptor


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class TensorRole:
    """One tensor argument.

    role: "out" (pure output, poisoned by the runner), "in", or "inout" (an output whose
    prior value is read: it starts from stored data or from ``init``).
    compare: how an output is checked: "tolerance", "exact", "bitwise", "index", or "auto"
    (tolerance for floating dtypes, exact otherwise).
    """

    name: str
    role: str = "in"
    optional: bool = False
    aliases: tuple[str, ...] = ()
    init: float | None = None
    compare: str = "auto"

    @property
    def is_output(self) -> bool:
        return self.role in ("out", "inout")


def out(name: str, **kw) -> TensorRole:
    return TensorRole(name, "out", **kw)


def inp(name: str, **kw) -> TensorRole:
    return TensorRole(name, "in", **kw)


def inout(name: str, **kw) -> TensorRole:
    return TensorRole(name, "inout", **kw)


@dataclass(frozen=True)
class Attr:
    """A create-time attribute (or, in ``OpSpec.runtime``, a calculate-time scalar).

    kind: "int", "float", "bool", "ints", "str".
    """

    name: str
    kind: str
    default: Any = REQUIRED
    aliases: tuple[str, ...] = ()
    choices: tuple | None = None
    doc: str = ""

    def coerce(self, value, op: str):
        """Convert a Python value to this attribute's kind; BAD_PARAM if it does not fit."""
        if type(value) is float and self.kind == "float" and self.choices is None:
            return value  # fast path (runtime scalars on every calculate): nothing to convert
        import numpy as np

        where = f"{op}: attribute '{self.name}'"
        if value is None and self.default is None:
            return None  # an optional attribute / runtime scalar left unset
        try:
            if self.kind == "int":
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                    raise TypeError
                value = int(value)
            elif self.kind == "float":
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                    raise TypeError
                value = float(value)
            elif self.kind == "bool":
                if isinstance(value, (bool, np.bool_)):
                    value = bool(value)
                elif isinstance(value, (int, np.integer)) and int(value) in (0, 1):
                    value = bool(value)
                else:
                    raise TypeError
            elif self.kind == "ints":
                if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                    value = (int(value),)
                else:
                    items = tuple(value)
                    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in items):
                        raise TypeError
                    value = tuple(int(v) for v in items)
            elif self.kind == "str":
                if not isinstance(value, str):
                    raise TypeError
            else:  # pragma: no cover - spec bug
                raise error(Status.INTERNAL_ERROR, f"{where}: unknown kind {self.kind}")
        except TypeError:
            raise error(Status.BAD_PARAM, f"{where} must be {self.kind}, got {value!r}") from None
        if self.choices is not None and value not in self.choices:
            raise error(Status.BAD_PARAM, f"{where} must be one of {list(self.choices)}, got {value!r}")
        return value


class Info:
    """Frozen result of validation: tensor descriptors, attributes and derived values."""

    def __init__(self, op: str, tensors: dict, attrs: dict, **derived):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "tensors", MappingProxyType(dict(tensors)))
        object.__setattr__(self, "attrs", MappingProxyType(dict(attrs)))
        for k, v in derived.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, key, value):
        raise AttributeError("Info is frozen")

    def __getitem__(self, name: str) -> TensorDescriptor | None:
        return self.tensors[name]

    def derive(self, **more) -> Info:
        extra = {k: v for k, v in self.__dict__.items() if k not in ("op", "tensors", "attrs")}
        extra.update(more)
        return Info(self.op, self.tensors, self.attrs, **extra)


class Checker:
    """Helpers for an operator's ``validate``: every failure names the op and the argument."""

    def __init__(self, op: str, tensors: dict[str, TensorDescriptor | None], attrs: dict, device):
        self.op = op
        self.tensors = tensors
        self.attrs = attrs
        self.device = device

    def fail(self, status: Status, message: str):
        raise error(status, f"{self.op}: {message}")

    def __getitem__(self, name: str) -> TensorDescriptor | None:
        return self.tensors.get(name)

    def dtype_in(self, name: str, allowed) -> DType:
        d = self.tensors[name]
        if d.dtype not in allowed:
            names = ", ".join(sorted(x.name for x in allowed))
            self.fail(Status.BAD_TENSOR_DTYPE, f"tensor '{name}' dtype {d.dtype.name} is not supported (allowed: {names})")
        return d.dtype

    def _same(self, field: str, status: Status, shown, ref: str, names) -> None:
        """Every present tensor of ``names`` has ``ref``'s ``field`` (``shown`` formats it)."""
        want = getattr(self.tensors[ref], field)
        for n in names:
            d = self.tensors.get(n)
            if d is not None and getattr(d, field) != want:
                self.fail(status, f"tensor '{n}' {field} {shown(getattr(d, field))} does not match '{ref}' {field} {shown(want)}")

    def same_dtype(self, ref: str, *names: str) -> None:
        self._same("dtype", Status.BAD_TENSOR_DTYPE, lambda d: d.name, ref, names)

    def same_shape(self, ref: str, *names: str) -> None:
        self._same("shape", Status.BAD_TENSOR_SHAPE, list, ref, names)

    def writable(self, *names: str) -> None:
        """Outputs may not broadcast (stride 0 on a dim > 1) nor overlap themselves."""
        for n in names:
            d = self.tensors.get(n)
            if d is None:
                continue
            if d.has_broadcast():
                self.fail(
                    Status.BAD_TENSOR_STRIDES, f"output '{n}' has a zero stride: strides {list(d.strides)} shape {list(d.shape)}"
                )
            if d.may_self_overlap():
                self.fail(
                    Status.BAD_TENSOR_STRIDES, f"output '{n}' overlaps itself: strides {list(d.strides)} shape {list(d.shape)}"
                )

    def ndim_in(self, name: str, allowed) -> int:
        d = self.tensors[name]
        if d.ndim not in allowed:
            self.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' must have ndim in {sorted(allowed)}, got shape {list(d.shape)}")
        return d.ndim

    def axis(self, name: str, value: int, ndim: int) -> int:
        if not -ndim <= value < max(ndim, 1):
            self.fail(Status.BAD_PARAM, f"attribute '{name}'={value} is out of range for {ndim}-d tensors")
        return value % ndim if ndim else 0


@dataclass
class OpSpec:
    """The declaration of one operator (see module docstring).

    validate(check: Checker) -> Info    all create-time checks; raises InfiniopError.
    cpu(info) -> callable(views, workspace, runtime) computing on NumPy views.
    nvidia(info, handle) -> kernel with ``workspace_size`` and ``__call__(ptrs, ws_ptr, rt, stream)``.
    reference(**torch_float64_inputs, **attrs, **runtime) -> dict of outputs (or one tensor).
    infer(**input descriptors, **attrs) -> dict of output descriptors (for ``iop.ops``).
    """

    name: str
    stem: str
    tensors: tuple[TensorRole, ...]
    validate: Callable[[Checker], Info]
    dtypes: frozenset
    attrs: tuple[Attr, ...] = ()
    runtime: tuple[Attr, ...] = ()
    cpu: Callable | None = None
    nvidia: Callable | None = None
    nvidia_dtypes: frozenset | None = None  # None: same as dtypes
    reference: Callable | None = None
    reference_inputs: str = "torch64"  # "torch64": torch tensors in f64/i64; "numpy": raw stored arrays
    infer: Callable | None = None
    torch: str = ""
    summary: str = ""
    gguf_names: tuple[str, ...] = ()
    c_workspace_args: bool = True
    inplace: tuple[tuple[str, str], ...] = ()  # (output, input) pairs that may alias
    kernel_sources: tuple[str, ...] = ()  # CUDA files (relative to the op folder) for the compile check
    c_attrs: tuple[str, ...] = ()  # C-style create: attribute names in upstream's positional order (default: attrs order)
    c_create_args: tuple[
        str, ...
    ] = ()  # C-style create: every positional argument after the handle (tensor and attribute names) when upstream interleaves them
    gguf: Any = None  # GGUF file quirks: an infiniop_py.gguf.GGUFDialect (see docs/gguf.md); None: the generic rules
    stem_aliases: tuple[str, ...] = ()  # extra C-style stems (e.g. logical_and's "And")
    # C-style create in upstream's short form (e.g. topksoftmax: create(x) only): the tensors it
    # receives, in order. The others are inferred by ``c_infer(given, runtime)`` -> {name: desc}
    # (``runtime`` is None at create: return any valid layout, used to validate and to size the
    # workspace; at calculate it holds the parsed runtime scalars). See cstyle.DeferredDescriptor.
    c_create_tensors: tuple[str, ...] = ()
    c_infer: Callable | None = None
    module: Any = field(default=None, repr=False)

    def __post_init__(self):
        names = [t.name for t in self.tensors]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate tensor names")
        self.outputs = tuple(t for t in self.tensors if t.is_output)
        self.inputs = tuple(t for t in self.tensors if not t.is_output)
        self.tensors = self.outputs + self.inputs  # canonical order: outputs, then inputs
        self.role = {t.name: t for t in self.tensors}
        self.alias = {a: t.name for t in self.tensors for a in t.aliases}
        self.attr = {a.name: a for a in self.attrs}

    @property
    def backends(self) -> list[str]:
        return [b for b in ("cpu", "nvidia") if getattr(self, b) is not None]


BY_NAME = ("validate", "cpu", "nvidia", "reference", "infer", "c_infer")


def declare(namespace, **fields) -> OpSpec:
    """An operator module's OpSpec, its functions by name: each of ``BY_NAME`` the module
    defines (``namespace``: its ``globals()``) fills the OpSpec field of that name, unless
    ``fields`` sets it::

        def validate(check): ...
        def cpu(info): ...
        def reference(x, dim): ...

        SPEC = declare(globals(), name="softmax", stem="Softmax", tensors=..., dtypes=F, ...)
    """
    for name in BY_NAME:
        if name not in fields and callable(namespace.get(name)):
            fields[name] = namespace[name]
    return OpSpec(**fields)
