"""Reading the GGUF container of a test-case file (gguf.md §1).

The ``gguf`` package does the parsing; :class:`_Reader` only adjusts it where these files need
something else:

- every read is bounds-checked, so a truncated file gives a clear :class:`FileError` naming the
  table and offset instead of an ``IndexError`` deep inside the library;
- nested arrays, duplicate keys and duplicate tensor names are file errors;
- tensor infos are recorded, not turned into arrays: the library sizes ggml type Q8_K as a
  256-element quantised block and refuses these files, while here Q8_K means one byte per element
  (BOOL). Tensor data is read on demand by :meth:`GGUFFile.array`, so data past the end of the
  file or an unknown ggml type only spoils the tests that use that tensor (:class:`TestError`).

Big-endian files and GGUF version 1 are rejected before the library sees them.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFValueType

from ..dtypes import DType, from_ggml, to_numpy

MAGIC = b"GGUF"
VERSIONS = (2, 3)
ARCHITECTURE = "infiniop-test"
DEFAULT_ALIGNMENT = 32
MAX_RANK = 32  # NumPy's oldest limit on array dimensions

INT_TYPES = frozenset(
    {
        GGUFValueType.UINT8,
        GGUFValueType.INT8,
        GGUFValueType.UINT16,
        GGUFValueType.INT16,
        GGUFValueType.UINT32,
        GGUFValueType.INT32,
        GGUFValueType.UINT64,
        GGUFValueType.INT64,
    }
)
FLOAT_TYPES = frozenset({GGUFValueType.FLOAT32, GGUFValueType.FLOAT64})


class FileError(Exception):
    """The file as a whole is unreadable or malformed (a per-file error, exit code 2)."""


class TestError(Exception):
    """One test's content is unusable (status INVALID TEST)."""

    __test__ = False  # not a pytest class


class _TruncatedError(Exception):
    def __init__(self, offset: int, need: int):
        super().__init__(offset, need)
        self.offset = offset
        self.need = need


@dataclass(frozen=True)
class Value:
    """One key's value: its GGUF type, the decoded Python value and, for arrays, the element type."""

    vtype: GGUFValueType
    value: Any
    subtype: GGUFValueType | None = None

    @property
    def is_array(self) -> bool:
        return self.vtype == GGUFValueType.ARRAY

    def type_name(self) -> str:
        if self.is_array:
            return f"ARRAY[{self.subtype.name if self.subtype is not None else '?'}]"
        return self.vtype.name


@dataclass(frozen=True)
class StoredTensor:
    """A tensor info: name, ggml type code, stored shape (natural order) and absolute data offset."""

    name: str
    ggml_type: int
    shape: tuple[int, ...]
    offset: int

    @property
    def dtype(self) -> DType | None:
        """The project dtype (BOOL for Q8_K), or None for a ggml type these files may not use."""
        return from_ggml(self.ggml_type)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def has_data(self) -> bool:
        return self.numel > 0


