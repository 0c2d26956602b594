import numpy as np

from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def data(rng, name, dtype, shape):
    if name == "probs":
        z = rng.uniform(-2, 2, size=shape)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    C = shape[-1]
    lab = rng.integers(0, C, size=shape[:-1])
    return np.eye(C)[lab]


def case(shape, ps=None, ts=None, gs=None, desc="", suites=("quick",)):
    return Case({"grad_logits": T(shape, gs), "probs": T(shape, ps), "target": T(shape, ts)}, DT, desc, data=data, suites=suites)


CASES = [
    case((13, 4), desc="13x4"),
    case((2, 3, 10), desc="3-d (N = 6)"),
    case((13, 4), ps=(10, 1), gs=(1, 13), desc="padded probs, column-major grad"),
    case((5, 7), ts=(0, 1), desc="zero-stride target (one row broadcast)"),
    case((3, 2049), desc="rows of 2049"),
    case((7,), desc="1-d (N = 1)"),
    case((0, 4), desc="empty"),
    case((64, 32000), desc="64x32000", suites=("full",)),
]
