"""Writing test-case files in the canonical layout (gguf.md §1, §2, §5.2).

:class:`TestRecord` collects one test's keys and tensors with the layout rules applied
(natural-order ``.shape``, reversed ``.strides``, zero-stride inputs stored reduced, outputs as
empty placeholders carrying both keys, expected values as F64); :func:`write_file` writes the
records through ``gguf.GGUFWriter`` in a fixed order, so equal inputs give byte-identical files.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter

from ..dtypes import DType, info, to_numpy
from ..tensor import contiguous_strides
from .container import ARCHITECTURE

VTYPES = {
    "u8": GGUFValueType.UINT8,
    "i8": GGUFValueType.INT8,
    "u16": GGUFValueType.UINT16,
    "i16": GGUFValueType.INT16,
    "u32": GGUFValueType.UINT32,
    "i32": GGUFValueType.INT32,
    "u64": GGUFValueType.UINT64,
    "i64": GGUFValueType.INT64,
    "f32": GGUFValueType.FLOAT32,
    "f64": GGUFValueType.FLOAT64,
    "bool": GGUFValueType.BOOL,
    "str": GGUFValueType.STRING,
}
_INT_RANGE = {
    GGUFValueType.UINT8: (0, 2**8 - 1),
    GGUFValueType.INT8: (-(2**7), 2**7 - 1),
    GGUFValueType.UINT16: (0, 2**16 - 1),
    GGUFValueType.INT16: (-(2**15), 2**15 - 1),
    GGUFValueType.UINT32: (0, 2**32 - 1),
    GGUFValueType.INT32: (-(2**31), 2**31 - 1),
    GGUFValueType.UINT64: (0, 2**64 - 1),
    GGUFValueType.INT64: (-(2**63), 2**63 - 1),
}


class WriteError(ValueError):
    """A value or array that cannot be stored in a test-case file."""


def _vtype(t) -> GGUFValueType:
    if isinstance(t, GGUFValueType):
        return t
    try:
        return VTYPES[t]
    except KeyError:
        raise WriteError(f"unknown GGUF value type {t!r} (use one of {sorted(VTYPES)})") from None


def _py(value, vtype: GGUFValueType):
    """A plain Python value checked against ``vtype``."""
    if vtype in _INT_RANGE:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise WriteError(f"{value!r} is not an integer")
        lo, hi = _INT_RANGE[vtype]
        if not lo <= int(value) <= hi:
            raise WriteError(f"{value} does not fit in {vtype.name}")
        return int(value)
    if vtype in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return float(value)
    if vtype == GGUFValueType.BOOL:
        return bool(value)
    if vtype == GGUFValueType.STRING:
        if not isinstance(value, str):
            raise WriteError(f"{value!r} is not a string")
        return value
    raise WriteError(f"unsupported value type {vtype.name}")


def default_vtype(kind: str, value) -> GGUFValueType:
    """The type upstream's generators use for an attribute of ``kind`` (see GGUFDialect.attr_types)."""
    if kind == "float":
        return GGUFValueType.FLOAT32
    if kind == "bool":
        return GGUFValueType.BOOL
    if kind == "str":
        return GGUFValueType.STRING
    items = value if kind == "ints" else [value]
    lo, hi = _INT_RANGE[GGUFValueType.INT32]
    fits = all(lo <= int(x) <= hi for x in items)
    return GGUFValueType.INT32 if fits else GGUFValueType.INT64


def stored_value(value, vtype):
    """``value`` as a reader will see it after storing it as ``vtype`` (f32 rounding)."""
    vtype = _vtype(vtype)
    if isinstance(value, (list, tuple)):
        return type(value)(stored_value(v, vtype) for v in value)
    if vtype == GGUFValueType.FLOAT32:
        return float(np.float32(value))
    return _py(value, vtype)


def storable(dtype: DType) -> bool:
    """Whether GGUF has a tensor type for ``dtype`` (no unsigned, F8 or complex)."""
    return info(dtype).ggml is not None


def _check_storable(dtype: DType, name: str) -> GGMLQuantizationType:
    code = info(dtype).ggml
    if code is None:
        raise WriteError(f"tensor '{name}': dtype {dtype.name} cannot be stored in GGUF (no unsigned, F8 or complex types)")
    return GGMLQuantizationType(code)


def _c_array(a: np.ndarray, dtype: DType) -> np.ndarray:
    return np.array(a, dtype=to_numpy(dtype), copy=True, order="C")


