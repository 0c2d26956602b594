"""Checking a case (docs/perf/method.md, items 0 and 4): our output and each peer's against
torch eager, ours against the float64 reference before anything is timed; and the rows whose
times cannot be true (INVALID)."""

from __future__ import annotations

from typing import Any

from .env import Env
from .workload import Workload


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------
def check(env: Env, work: Workload, actual, expected) -> tuple[bool, str]:
    """Compare ``actual`` with the peer's ``expected`` (exact for copies, else the dtype's tolerance)."""
    torch = env.torch
    if actual.shape != expected.shape:
        return False, f"shape {tuple(actual.shape)} vs {tuple(expected.shape)}"
    if work.exact:
        if actual.is_floating_point():
            itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
            same = actual.view(itype) == expected.view(itype) if actual.is_contiguous() else actual == expected
        else:
            same = actual == expected
        bad = int((~same).sum())
        return bad == 0, "bitwise equal" if bad == 0 else f"{bad} of {actual.numel()} elements differ"
    a = actual.float()
    e = expected.float()
    diff = (a - e).abs()
    ok = (diff <= work.atol) | (diff <= work.rtol * torch.maximum(a.abs(), e.abs())) | (a.isnan() & e.isnan()) | (a == e)
    bad = int((~ok).sum())
    finite = diff[torch.isfinite(diff)]
    max_err = float(finite.max()) if finite.numel() else 0.0
    if bad:
        return False, f"{bad} of {a.numel()} outside atol={work.atol:g} rtol={work.rtol:g}; max abs err {max_err:.3g}"
    return True, f"max abs err {max_err:.3g}"


def _tolerance(dtype_name: str) -> tuple[float, float]:
    from infiniop_py.dtypes import parse_dtype
    from infiniop_py.testing.compare import default_tolerance

    return default_tolerance(parse_dtype(dtype_name))


def _wide(torch, t):
    """``t`` as the float64 reference takes it: floats in float64, integers in int64, bool as is."""
    if t is None:
        return None
    if t.is_floating_point():
        return t.double()
    if t.dtype == torch.bool:
        return t.clone()
    return t.long()


def reference64(env: Env, work: Workload, s: int = 0) -> tuple[Any, str]:
    """(float64 expected value of the checked output on set ``s``, how) or (None, why there is none).

    The operator's own reference (its spec's ``reference``, in float64 on the benchmark's
    device) where the buffers are the operator's tensors in calculate's order; else the case's
    pure torch function evaluated on float64 copies of its inputs. Called before our first call,
    so an operator that writes in place is checked against its inputs as they were.
    """
    torch = env.torch
    d = getattr(work.descriptor, "d", work.descriptor)  # unwrap a suite's workspace holder
    spec, info = getattr(d, "spec", None), getattr(d, "info", None)
    bufs = work.buffers[s]
    why = "no float64 reference for this case"
    if spec is not None and spec.reference is not None and spec.reference_inputs == "torch64" and len(bufs) == len(spec.tensors):
        role = spec.tensors[work.out_index]
        if role.compare not in ("auto", "tolerance", "exact"):
            return None, f"{role.compare} comparison (checked against torch only)"
        try:
            from infiniop_py.dtypes import to_numpy
            from infiniop_py.testing.reference import _output_kwargs

            ins = {t.name: _wide(torch, b) for t, b in zip(spec.tensors, bufs) if t.role != "out"}
            attrs = dict(work.attrs) if work.attrs is not None else dict(getattr(info, "attrs", {}) or {})
            rt = {a.name: v for a, v in zip(spec.runtime, work.runtime)}
            outs = {t.name: b for t, b in zip(spec.tensors, bufs) if t.is_output and b is not None}
            in_dt = {t.name: to_numpy(info.tensors[t.name].dtype) for t in spec.inputs if info and info.tensors.get(t.name)}
            extra = _output_kwargs(
                spec.reference,
                {n: info.tensors[n].dtype for n in outs} if info else {},
                {n: tuple(b.shape) for n, b in outs.items()},
                in_dt,
            )
            with torch.no_grad():
                res = spec.reference(**ins, **attrs, **extra, **rt)
            if not isinstance(res, dict):
                res = {spec.outputs[0].name: res}
            ref = res.get(role.name)
            if ref is not None:
                return torch.as_tensor(ref).to(bufs[work.out_index].device), "the operator's float64 reference"
            why = f"the operator's reference gives no '{role.name}'"
        except Exception as exc:  # an odd buffer mapping: try the case's own function
            why = f"the operator's reference failed ({type(exc).__name__}: {str(exc)[:80]})"
    if work.torch_fn is not None and work.inputs:
        try:
            with torch.no_grad():
                ref = work.torch_fn(*[_wide(torch, t) if hasattr(t, "is_floating_point") else t for t in work.inputs[s]])
            return ref, "the case's torch function in float64"
        except Exception as exc:
            why += f"; its torch function in float64 failed ({type(exc).__name__})"
    return None, why


