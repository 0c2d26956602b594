"""Comparing an operator's output with its expected value (gguf.md §4.5, §4.6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import DType, is_float

DEFAULT_TOLERANCE = {
    DType.F16: (1.5e-3, 1e-3),
    DType.BF16: (1e-2, 1e-2),
    DType.F32: (1e-5, 1e-5),
    DType.F64: (1e-10, 1e-10),
}


def default_tolerance(dtype: DType) -> tuple[float, float]:
    """(atol, rtol) for a floating output dtype."""
    return DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))


def compare_mode(role_compare: str, dtype: DType) -> str:
    if role_compare != "auto":
        return role_compare
    return "tolerance" if is_float(dtype) else "exact"


@dataclass
class Comparison:
    ok: bool
    mismatches: int = 0
    total: int = 0
    max_abs_err: float = 0.0
    message: str = ""


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v)


def _first(bad: np.ndarray, actual, expected, name: str, total: int, max_err: float) -> str:
    flat = int(np.flatnonzero(bad.reshape(-1))[0]) if bad.ndim else 0
    idx = list(np.unravel_index(flat, bad.shape)) if bad.ndim else []
    a = actual.reshape(-1)[flat] if actual.ndim else actual[()]
    e = expected.reshape(-1)[flat] if expected.ndim else expected[()]
    return (
        f"{name}: {int(bad.sum())} of {total} values failed; first at index {flat} {[int(i) for i in idx]}: "
        f"actual {_fmt(a)}, expected {_fmt(e)}; max abs error {max_err:.2e}"
    )


def _failed(bad: np.ndarray, actual, expected, name: str, total: int, max_err: float = 0.0, note: str = "") -> Comparison:
    """The failed Comparison for mask ``bad`` (its first element described, ``note`` appended)."""
    return Comparison(False, int(bad.sum()), total, max_err, _first(bad, actual, expected, name, total, max_err) + note)


def compare(
    actual: np.ndarray, expected: np.ndarray, mode: str, atol: float = 0.0, rtol: float = 0.0, name: str = "output"
) -> Comparison:
    """Compare per ``mode``: 'tolerance', 'exact', 'bitwise'. ('index' is operator-specific.)"""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return Comparison(False, message=f"Shape mismatch: actual {list(actual.shape)}, expected {list(expected.shape)}")
    total = int(actual.size)
    if total == 0:
        return Comparison(True, total=0)
    if mode == "bitwise":
        if actual.dtype != expected.dtype:
            return Comparison(
                False, total=total, message=f"{name}: Data type mismatch: actual {actual.dtype}, expected {expected.dtype}"
            )
        item = actual.dtype.itemsize
        a = np.ascontiguousarray(actual).view(np.uint8).reshape(*actual.shape, item)
        e = np.ascontiguousarray(expected).view(np.uint8).reshape(*expected.shape, item)
        bad = (a != e).any(axis=-1)
        if bad.any():
            if item in (1, 2, 4, 8):
                actual, expected = actual.view(f"u{item}"), expected.view(f"u{item}")
            return _failed(bad, actual, expected, name, total)
        return Comparison(True, 0, total)
    if mode == "exact":
        if actual.dtype == np.bool_:
            raw = actual.view(np.uint8)
            badbyte = raw > 1
            if badbyte.any():
                return _failed(badbyte, raw, expected.astype(np.int64), name, total, note=" (not a valid bool byte)")
        if actual.dtype.kind == "f" or expected.dtype.kind == "f" or str(actual.dtype) == "bfloat16":
            a = actual.astype(np.float64)
            e = expected.astype(np.float64)
            bad = ~((a == e) | (np.isnan(a) & np.isnan(e)))
        else:
            a = actual.astype(np.int64)
            e = expected.astype(np.int64) if expected.dtype != np.uint64 else expected.astype(np.uint64).astype(np.int64)
            bad = a != e
        if bad.any():
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
            finite = np.isfinite(diff)
            return _failed(bad, actual, expected, name, total, float(diff[finite].max()) if finite.any() else 0.0)
        return Comparison(True, 0, total)
    # tolerance
    a = (
        actual.astype(np.float32).astype(np.float64)
        if actual.dtype.itemsize == 2 and actual.dtype.kind != "i"
        else actual.astype(np.float64)
    )
    e = (
        expected.astype(np.float32).astype(np.float64)
        if expected.dtype.itemsize == 2 and expected.dtype.kind not in "iu"
        else expected.astype(np.float64)
    )
    a_fin, e_fin = np.isfinite(a), np.isfinite(e)
    both = a_fin & e_fin
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        within = (diff <= atol) | (diff <= rtol * np.maximum(np.abs(a), np.abs(e)))
    special_ok = (np.isnan(a) & np.isnan(e)) | ((a == e) & ~a_fin & ~e_fin & ~np.isnan(a))
    ok_elem = np.where(both, within, special_ok)
    bad = ~ok_elem
    max_err = float(diff[both].max()) if both.any() else 0.0
    if bad.any():
        return _failed(bad, a, e, name, total, max_err)
    return Comparison(True, 0, total, max_err)


def compare_index(actual: np.ndarray, expected: np.ndarray, values: np.ndarray, name: str = "result") -> Comparison:
    """Index-with-ties (gguf.md §4.5): ``actual == expected``, or ``values`` equal at both indices."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return Comparison(False, message=f"Shape mismatch: actual {list(actual.shape)}, expected {list(expected.shape)}")
    flat_values = np.asarray(values).reshape(-1)
    a = actual.astype(np.int64).reshape(-1)
    e = np.asarray(expected, dtype=np.float64).astype(np.int64).reshape(-1)
    n = flat_values.size
    ok = a == e
    for k in np.flatnonzero(~ok):
        ai, ei = int(a[k]), int(e[k])
        if 0 <= ai < n and 0 <= ei < n and flat_values[ai] == flat_values[ei]:
            ok[k] = True
    total = int(a.size)
    if not ok.all():
        return _failed(~ok.reshape(actual.shape), actual, expected, name, total, note=" (values at the two indices differ)")
    return Comparison(True, 0, total, 0.0)