class TestRecord:
    """One test's keys and tensors, in the order they will be written."""

    __test__ = False

    def __init__(self, op_name: str):
        self.keys: dict[str, tuple[GGUFValueType, Any, GGUFValueType | None]] = {}
        self.tensors: dict[str, tuple[np.ndarray, DType]] = {}
        self.set("op_name", op_name, "str")

    # -- keys ----------------------------------------------------------------------------------
    def set(self, key: str, value, vtype) -> None:
        """Set a key. ``vtype`` is 'f32', 'i64', ... (for lists: the element type)."""
        vt = _vtype(vtype)
        if isinstance(value, (list, tuple)):
            self.keys[key] = (GGUFValueType.ARRAY, [_py(v, vt) for v in value], vt)
        else:
            self.keys[key] = (vt, _py(value, vt), None)

    def set_attr(self, name: str, kind: str, value, vtype=None) -> Any:
        """Store an attribute of ``kind``; returns the value a reader will see."""
        vt = _vtype(vtype) if vtype is not None else default_vtype(kind, value)
        if kind == "ints":
            value = list(value)
        self.set(name, value, vt)
        return stored_value(value, vt)

    # -- tensors -------------------------------------------------------------------------------
    def _layout_keys(self, name: str, shape, strides) -> None:
        self.set(f"{name}.shape", list(shape), "i64")
        self.set(f"{name}.strides", list(reversed(strides)), "i64")

    def add_input(self, name: str, data: np.ndarray, dtype: DType, strides=None) -> None:
        """An input: logical ``data`` (full shape) laid out with ``strides`` (None: contiguous).

        Dimensions with stride 0 are stored reduced to size 1 (§2.3).
        """
        _check_storable(dtype, name)
        data = np.asarray(data)
        shape = tuple(data.shape)
        strides = tuple(strides) if strides is not None else contiguous_strides(shape)
        reduced = data[tuple(slice(0, 1) if s == 0 and d > 0 else slice(None) for d, s in zip(shape, strides))]
        if shape:
            self._layout_keys(name, shape, strides)
        self.tensors[name] = (_c_array(reduced, dtype), dtype)

    def add_output(self, name: str, shape, strides, dtype: DType, inplace: str | None = None) -> None:
        """A pure output: an empty placeholder with ``.shape`` and ``.strides`` (§2.4)."""
        _check_storable(dtype, name)
        shape = tuple(shape)
        strides = tuple(strides) if strides is not None else contiguous_strides(shape)
        self._layout_keys(name, shape, strides)
        if inplace is not None:
            self.set(f"{name}.inplace", inplace, "str")
        # Every stored dimension 0; a 0-d output is stored 0-d (one zero element, which readers
        # ignore for a pure output), so that readers sizing it from its dims stay in bounds.
        placeholder = np.zeros((0,) * len(shape), dtype=to_numpy(dtype))
        self.tensors[name] = (placeholder, dtype)

    def add_inout(self, name: str, data: np.ndarray, dtype: DType, strides=None, inplace: str | None = None) -> None:
        """An in/out tensor: its initial value is stored like an input's."""
        self.add_input(name, data, dtype, strides)
        if inplace is not None:
            self.set(f"{name}.inplace", inplace, "str")

    def add_expected(self, name: str, values: np.ndarray, dtype: DType | None = None) -> None:
        """An expected value: F64 for floating data unless ``dtype`` says otherwise."""
        values = np.asarray(values)
        if dtype is None:
            if values.dtype == np.bool_:
                dtype = DType.BOOL
            elif values.dtype.kind in "iu":
                dtype = DType.I64
            else:
                dtype = DType.F64
        _check_storable(dtype, name)
        self.tensors[name] = (_c_array(values, dtype), dtype)

    # -- editing (for dialects) ----------------------------------------------------------------
    def rename(self, old: str, new: str) -> None:
        """Rename a tensor (with its ``old.*`` keys) or a key, keeping positions."""
        self.tensors = {(new if k == old else k): v for k, v in self.tensors.items()}
        self.keys = {(new + k[len(old) :] if (k == old or k.startswith(old + ".")) else k): v for k, v in self.keys.items()}

    def drop(self, name: str) -> None:
        self.tensors.pop(name, None)
        self.keys = {k: v for k, v in self.keys.items() if not (k == name or k.startswith(name + "."))}


class _Writer(GGUFWriter):
    """``GGUFWriter`` that can also write empty arrays (the ``.shape`` of a 0-d tensor)."""

    def _pack_val(self, val, vtype, add_vtype, sub_type=None):
        if vtype == GGUFValueType.ARRAY and isinstance(val, (list, tuple)) and len(val) == 0:
            out = bytearray()
            if add_vtype:
                out += self._pack("I", vtype)
            out += self._pack("I", sub_type if sub_type is not None else GGUFValueType.INT64)
            out += self._pack("Q", 0)
            return bytes(out)
        return super()._pack_val(val, vtype, add_vtype, sub_type=sub_type)


def write_file(path: str | os.PathLike, tests: list[TestRecord], description: str = "") -> None:
    """Write ``tests`` to ``path`` (atomically: a temporary file, then rename)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".gguf", dir=folder)
    os.close(fd)
    try:
        w = _Writer(tmp, ARCHITECTURE)
        if description:
            w.add_key_value("general.description", description, GGUFValueType.STRING)
        w.add_key_value("test_count", len(tests), GGUFValueType.UINT64)
        for i, rec in enumerate(tests):
            for key, (vt, value, sub) in rec.keys.items():
                w.add_key_value(f"test.{i}.{key}", value, vt, sub_type=sub)
        for i, rec in enumerate(tests):
            for name, (array, dtype) in rec.tensors.items():
                w.add_tensor(f"test.{i}.{name}", array, raw_dtype=_check_storable(dtype, name))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