class _Reader(GGUFReader):
    """``GGUFReader`` with bounds-checked reads and lazy, Q8_K-aware tensor data."""

    stored: dict[str, StoredTensor]

    # The library maps the file with np.memmap and slices it once per scalar it parses; slicing
    # the memmap subclass costs a Python hook per slice, a plain ndarray view of the same mapping
    # does not (about 2x faster parsing).
    @property
    def data(self) -> np.ndarray:
        return self._bytes

    @data.setter
    def data(self, value) -> None:
        self._bytes = value.view(np.ndarray)

    def _get(self, offset, dtype, count=1, override_order=None):
        """Bounds-checked read of ``count`` items (files are little-endian, as is the host)."""
        dt = _DTYPES.get(dtype) or np.dtype(dtype)
        count = int(count)
        end = offset + dt.itemsize * count
        if end > self._bytes.shape[0]:
            raise _TruncatedError(int(offset), end - int(offset))
        return self._bytes[offset:end].view(dt)

    def _get_field_parts(self, orig_offs: int, raw_type: int):
        """As the library's, but an array of scalars becomes one view of its elements instead of
        one view per element (which cost ~100 bytes and a Python call for each byte of a u8 array)."""
        if raw_type == GGUFValueType.ARRAY:
            raw_itype = self._get(orig_offs, np.uint32)
            code = int(raw_itype[0])
            if code not in _VALUE_TYPES:
                raise ValueError(f"unknown array element type {code}")
            if code == GGUFValueType.ARRAY:
                raise ValueError("nested arrays are not allowed")
            nptype = self.gguf_scalar_to_np.get(code)
            if nptype is not None:
                alen = self._get(orig_offs + 4, np.uint64)
                n = int(alen[0])
                itemsize = _DTYPES[nptype].itemsize
                if orig_offs + 12 + n * itemsize > self._bytes.shape[0]:
                    raise _TruncatedError(orig_offs + 12, n * itemsize)
                vals = self._get(orig_offs + 12, nptype, n)
                types = [GGUFValueType.ARRAY, GGUFValueType(int(raw_itype[0]))]
                return 12 + int(vals.nbytes), [raw_itype, alen, vals], [2], types
        return super()._get_field_parts(orig_offs, raw_type)

    def _key_at(self, offs: int) -> str:
        _, raw = self._get_str(offs)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise FileError(f"key at offset {offs} is not valid UTF-8") from None

    def _build_fields(self, offs: int, count: int) -> int:
        for _ in range(int(count)):
            start = offs
            try:
                key = self._key_at(offs)
            except _TruncatedError:
                raise FileError(f"truncated key/value table: key at offset {start}") from None
            if key in self.fields:
                raise FileError(f"duplicate key '{shown(key)}' at offset {start}")
            try:
                type_at = start + 8 + int(self._get(start, np.uint64)[0])
                code = int(self._get(type_at, np.uint32)[0])
            except _TruncatedError as t:
                raise FileError(f"truncated key/value table: type of key '{shown(key)}' at offset {t.offset}") from None
            if code not in _VALUE_TYPES:
                raise FileError(f"key '{shown(key)}' at offset {start} has unknown value type {code}")
            try:
                offs = super()._build_fields(offs, 1)
            except _TruncatedError as t:
                raise FileError(f"truncated key/value table: value of key '{shown(key)}' at offset {t.offset}") from None
            except (ValueError, KeyError) as exc:
                raise FileError(f"bad value of key '{shown(key)}' at offset {start}: {exc}") from None
        return offs

    def _build_tensor_info(self, offs: int, count: int):
        fields = []
        for k in range(int(count)):
            try:
                offs, one = super()._build_tensor_info(offs, 1)
            except _TruncatedError as t:
                raise FileError(f"truncated tensor-info table: tensor #{k} at offset {t.offset}") from None
            except UnicodeDecodeError:
                raise FileError(f"tensor #{k} at offset {offs}: name is not valid UTF-8") from None
            fields += one
        return offs, fields

    def _build_tensors(self, start_offs: int, fields) -> None:
        self.stored = {}
        for k, field in enumerate(fields):
            _, name_data, _, dims, raw_type, rel_offset = field.parts
            try:
                name = bytes(name_data).decode("utf-8")
            except UnicodeDecodeError:
                raise FileError(f"tensor #{k}: name is not valid UTF-8") from None
            if name in self.stored:
                raise FileError(f"duplicate tensor name '{shown(name)}'")
            shape = tuple(int(d) for d in reversed(dims.tolist()))  # stored innermost first
            self.stored[name] = StoredTensor(name, int(raw_type[0]), shape, int(start_offs) + int(rel_offset[0]))
        self.tensors = []


_VALUE_TYPES = frozenset(int(t) for t in GGUFValueType)
_DTYPES = {t: np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64)}
_DTYPES.update({t: np.dtype(t) for t in (np.float32, np.float64, np.bool_)})


if sys.byteorder != "little":  # pragma: no cover - every supported host is little-endian
    raise ImportError("infiniop_py.gguf needs a little-endian host")