def check64(env: Env, work: Workload, actual, ref, peer=None) -> tuple[bool | None, str]:
    """``actual`` against the float64 ``ref``: every element within the case's tolerance, or, where
    the dtype's rounding of a long accumulation exceeds it, no further from the reference than
    2 x torch eager's output ``peer`` is (and finite wherever the reference is). None where the
    reference does not fit the output (a different number of elements: nothing to compare)."""
    torch = env.torch
    ref = ref.to(actual.device)
    if ref.is_floating_point():
        ref = ref.double()
    if tuple(actual.shape) != tuple(ref.shape):
        if ref.numel() != actual.numel():  # the output's shape is the descriptor's: the mapping is off
            return None, f"not checked against float64: reference shape {tuple(ref.shape)}, output {tuple(actual.shape)}"
        ref = ref.reshape(actual.shape)
    if not actual.is_floating_point():
        bad = int((actual.long() != ref.round().long()).sum()) if ref.is_floating_point() else int((actual != ref).sum())
        return bad == 0, "float64 reference: equal" if bad == 0 else f"float64 reference: {bad} of {actual.numel()} differ"

    def err(x):
        a = x.double()
        diff = (a - ref).abs()
        both_nan = a.isnan() & ref.isnan()
        ok = (diff <= work.atol) | (diff <= work.rtol * torch.maximum(a.abs(), ref.abs())) | both_nan | (a == ref)
        finite = diff[torch.isfinite(diff)]
        stray = int((~torch.isfinite(a) & torch.isfinite(ref)).sum())
        return int((~ok).sum()), float(finite.max()) if finite.numel() else 0.0, stray

    bad, max_err, stray = err(actual)
    if bad == 0:
        return True, f"float64 reference: max abs err {max_err:.3g}"
    peer_err = None
    if hasattr(peer, "is_floating_point") and tuple(peer.shape) == tuple(ref.shape) and peer.is_floating_point():
        _, peer_err, _ = err(peer)
        if stray == 0 and max_err <= 2 * peer_err:
            return True, f"float64 reference: max abs err {max_err:.3g} (<= 2 x torch's {peer_err:.3g})"
    torch_part = "" if peer_err is None else f", torch's {peer_err:.3g}"
    return False, (
        f"float64 reference: {bad} of {actual.numel()} outside atol={work.atol:g} rtol={work.rtol:g}; "
        f"max abs err {max_err:.3g}{torch_part}" + (f"; {stray} non-finite" if stray else "")
    )


# A row is INVALID (its times are not results, and it shows no speed-up) when a time is below
# what the same calls cannot beat: the per-call times (events around stream launches, with or
# without the host kept ahead) below the kernel-only time of the same calls (CUDA-graph replay,
# the least a call costs: the same kernels with the shortest launch gaps), or any time below
# the time of a copy of the same bytes timed the same way. A per-call median under the
# kernel-only time counts only when most calls (its 90th percentile) are under it too, the
# run's own noise; the copy factor leaves room for kernels that legitimately beat torch's copy:
# a read-mostly kernel, or one that reads part of its counted input (a triangle, a causal mask:
# >= 3/4 of the bytes). Both bounds are far from what a timing on the wrong stream gives
# (docs/perf/method.md, "Rows that cannot be true").
PER_CALL_FLOOR = 0.8  # per-call time / kernel-only time of the same implementation, whatever the noise
# per-call and kernel-only times of the same calls run under different loads (graphs of 1 to 24
# calls against calls one by one), and the clocks follow (measured spread: docs/perf/method.md)
KERNEL_SPREAD = 0.05
COPY_FLOOR = 0.5  # a time / the same-bytes copy's time, measured the same way
CHECKED_IMPLS = ("ours", "torch")
# what a row states on the strength of its times: dropped from an INVALID row
DERIVED = ("GBps", "pct_copy", "TFLOPs", "pct_matrix", "x", "x_torch", "x_compile", "device_pct_copy", "device_x_torch")
DERIVED += ("kernel_pct_copy", "kernel_x_torch")


def _below_kernel(st, kern: float) -> bool:
    """A timed call faster than its kernels alone: its median more than KERNEL_SPREAD below
    ``kern`` and beyond the run's own noise (even its 90th percentile is below), or below
    PER_CALL_FLOOR x ``kern`` outright."""
    if not isinstance(st, dict):
        return st is not None and st < PER_CALL_FLOOR * kern
    med, p90 = st.get("median"), st.get("p90")
    return med < PER_CALL_FLOOR * kern or (med < (1 - KERNEL_SPREAD) * kern and p90 is not None and p90 < kern)


def _median(table, name):
    t = (table or {}).get(name)
    if isinstance(t, dict):
        return t.get("median")
    return t


def invalid_reasons(row: dict) -> list[str]:
    """Why ``row``'s times cannot be true (empty when they can): see PER_CALL_FLOOR, COPY_FLOOR."""
    reasons = []
    copy_dev = row.get("same_bytes_copy_us")
    copy_kern = row.get("kernel_copy_us")
    for name in CHECKED_IMPLS:
        kern = _median(row.get("kernel_us"), name)
        timed = {"per-call": row.get("times_us"), "device": row.get("device_us")}
        for what, table in timed.items():
            t = _median(table, name)
            if t is None:
                continue
            if kern and _below_kernel(table.get(name), kern):
                reasons.append(f"{name} {what} time {t:.2f} us is below its kernel-only time {kern:.2f} us")
            if copy_dev and t < COPY_FLOOR * copy_dev:
                reasons.append(f"{name} {what} time {t:.2f} us is below {COPY_FLOOR:g} x the same-bytes copy's {copy_dev:.2f} us")
        if kern and copy_kern and kern < COPY_FLOOR * copy_kern:
            reasons.append(
                f"{name} kernel-only time {kern:.2f} us is below {COPY_FLOOR:g} x the same-bytes copy's {copy_kern:.2f} us"
            )
    return reasons


def mark_invalid(row: dict, reasons: list[str]) -> dict:
    """Mark ``row`` INVALID: the reasons go to ``row["invalid"]``, the raw times stay (for a look),
    every figure derived from them (bandwidth, ratios) is dropped."""
    row["invalid"] = list(reasons)
    for key in DERIVED:
        if key in row:
            row[key] = {} if isinstance(row[key], dict) else None
    return row
