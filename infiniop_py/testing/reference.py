"""Reference results: the operator's PyTorch function evaluated in float64 on the stored inputs."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, is_float, to_numpy


def _to_torch(a: np.ndarray):
    import torch

    if a.dtype.kind == "f" or str(a.dtype) == "bfloat16":
        return torch.from_numpy(np.array(a, dtype=np.float64, copy=True))
    if a.dtype == np.bool_:
        return torch.from_numpy(np.array(a, copy=True))
    return torch.from_numpy(np.array(a, dtype=np.int64, copy=True))


def to_output(value, dtype: DType) -> np.ndarray:
    """Convert a reference value to how it is compared: f64 for floats, the dtype itself otherwise."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    value = np.asarray(value)
    if is_float(dtype):
        return value.astype(np.float64)
    if dtype is DType.BOOL:
        return value != 0
    if value.dtype.kind == "f":
        value = np.trunc(value)
    return value.astype(np.int64).astype(to_numpy(dtype))


def _output_kwargs(fn, out_dtypes: dict, out_shapes: dict | None, in_dtypes: dict | None = None) -> dict:
    """``out_dtypes`` / ``out_shapes`` for a reference function that declares such a parameter
    (ops whose result depends on the output layout: cast's target dtype, equal's mode), and
    ``in_dtypes`` (NumPy storage dtypes by input name) for one whose result depends on an
    input's storage dtype (topkrouter rounds an intermediate to it), since "torch64" inputs
    arrive widened."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    kw = {}
    if "out_dtypes" in params:
        kw["out_dtypes"] = dict(out_dtypes)
    if "out_shapes" in params and out_shapes is not None:
        kw["out_shapes"] = dict(out_shapes)
    if "in_dtypes" in params and in_dtypes is not None:
        kw["in_dtypes"] = dict(in_dtypes)
    return kw


def reference(spec, inputs: dict, attrs: dict, runtime: dict, out_dtypes: dict, out_shapes: dict | None = None) -> dict:
    """Expected outputs for ``inputs`` (NumPy arrays in their storage dtypes).

    A reference function that declares an ``out_dtypes`` or ``out_shapes`` parameter also gets
    the output dtypes / shapes by output name.
    """
    if spec.reference is None:
        raise RuntimeError(f"{spec.name}: no reference function")
    in_dtypes = {n: a.dtype for n, a in inputs.items() if hasattr(a, "dtype")}
    attrs = {**attrs, **_output_kwargs(spec.reference, out_dtypes, out_shapes, in_dtypes)}
    if spec.reference_inputs == "numpy":
        res = spec.reference(**inputs, **attrs, **runtime)
    else:
        import torch

        with torch.no_grad():
            tin = {n: None if a is None else _to_torch(a) for n, a in inputs.items()}
            res = spec.reference(**tin, **attrs, **runtime)
    if not isinstance(res, dict):
        res = {spec.outputs[0].name: res}
    return {
        n: (v if spec.reference_inputs == "numpy" and not is_float(out_dtypes[n]) else to_output(v, out_dtypes[n]))
        for n, v in res.items()
        if n in out_dtypes
    }
