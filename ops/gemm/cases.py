import numpy as np

from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def nan_c(rng, name, dtype, shape):
    """c full of NaN: with beta == 0 its prior contents must be ignored."""
    return np.full(shape, np.nan) if name == "c" else None


def g(c, a, b):
    return {"c": c, "a": a, "b": b}


def big(tensors, label, k, suites=("quick",)):
    """Longer dot products: f32 gets an absolute tolerance that scales with sqrt(K)."""
    rt = {"alpha": 1.0, "beta": 0.0}
    hf = tuple(d for d in DT if d.name != "F32")
    f32 = tuple(d for d in DT if d.name == "F32")
    return [
        Case(tensors, hf, label, runtime=rt, suites=suites),
        Case(tensors, f32, label + " (f32)", runtime=rt, suites=suites, atol=2e-6 * k**0.5 * 4),
    ]


CASES = [
    *big(g(T((6, 2048)), T((6, 2048)), T((2048, 2048))), "upstream-like 6x2048x2048", 2048, ("full",)),
    Case(g(T((13, 9)), T((13, 17)), T((17, 9))), DT, "contiguous 13x17x9", runtime={"alpha": 1.0, "beta": 0.0}),
    Case(g(T((13, 9)), T((13, 17)), T((17, 9))), DT, "alpha 0.5 beta 1.5", runtime={"alpha": 0.5, "beta": 1.5}),
    Case(g(T((13, 9)), T((13, 17)), T((17, 9))), DT, "beta 0 ignores NaN in c", runtime={"alpha": 2.0, "beta": 0.0}, data=nan_c),
    Case(g(T((13, 9)), T((13, 17), (1, 13)), T((17, 9))), DT, "a column-major", runtime={"alpha": 1.0, "beta": 1.0}),
    Case(g(T((13, 9)), T((13, 17)), T((17, 9), (1, 17))), DT, "b column-major", runtime={"alpha": 1.0, "beta": 0.5}),
    Case(g(T((13, 9), (1, 13)), T((13, 17)), T((17, 9))), DT, "c column-major", runtime={"alpha": 1.0, "beta": 1.0}),
    Case(
        g(T((13, 9), (1, 16)), T((13, 17), (1, 20)), T((17, 9), (1, 24))),
        DT,
        "all column-major padded",
        runtime={"alpha": 1.0, "beta": 1.0},
    ),
    Case(
        g(T((13, 9), (12, 1)), T((13, 17), (20, 1)), T((17, 9), (11, 1))), DT, "padded rows", runtime={"alpha": -1.0, "beta": 1.0}
    ),
    Case(g(T((3, 5, 7)), T((3, 5, 11)), T((3, 11, 7))), DT, "batched 3x5x11x7", runtime={"alpha": 1.0, "beta": 0.0}),
    Case(g(T((3, 5, 7)), T((1, 5, 11)), T((3, 11, 7))), DT, "batch-1 a broadcasts", runtime={"alpha": 1.0, "beta": 1.0}),
    Case(g(T((3, 5, 7)), T((3, 5, 11)), T((11, 7))), DT, "2-d b broadcasts", runtime={"alpha": 1.0, "beta": 0.0}),
    Case(
        g(T((3, 5, 7), (7, 21, 1)), T((3, 5, 11), (55, 1, 5)), T((3, 11, 7), (11, 1, 33))),
        DT,
        "batched, permuted layouts",
        runtime={"alpha": 0.75, "beta": 0.25},
    ),
    Case(g(T((1, 1)), T((1, 3)), T((3, 1))), DT, "1x3x1 dot", runtime={"alpha": 1.0, "beta": 1.0}),
    Case(g(T((4, 1)), T((4, 5)), T((5, 1))), DT, "matrix-vector", runtime={"alpha": 1.0, "beta": 0.0}),
    Case(g(T((4, 6)), T((4, 0)), T((0, 6))), DT, "K = 0 (c = beta·c)", runtime={"alpha": 1.0, "beta": 0.5}),
    Case(g(T((0, 6)), T((0, 3)), T((3, 6))), DT, "empty M = 0", runtime={"alpha": 1.0, "beta": 0.0}),
    *big(g(T((64, 96)), T((64, 128)), T((128, 96))), "64x128x96", 128),
    *big(g(T((4, 128, 256)), T((4, 128, 512)), T((4, 512, 256))), "batched 4x128x512x256", 512, ("full",)),
]