def shown(text: str) -> str:
    """``text`` for a one-line message: control characters (newlines included) escaped."""
    return text if text.isprintable() else repr(text)[1:-1]


def _test_index(name: str) -> int | None:
    """``i`` for a name ``test.{i}.<rest>`` with ``i`` written canonically, else None."""
    if not name.startswith("test."):
        return None
    num, dot, _ = name[5:].partition(".")
    if not dot or not num.isascii() or not num.isdigit() or str(int(num)) != num:
        return None
    return int(num)


def _check_header(path: str) -> None:
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) == 0:
        raise FileError("empty file")
    if len(head) < 4 or head[:4] != MAGIC:
        raise FileError(f"bad magic {head[:4]!r} (not a GGUF file)")
    if len(head) < 8:
        raise FileError("truncated header")
    le = int.from_bytes(head[4:8], "little")
    be = int.from_bytes(head[4:8], "big")
    if le in VERSIONS:
        return
    if be in (1, *VERSIONS):
        raise FileError(f"big-endian GGUF (version {be}) is not supported")
    if le == 1:
        raise FileError("GGUF version 1 is not supported (need 2 or 3)")
    raise FileError(f"unsupported GGUF version {le} (need 2 or 3)")


_LIST_LIMIT = 64  # longer scalar arrays stay packed (a Python int costs up to 40x a stored i8)


class _Items(Sequence):
    """A long array value, kept as packed NumPy data; reads as a sequence of Python scalars."""

    def __init__(self, values: np.ndarray):
        self._values = values

    def __len__(self) -> int:
        return int(self._values.size)

    def __getitem__(self, i):
        got = self._values[i]
        return got.tolist() if isinstance(i, slice) else got.item()

    def __iter__(self):
        for start in range(0, self._values.size, 4096):
            yield from self._values[start : start + 4096].tolist()

    def __eq__(self, other) -> bool:
        if isinstance(other, _Items):
            return bool(np.array_equal(self._values, other._values))
        return isinstance(other, (list, tuple)) and len(other) == len(self) and list(self) == list(other)

    __hash__ = None

    def __repr__(self) -> str:
        head = ", ".join(repr(x) for x in self._values[:8].tolist())
        return f"[{head}, ... ({len(self)} items)]"


