from infiniop_py.spatial import conv_transpose_out_size
from infiniop_py.testing.cases import Case, T

from ..conv.cases import cases, f32_long, half_long
from ..conv.geometry import full_lists
from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def out_shape(x, w, groups, attrs) -> tuple:
    nd = len(x) - 2
    p, s, d, op = full_lists(
        nd, attrs.get("pads", (0,)), attrs.get("strides", (1,)), attrs.get("dilations", (1,)), attrs.get("output_padding", (0,))
    )
    return (x[0], w[1] * groups, *(conv_transpose_out_size(x[2 + i], w[2 + i], s[i], p[i], d[i], op[i]) for i in range(nd)))


def ct(
    x, w, bias: bool, dtypes, description, attrs=None, xs=None, ws=None, ys=None, f32_atol=None, half_atol=None, **kw
) -> list[Case]:
    """One case (y's shape from the formula); with ``f32_atol`` (``half_atol``) f32 (f16, bf16)
    get their own case."""
    attrs = attrs or {}
    groups = attrs.get("groups", 1)
    y = out_shape(x, w, groups, attrs)
    t = {"y": T(y, ys), "x": T(x, xs), "w": T(w, ws), "b": T((y[1],)) if bias else None}
    return cases(t, dtypes, description, attrs, f32_atol, half_atol, **kw)


_TABLE = [
    ct((2, 3, 7), (3, 4, 3), True, DT, "1-d k3 with bias"),
    ct((2, 4, 6), (4, 3, 4), False, DT, "1-d stride 2 k4 pad 1 groups 2", {"strides": (2,), "pads": (1,), "groups": 2}),
    ct((2, 3, 5, 6), (3, 4, 3, 3), True, DT, "2-d k3 with bias"),
    ct((2, 4, 5, 5), (4, 3, 4, 4), True, DT, "2-d stride 2 k4 pad 1", {"strides": (2,), "pads": (1,)}),
    ct(
        (1, 3, 4, 5),
        (3, 2, 3, 3),
        False,
        DT,
        "2-d stride 2 output_padding 1",
        {"strides": (2,), "pads": (1,), "output_padding": (1,)},
    ),
    ct(
        (1, 4, 4, 3),
        (4, 3, 3, 2),
        True,
        DT,
        "2-d stride (2,3) pad (1,0) dilation (2,1) output_padding (1,2) groups 2",
        {"strides": (2, 3), "pads": (1, 0), "dilations": (2, 1), "output_padding": (1, 2), "groups": 2},
    ),
    ct((2, 6, 5, 5), (6, 1, 3, 3), True, DT, "depthwise stride 2", {"strides": (2,), "pads": (1,), "groups": 6}),
    ct((1, 4, 4, 4), (4, 2, 3, 3), False, DT, "dilation 2 stride 2 (gcd 2)", {"strides": (2,), "dilations": (2,), "groups": 2}),
    ct((1, 3, 4, 3), (3, 2, 3, 2), False, DT, "dilation 3 stride 2", {"strides": (2,), "dilations": (3,)}),
    ct((2, 3, 3, 4), (3, 2, 2, 2), True, DT, "stride 3 > kernel 2", {"strides": (3,)}),
    ct((1, 3, 3, 4, 2), (3, 5, 3, 3, 3), True, DT, "3-d k3"),
    ct(
        (2, 4, 3, 3, 4),
        (4, 2, 2, 3, 2),
        False,
        DT,
        "3-d stride (1,2,2) pad 1 dilation (2,1,1) groups 2",
        {"strides": (1, 2, 2), "pads": (1,), "dilations": (2, 1, 1), "groups": 2},
    ),
    ct((2, 3, 5, 6), (3, 4, 3, 3), True, DT, "channels-last x and y", {"strides": (2,)}, xs=(90, 1, 18, 3), ys=(572, 1, 52, 4)),
    ct(
        (2, 3, 5, 6),
        (3, 4, 3, 3),
        False,
        DT,
        "padded y rows, permuted x and w",
        {"pads": (1,)},
        ys=(300, 60, 9, 1),
        xs=(3, 6, 48, 8),
        ws=(1, 3, 36, 12),
    ),
    ct((0, 3, 5, 6), (3, 4, 3, 3), True, DT, "empty batch"),
    ct((2, 16, 6, 6), (16, 8, 4, 4), True, DT, "2-d 16->8 stride 2 k4 (K = 64)", {"strides": (2,), "pads": (1,)}),
    ct((2, 40, 5, 5), (40, 12, 3, 3), True, DT, "2-d 40->12 k3 (K = 360)", f32_atol=f32_long(360), half_atol=half_long(360)),
    ct(
        (4, 64, 14, 14),
        (64, 32, 4, 4),
        True,
        DT,
        "2-d 64->32 stride 2 k4 pad 1 (K = 256)",
        {"strides": (2,), "pads": (1,)},
        f32_atol=f32_long(256),
        half_atol=half_long(256),
        suites=("full",),
    ),
]
CASES = [case for group in _TABLE for case in group]
