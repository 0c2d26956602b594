"""What the case tables of batch_norm and batch_norm_backward share: their input data and the
case constructor over the operator's dtypes."""

from __future__ import annotations

from ..dtypes import DType
from .cases import Case
from .data import random_data

HALF = (DType.F16, DType.BF16)


def data(rng, name, dtype, shape):
    """running_var positive; an offset input so the shifted statistics are exercised."""
    if name == "running_var":
        return random_data(rng, dtype, shape, 0.5, 2.0)
    if name == "input":
        return random_data(rng, dtype, shape, 1.0, 5.0)
    return None


def case_maker(spec):
    """``C(tensors, description, dtypes=every dtype of spec, **Case keywords)`` with this data."""
    every = tuple(sorted(spec.dtypes))

    def make(tensors, desc, dtypes=every, **kw):
        return Case(tensors, dtypes, desc, data=data, **kw)

    return make
