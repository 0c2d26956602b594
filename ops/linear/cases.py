from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
HF = tuple(d for d in DT if d.name != "F32")
F32 = tuple(d for d in DT if d.name == "F32")


def lin(y, x, w, b=None):
    return {"y": y, "x": x, "w": w, "b": b}


def both(tensors, label, k, suites=("quick",)):
    """f32 gets an absolute tolerance scaling with sqrt(K) (summation order differs)."""
    return [
        Case(tensors, HF, label, suites=suites),
        Case(tensors, F32, label + " (f32)", suites=suites, atol=8e-6 * k**0.5),
    ]


CASES = [
    Case(lin(T((5, 7)), T((5, 9)), T((7, 9)), T((7,))), DT, "2-d with bias"),
    Case(lin(T((5, 7)), T((5, 9)), T((7, 9))), DT, "2-d no bias"),
    Case(lin(T((7,)), T((9,)), T((7, 9)), T((7,))), DT, "1-d x"),
    Case(lin(T((2, 3, 7)), T((2, 3, 9)), T((7, 9)), T((7,))), DT, "3-d x"),
    Case(lin(T((5, 7)), T((5, 9), (1, 5)), T((7, 9), (1, 7)), T((7,), (3,))), DT, "transposed x, w; gapped bias"),
    Case(lin(T((5, 7), (1, 5)), T((5, 9), (12, 1)), T((7, 9), (10, 1)), T((7,))), DT, "column-major y, padded x and w"),
    Case(lin(T((5, 7), (14, 2)), T((5, 9), (18, 2)), T((7, 9), (2, 14)), T((7,))), DT, "no unit strides anywhere (staged)"),
    Case(lin(T((2, 3, 7)), T((2, 3, 9), (9, 18, 1)), T((7, 9)), None), DT, "permuted 3-d x (staged)"),
    Case(lin(T((4, 3, 7), (7, 28, 1)), T((4, 3, 9)), T((7, 9)), T((7,))), DT, "permuted 3-d y (staged)"),
    Case(lin(T((5, 7)), T((5, 9)), T((7, 9), (0, 1)), T((7,), (0,))), DT, "broadcast w rows and bias"),
    Case(lin(T((5, 7)), T((5, 0)), T((7, 0)), T((7,))), DT, "K = 0 (y = b)"),
    Case(lin(T((0, 7)), T((0, 9)), T((7, 9)), T((7,))), DT, "empty batch"),
    *both(lin(T((33, 65)), T((33, 130)), T((65, 130)), T((65,))), "33x130 -> 65", 130),
    *both(lin(T((4, 64, 256)), T((4, 64, 512)), T((256, 512)), T((256,))), "4x64x512 -> 256", 512, ("full",)),
]