def _value(field) -> Value:
    t0 = GGUFValueType(field.types[0])
    if t0 == GGUFValueType.STRING:
        return Value(t0, bytes(field.parts[-1]).decode("utf-8", "replace"))
    if t0 == GGUFValueType.ARRAY:
        sub = GGUFValueType(int(field.parts[3][0]))
        if sub == GGUFValueType.STRING:
            items = [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        else:  # one view of all the elements (see _Reader._get_field_parts)
            items = field.parts[field.data[0]] if field.data else np.empty(0)
            items = items.tolist() if items.size <= _LIST_LIMIT else _Items(np.array(items))
        return Value(t0, items, sub)
    return Value(t0, field.parts[-1][0].item())


class GGUFFile:
    """One opened test-case file: its keys, its tensor infos, and tensor data on demand.

    Raises :class:`FileError` for anything that makes the whole file unusable.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        try:
            _check_header(self.path)
            reader = _Reader(self.path)
        except FileError:
            raise
        except _TruncatedError as t:
            raise FileError(f"truncated header at offset {t.offset}") from None
        except OSError as exc:
            raise FileError(exc.strerror or str(exc)) from None
        except (ValueError, KeyError) as exc:  # e.g. a bad general.alignment
            raise FileError(str(exc).strip("'\"")) from None
        self.version = int(reader.fields["GGUF.version"].parts[0][0])
        self.alignment = int(reader.alignment)
        self.data_offset = int(reader.data_offset)
        self._data = reader.data
        self.size = int(reader.data.shape[0])
        self.fields: dict[str, Value] = {}
        for name, field in reader.fields.items():
            if name.startswith("GGUF.") and field.offset < 24:
                continue  # the library's pseudo-fields for the header
            self.fields[name] = _value(field)
        self.tensors: dict[str, StoredTensor] = reader.stored
        arch = self.fields.get("general.architecture")
        if arch is not None and (arch.vtype != GGUFValueType.STRING or arch.value != ARCHITECTURE):
            raise FileError(f"general.architecture is {arch.value!r}, expected '{ARCHITECTURE}'")
        count = self.fields.get("test_count")
        if count is None:
            raise FileError("missing key 'test_count'")
        if count.vtype not in INT_TYPES or count.value < 0:
            raise FileError(f"key 'test_count' must be a non-negative integer, got {count.type_name()} {count.value!r}")
        self.test_count = int(count.value)
        present = self._present_tests()
        if self.test_count > present:
            raise FileError(
                f"key 'test_count' is {self.test_count}, but only {present} tests have keys in the file "
                "(distinct 'test.{i}.' prefixes)"
            )
        desc = self.fields.get("general.description")
        self.description = desc.value if desc is not None and desc.vtype == GGUFValueType.STRING else None
        self._by_test: dict[int, tuple[dict, dict]] | None = None

    def close(self) -> None:
        self._data = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- per-test views ----------------------------------------------------------------------
    def _present_tests(self) -> int:
        """How many distinct test indices have at least one key or tensor (any index)."""
        seen = set()
        for table in (self.fields, self.tensors):
            for name in table:
                i = _test_index(name)
                if i is not None:
                    seen.add(i)
        return len(seen)

    def _index(self) -> dict[int, tuple[dict, dict]]:
        if self._by_test is None:
            by: dict[int, tuple[dict, dict]] = {}
            for table, slot in ((self.fields, 0), (self.tensors, 1)):
                for name, item in table.items():
                    i = _test_index(name)
                    if i is not None and i < self.test_count:
                        by.setdefault(i, ({}, {}))[slot][name.partition(".")[2].partition(".")[2]] = item
            self._by_test = by
        return self._by_test

    def test_items(self, index: int) -> tuple[dict[str, Value], dict[str, StoredTensor]]:
        """Keys and tensors of test ``index``, by name without the ``test.{i}.`` prefix."""
        keys, tensors = self._index().get(index, ({}, {}))
        return dict(keys), dict(tensors)

    # -- tensor data ----------------------------------------------------------------------------
    def in_file(self, tensor: StoredTensor) -> bool:
        """Whether ``tensor`` has a usable ggml type and its data lies inside the file."""
        dtype = tensor.dtype
        if dtype is None or tensor.offset < 0:
            return False
        return tensor.offset + tensor.numel * to_numpy(dtype).itemsize <= self.size

    def array(self, tensor: StoredTensor, key: str | None = None) -> np.ndarray:
        """The stored data of ``tensor`` in its stored shape (a copy). TestError if unusable."""
        key = key or tensor.name
        dtype = tensor.dtype
        if dtype is None:
            raise TestError(f"tensor '{key}' has unsupported ggml type {tensor.ggml_type}")
        npd = to_numpy(dtype)
        n = tensor.numel
        nbytes = n * npd.itemsize
        if self._data is None:
            raise TestError(f"tensor '{key}': file already closed")
        if tensor.offset + nbytes > self.size:
            raise TestError(
                f"tensor '{key}' data ({nbytes} bytes at offset {tensor.offset}) runs past the end of the file ({self.size} bytes)"
            )
        if len(tensor.shape) > MAX_RANK or any(d > max(self.size, 1) for d in tensor.shape):
            # data inside the file has no dimension longer than the file; an empty tensor's may
            # be anything, but NumPy cannot describe every such shape
            raise TestError(
                f"tensor '{key}' has an unusable stored shape ({len(tensor.shape)} dimensions, largest {max(tensor.shape)})"
            )
        raw = np.array(self._data[tensor.offset : tensor.offset + nbytes], dtype=np.uint8, copy=True)
        if dtype is DType.BOOL:
            return (raw != 0).reshape(tensor.shape)
        return raw.view(npd).reshape(tensor.shape)
