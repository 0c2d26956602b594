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


def reference(spec, inputs: dict, attrs: dict, runtime: dict, out_dtypes: dict) -> dict:
    """Expected outputs for ``inputs`` (NumPy arrays in their storage dtypes)."""
    if spec.reference is None:
        raise RuntimeError(f"{spec.name}: no reference function")
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
