"""From the keys and tensors of one test to a runnable test (gguf.md §2, §3).

:func:`load_test` resolves the op name, binds every tensor role and attribute the registry
declares (aliases included), derives logical shapes, strides and data, finds the expected value
of each output, and lets the operator's dialect adjust the result. Anything unusable raises
:class:`TestError` (INVALID TEST) with a message naming the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gguf import GGUFValueType

from ..dtypes import DType, info
from ..registry import get_spec, resolve
from ..spec import REQUIRED, OpSpec
from ..tensor import contiguous_strides
from ..testing.data import span
from .container import INT_TYPES, MAX_RANK, GGUFFile, StoredTensor, TestError, Value, shown
from .dialect import dialect_of
from .values import as_float, as_ints, as_kind, as_str, stored_precision


@dataclass
class TestTensor:
    """One tensor of a test, ready to be laid out in a device buffer."""

    __test__ = False

    name: str  # canonical role name
    key: str  # the full key it was read from (for messages)
    role: str  # 'in', 'out' or 'inout'
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    data: np.ndarray | None = None  # logical values: inputs, and in/out tensors that start from data
    fill: float | None = None  # in/out tensors without data start from this constant
    inplace: str | None = None  # outputs: the input whose buffer this output shares
    unchecked: bool = False  # outputs with no expected value


@dataclass
class ParsedTest:
    """A test bound to its operator: tensors in registry order, attributes, expected values."""

    __test__ = False

    index: int
    op_name: str  # as written in the file
    spec: OpSpec
    description: str = ""
    tensors: dict[str, TestTensor | None] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    runtime: dict[str, Any] = field(default_factory=dict)
    precision: dict[str, str] = field(default_factory=dict)  # attribute -> 'f32'/'f64' as stored
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    atol: float | None = None
    rtol: float | None = None
    seed: int | None = None
    style: str = "standard"  # or 'named' (§3.1)


# A test may not declare a tensor (logical elements or buffer span, inputs, outputs and expected
# values alike) larger than max(MIN_ELEMENT_LIMIT, ELEMENT_FACTOR x the elements of its own tensors
# stored in the file), nor a dimension or stride beyond that: a few bytes of shape keys cannot make
# the runner allocate gigabytes (gguf.md §4.3).
MIN_ELEMENT_LIMIT = 2**24
ELEMENT_FACTOR = 64


def element_limit(file: GGUFFile, tensors) -> tuple[int, int]:
    """(limit, stored elements) for a test whose stored tensors are ``tensors``."""
    stored = sum(t.numel for t in tensors if file.in_file(t))
    return max(MIN_ELEMENT_LIMIT, ELEMENT_FACTOR * stored), stored


def _show(vals) -> str:
    vals = list(vals)
    return str(vals) if len(vals) <= 8 else f"[{', '.join(map(str, vals[:8]))}, ... ({len(vals)} entries)]"


class RawTest:
    """The keys and tensors of test ``index``, by name without the ``test.{i}.`` prefix."""

    def __init__(self, file: GGUFFile, index: int, op_name: str = ""):
        self.file = file
        self.index = index
        self.op_name = op_name
        self.keys, self.tensors = file.test_items(index)
        self.limit, self.stored_elements = element_limit(file, self.tensors.values())
        self._arrays: dict[str, np.ndarray] = {}
        self.notes: dict[str, Any] = {}  # scratch space for a dialect, from prepare() to adapt()

    def key(self, name: str) -> str:
        return f"test.{self.index}.{name}"

    def value(self, name: str) -> Value | None:
        return self.keys.get(name)

    def tensor(self, name: str) -> StoredTensor | None:
        return self.tensors.get(name)

    def data(self, name: str) -> np.ndarray:
        """Stored data of tensor ``name`` in its stored shape."""
        if name in self._arrays:
            return self._arrays[name]
        return self.file.array(self.tensors[name], self.key(name))

    def rename(self, old: str, new: str) -> None:
        """Move tensor/key ``old`` to ``new``, with its ``old.*`` and ``old_shape`` keys."""
        if old in self.tensors:
            st = self.tensors.pop(old)
            self.tensors[new] = st
            if old in self._arrays:
                self._arrays[new] = self._arrays.pop(old)
        for k in list(self.keys):
            if k == old or k.startswith(old + ".") or k == old + "_shape":
                self.keys[new + k[len(old) :]] = self.keys.pop(k)

    def drop(self, name: str) -> None:
        self.tensors.pop(name, None)
        self._arrays.pop(name, None)
        for k in list(self.keys):
            if k == name or k.startswith(name + ".") or k == name + "_shape":
                del self.keys[k]

    def put_tensor(self, name: str, array: np.ndarray, dtype: DType) -> None:
        """Add (or replace) a tensor held in memory, e.g. one derived from stored data."""
        array = np.asarray(array)
        code = info(dtype).ggml  # F32's code is 0: test for None, not for falsehood
        self.tensors[name] = StoredTensor(name, -1 if code is None else code, tuple(array.shape), -1)
        self._arrays[name] = array

    def check_size(self, key: str, shape, strides=None) -> None:
        """TestError naming ``key`` if a tensor of ``shape`` (and ``strides``) is over the limit."""
        why = (
            f"more than this test may declare: max(2^24, {ELEMENT_FACTOR} x its {self.stored_elements} "
            f"stored elements) = {self.limit}"
        )
        if any(d > self.limit for d in shape):
            raise TestError(f"key '{key}': dimension {max(shape)} of shape {_show(shape)} is {why}")
        n = math.prod(shape)
        if n > self.limit:
            raise TestError(f"key '{key}': shape {_show(shape)} has {n} elements, {why}")
        if strides is not None:
            if any(s > self.limit for s in strides):
                raise TestError(f"key '{key}': stride {max(strides)} of strides {_show(strides)} is {why}")
            n = span(shape, strides)
            if n > self.limit:
                raise TestError(f"key '{key}': shape {_show(shape)} with strides {_show(strides)} spans {n} elements, {why}")

    def shape_of(self, name: str) -> tuple[int, ...]:
        """Logical shape of tensor ``name`` as the file gives it (``.shape``, ``_shape`` or stored)."""
        return _shape(self, name, self.tensors[name])[0]

    def strides_of(self, name: str) -> tuple[int, ...] | None:
        """Strides of tensor ``name`` in natural order as the file gives them; None when absent."""
        k = _strides_key(self, name)
        return None if k is None else tuple(reversed(_dims(self.keys[k], self.key(k), "stride")))

    def set_strides(self, name: str, strides) -> None:
        """Give tensor ``name`` these strides (natural order), replacing any stored ``.strides``."""
        self.keys.pop(name + "_strides.strides", None)
        self.keys[name + ".strides"] = Value(GGUFValueType.ARRAY, [int(s) for s in reversed(strides)], GGUFValueType.INT64)


# -- header of a test (also used for -k selection and descriptions) ------------------------------
def test_header(file: GGUFFile, index: int) -> tuple[str | None, str | None, str]:
    """(op_name as written or None, canonical name or None, description) without validation."""
    keys, _ = file.test_items(index)
    v = keys.get("op_name")
    op = v.value if v is not None and isinstance(v.value, str) else None
    canonical = resolve(op) if op is not None else None
    d = keys.get("description")
    desc = d.value if d is not None and isinstance(d.value, str) else ""
    return op, canonical, desc


# -- shapes, strides, data -----------------------------------------------------------------------
def _dims(v: Value, key: str, what: str) -> tuple[int, ...]:
    if v.is_array and len(v.value) > MAX_RANK:
        raise TestError(f"key '{key}' has {len(v.value)} entries, more than {MAX_RANK} dimensions")
    vals = as_ints(v, key)
    if any(x < 0 for x in vals):
        raise TestError(f"key '{key}' has a negative {what}: {list(vals)}")
    return vals


def _shape(raw: RawTest, name: str, st: StoredTensor) -> tuple[tuple[int, ...], bool]:
    """Logical shape of tensor ``name`` and whether it came from a key."""
    for suffix in (".shape", "_shape"):
        v = raw.value(name + suffix)
        if v is not None:
            shape = _dims(v, raw.key(name + suffix), "dimension")
            raw.check_size(raw.key(name + suffix), shape)
            return shape, True
    if len(st.shape) > MAX_RANK:
        raise TestError(f"tensor '{raw.key(name)}' has {len(st.shape)} dimensions, more than {MAX_RANK}")
    raw.check_size(raw.key(name), st.shape)
    return st.shape, False


def _strides_key(raw: RawTest, name: str) -> str | None:
    """The key holding tensor ``name``'s strides (``.strides`` wins over ``_strides.strides``)."""
    return next((k for k in (name + ".strides", name + "_strides.strides") if k in raw.keys), None)


