from infiniop_py.testing.cases import Case, T

from . import SPEC

DT = tuple(sorted(SPEC.dtypes))
HF = tuple(d for d in DT if d.name != "F32")
F32 = tuple(d for d in DT if d.name == "F32")


def lb(gx, gw, gb, gy, x, w):
    return {"grad_x": gx, "grad_w": gw, "grad_b": gb, "grad_y": gy, "x": x, "w": w}


def both(t, label, k):
    return [Case(t, HF, label), Case(t, F32, label + " (f32)", atol=8e-6 * k**0.5)]


CASES = [
    Case(lb(T((5, 9)), T((7, 9)), T((7,)), T((5, 7)), T((5, 9)), T((7, 9))), DT, "2-d with grad_b"),
    Case(lb(T((5, 9)), T((7, 9)), None, T((5, 7)), T((5, 9)), T((7, 9))), DT, "no grad_b"),
    Case(lb(T((2, 3, 9)), T((7, 9)), T((7,)), T((2, 3, 7)), T((2, 3, 9)), T((7, 9))), DT, "3-d"),
    Case(lb(T((9,)), T((7, 9)), T((7,)), T((7,)), T((9,)), T((7, 9))), DT, "1-d x"),
    Case(
        lb(T((5, 9), (1, 5)), T((7, 9), (1, 7)), T((7,), (2,)), T((5, 7), (1, 5)), T((5, 9), (12, 1)), T((7, 9), (1, 7))),
        DT,
        "transposed / padded / gapped layouts",
    ),
    Case(
        lb(T((5, 9), (18, 2)), T((7, 9), (18, 2)), T((7,)), T((5, 7), (14, 2)), T((5, 9), (2, 10)), T((7, 9), (2, 14))),
        DT,
        "no unit strides (staged)",
    ),
    Case(
        lb(T((2, 3, 9), (9, 18, 1)), T((7, 9)), T((7,)), T((2, 3, 7), (7, 14, 1)), T((2, 3, 9), (9, 18, 1)), T((7, 9))),
        DT,
        "permuted leading dims (staged)",
    ),
    Case(lb(T((0, 9)), T((7, 9)), T((7,)), T((0, 7)), T((0, 9)), T((7, 9))), DT, "empty batch: grad_w = 0, grad_b = 0"),
    *both(lb(T((130, 33)), T((65, 33)), T((65,)), T((130, 65)), T((130, 33)), T((65, 33))), "130x65x33", 130),
]
