"""Converting stored GGUF values to attribute kinds (gguf.md §2.6) and printing them (§4.8).

The stored value type is always checked; raw bytes are never reinterpreted.
"""

from __future__ import annotations

import math

import numpy as np
from gguf import GGUFValueType

from .container import FLOAT_TYPES, INT_TYPES, TestError, Value

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _scalar(v: Value, key: str, allowed, what: str) -> Value:
    """The value itself, or the element of a 1-element array, if its type is in ``allowed``."""
    if v.is_array:
        if len(v.value) != 1 or v.subtype not in allowed:
            raise TestError(f"key '{key}' must be {what} (or a 1-element array of one), got {v.type_name()} {v.value!r}")
        return Value(v.subtype, v.value[0])
    if v.vtype not in allowed:
        raise TestError(f"key '{key}' must be {what}, got {v.type_name()} {v.value!r}")
    return v


def _check_int(x: int, key: str) -> int:
    if not INT64_MIN <= x <= INT64_MAX:
        raise TestError(f"key '{key}': value {x} does not fit in int64")
    return int(x)


def as_int(v: Value, key: str) -> int:
    return _check_int(_scalar(v, key, INT_TYPES, "an integer").value, key)


def as_float(v: Value, key: str) -> float:
    return float(_scalar(v, key, INT_TYPES | FLOAT_TYPES, "a number").value)


def as_bool(v: Value, key: str) -> bool:
    s = _scalar(v, key, INT_TYPES | {GGUFValueType.BOOL}, "a bool")
    if s.vtype == GGUFValueType.BOOL:
        return bool(s.value)
    if s.value not in (0, 1):
        raise TestError(f"key '{key}' must be a bool (or integer 0/1), got {s.value!r}")
    return bool(s.value)


def as_ints(v: Value, key: str) -> tuple[int, ...]:
    if v.is_array:
        if v.value and v.subtype not in INT_TYPES:
            raise TestError(f"key '{key}' must be an integer array, got {v.type_name()}")
        return tuple(_check_int(x, key) for x in v.value)
    if v.vtype in INT_TYPES:
        return (_check_int(v.value, key),)
    raise TestError(f"key '{key}' must be an integer array, got {v.type_name()} {v.value!r}")


def as_str(v: Value, key: str) -> str:
    if v.vtype != GGUFValueType.STRING:
        raise TestError(f"key '{key}' must be a string, got {v.type_name()} {v.value!r}")
    return v.value


CONVERT = {"int": as_int, "float": as_float, "bool": as_bool, "ints": as_ints, "str": as_str}


def as_kind(v: Value, kind: str, key: str):
    """Convert ``v`` to an attribute of ``kind`` ('int', 'float', 'bool', 'ints', 'str')."""
    return CONVERT[kind](v, key)


def stored_precision(v: Value | None) -> str:
    """'f32' when the value was stored as FLOAT32 (scalar or array), else 'f64'."""
    if v is None:
        return "f64"
    t = v.subtype if v.is_array else v.vtype
    return "f32" if t == GGUFValueType.FLOAT32 else "f64"


def format_value(value, precision: str = "f64") -> str:
    """Attribute value for the ``- name=value`` line: shortest round-trip form at its precision."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return str(float(value))
        return str(np.float32(value)) if precision == "f32" else repr(float(value))
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(format_value(x, precision) for x in value) + "]"
    if isinstance(value, str):
        return value
    return str(value)