def _strides(raw: RawTest, name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = raw.strides_of(name)
    if strides is None:
        return contiguous_strides(shape)
    k = raw.key(_strides_key(raw, name) or name)
    if len(strides) != len(shape):
        raise TestError(f"key '{k}' has {len(strides)} strides for a {len(shape)}-d shape {list(shape)}")
    raw.check_size(k, shape, strides)
    return strides


def _logical(stored: np.ndarray, shape: tuple, strides: tuple, key: str) -> np.ndarray:
    """Logical values from stored data: reduced zero-stride dims broadcast (§2.3)."""
    if stored.ndim != len(shape):
        raise TestError(f"tensor '{key}': stored shape {list(stored.shape)} does not match shape {list(shape)}")
    index = []
    for k, (n, d, s) in enumerate(zip(stored.shape, shape, strides)):
        if n == d:
            index.append(slice(0, 1) if s == 0 and d > 0 else slice(None))
        elif s == 0 and n == 1:
            index.append(slice(None))
        else:
            raise TestError(
                f"tensor '{key}': stored shape {list(stored.shape)} does not match shape {list(shape)} "
                f"(dimension {k}, stride {s})"
            )
    return np.broadcast_to(stored[tuple(index)], shape)


def _find(raw: RawTest, names) -> str | None:
    for n in names:
        if n in raw.tensors:
            return n
    return None


def _typed(raw: RawTest, fname: str):
    """(stored tensor, full key) of a file tensor, whose ggml type must be one we read."""
    st = raw.tensor(fname)
    key = raw.key(fname)
    if st.dtype is None:
        raise TestError(f"tensor '{key}' has unsupported ggml type {st.ggml_type}")
    return st, key


def _stored(raw: RawTest, fname: str):
    """(stored tensor, key, shape, strides, data as that logical layout) of a file tensor."""
    st, key = _typed(raw, fname)
    shape, _ = _shape(raw, fname, st)
    strides = _strides(raw, fname, shape)
    return st, key, shape, strides, _logical(raw.data(fname), shape, strides, key)


def _expected(raw: RawTest, fname: str) -> np.ndarray:
    return _stored(raw, fname)[4]


# -- binding -------------------------------------------------------------------------------------
def load_test(file: GGUFFile, index: int) -> ParsedTest:
    """Parse test ``index`` of ``file``; TestError for anything unusable."""
    keys, _ = file.test_items(index)
    v = keys.get("op_name")
    if v is None:
        raise TestError(f"missing key 'test.{index}.op_name'")
    op_name = as_str(v, f"test.{index}.op_name")
    canonical = resolve(op_name)
    if canonical is None:
        raise TestError(f"unknown op_name '{shown(op_name)}'")
    spec = get_spec(canonical)
    dialect = dialect_of(spec)
    raw = RawTest(file, index, op_name)
    dialect.prepare(raw)
    test = _bind(raw, spec, op_name, dialect)
    dialect.adapt(test, raw)
    _finish(test, raw)
    return test


def _bind(raw: RawTest, spec: OpSpec, op_name: str, dialect) -> ParsedTest:
    test = ParsedTest(raw.index, op_name, spec)
    found = {r.name: _find(raw, (r.name, *r.aliases)) for r in spec.tensors}

    # Expected values (§2.5) decide the style of each output.
    expected_from: dict[str, str] = {}
    named: set[str] = set()
    for pos, role in enumerate(spec.outputs):
        names = (role.name, *role.aliases)
        cands = [f"ans_{n}" for n in names]
        if pos == 0:
            cands.append("ans")
        cands += [f"{p}_{n}" for p in ("lable", "label") for n in names]
        src = _find(raw, cands)
        fname = found[role.name]
        if src is None and role.role == "out" and fname is not None and raw.tensor(fname).has_data:
            src = fname
            named.add(role.name)
        if src is not None:
            expected_from[role.name] = src
    if named:
        test.style = "named"

    def stored(role):
        """The file's name of the role's tensor; None for an absent optional one."""
        fname = found[role.name]
        if fname is None and not role.optional:
            raise TestError(f"missing tensor '{raw.key(role.name)}'")
        return fname

    # Inputs first: named-style outputs take the primary input's dtype.
    for role in spec.inputs:
        fname = stored(role)
        test.tensors[role.name] = None if fname is None else _input(raw, role, fname)
    for role in spec.outputs:
        fname = stored(role)
        if fname is None:
            test.tensors[role.name] = None
        elif role.name in named:
            test.tensors[role.name] = _named_output(raw, role, fname, test, dialect)
        else:
            test.tensors[role.name] = _output(raw, role, fname, expected_from.get(role.name))
    test.tensors = {r.name: test.tensors[r.name] for r in spec.tensors}

    for out_name, src in expected_from.items():
        if test.tensors.get(out_name) is None:
            continue
        if out_name in named:
            st = raw.tensor(src)
            data = raw.data(src)
            shape = test.tensors[out_name].shape
            if data.size != int(np.prod(shape)):
                raise TestError(f"tensor '{raw.key(src)}': stored shape {list(st.shape)} does not match shape {list(shape)}")
            test.expected[out_name] = data.reshape(shape)
        else:
            test.expected[out_name] = _expected(raw, src)

    # Attributes and runtime scalars (§2.6).
    for table, attrs in ((test.attrs, spec.attrs), (test.runtime, spec.runtime)):
        for a in attrs:
            kname = next((n for n in (a.name, *a.aliases) if n in raw.keys), None)
            if kname is None:
                if a.default is REQUIRED:
                    raise TestError(f"missing attribute '{raw.key(a.name)}'")
                table[a.name] = a.default
                continue
            v = raw.value(kname)
            table[a.name] = as_kind(v, a.kind, raw.key(kname))
            test.precision[a.name] = stored_precision(v)

    for tol in ("atol", "rtol"):
        v = raw.value(tol)
        if v is not None:
            x = as_float(v, raw.key(tol))
            if not (np.isfinite(x) and x >= 0):
                raise TestError(f"key '{raw.key(tol)}' must be finite and >= 0, got {x!r}")
            setattr(test, tol, x)
    v = raw.value("description")
    if v is not None:
        test.description = as_str(v, raw.key("description"))
    v = raw.value("seed")
    if v is not None:
        if v.vtype not in INT_TYPES or v.value < 0:
            raise TestError(f"key '{raw.key('seed')}' must be a non-negative integer, got {v.type_name()} {v.value!r}")
        test.seed = int(v.value)

    # In-place aliasing (§2.4).
    for role in spec.outputs:
        t = test.tensors[role.name]
        if t is None:
            continue
        fname = found[role.name]
        v = raw.value(fname + ".inplace")
        if v is None:
            continue
        target = as_str(v, raw.key(fname + ".inplace"))
        target = spec.alias.get(target, target)
        if target not in spec.role or spec.role[target].is_output:
            raise TestError(f"key '{raw.key(fname + '.inplace')}' names '{target}', which is not an input of {spec.name}")
        t.inplace = target
    return test


def _input(raw: RawTest, role, fname: str) -> TestTensor:
    st, key, shape, strides, data = _stored(raw, fname)
    return TestTensor(role.name, key, "in", st.dtype, shape, strides, data=data)


def _output(raw: RawTest, role, fname: str, expected: str | None = None) -> TestTensor:
    st, key = _typed(raw, fname)
    shape, from_key = _shape(raw, fname, st)
    placeholder = len(st.shape) > 0 and all(d == 0 for d in st.shape)
    if placeholder and not from_key:
        # A placeholder without `.shape` takes the shape of its own `ans_<output>` (gguf.md §6).
        if expected is None or not expected.startswith("ans_"):
            raise TestError(f"output placeholder '{key}' has no '{key}.shape' key (and no 'ans_{role.name}' to take it from)")
        shape = raw.shape_of(expected)
    strides = _strides(raw, fname, shape)
    t = TestTensor(role.name, key, role.role, st.dtype, shape, strides)
    if role.role == "inout":
        if st.has_data:
            t.data = _logical(raw.data(fname), shape, strides, key)
        else:
            t.fill = role.init if role.init is not None else 0.0
    return t


def _named_output(raw: RawTest, role, fname: str, test: ParsedTest, dialect) -> TestTensor:
    st = raw.tensor(fname)
    key = raw.key(fname)
    src = dialect.output_dtype_from or next((r.name for r in test.spec.inputs if test.tensors.get(r.name) is not None), None)
    if src is None or test.tensors.get(src) is None:
        raise TestError(f"output '{key}' in the named-output style needs an input to take its dtype from")
    shape, _ = _shape(raw, fname, st)
    return TestTensor(role.name, key, "out", test.tensors[src].dtype, shape, contiguous_strides(shape))


def _finish(test: ParsedTest, raw: RawTest) -> None:
    for name, t in test.tensors.items():
        if t is None:
            continue
        raw.check_size(t.key, t.shape, t.strides)  # again: a dialect may have changed them
        if t.inplace is not None:
            src = test.tensors.get(t.inplace)
            if src is None:
                raise TestError(f"'{t.key}.inplace' names absent tensor '{t.inplace}'")
            if (src.shape, src.strides, src.dtype) != (t.shape, t.strides, t.dtype):
                raise TestError(
                    f"'{t.key}.inplace': output and '{t.inplace}' differ "
                    f"(shape {list(t.shape)}/{list(src.shape)}, strides {list(t.strides)}/{list(src.strides)}, "
                    f"dtype {t.dtype.name}/{src.dtype.name})"
                )
        if t.role != "in":
            t.unchecked = name not in test.expected
    if not any(t is not None and t.role != "in" and not t.unchecked for t in test.tensors.values()):
        raise TestError(f"no expected value for any output (looked for '{raw.key('ans')}' and 'ans_<output>')")
