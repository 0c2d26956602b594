from infiniop_py.dtypes import DType
from infiniop_py.spatial import conv_out_size
from infiniop_py.testing.cases import Case, T

from . import SPEC
from .geometry import full_lists

DT = tuple(sorted(SPEC.dtypes))


def out_shape(x, w, attrs) -> tuple:
    nd = len(x) - 2
    p, s, d = full_lists(nd, attrs.get("pads", (0,)), attrs.get("strides", (1,)), attrs.get("dilations", (1,)))
    return (x[0], w[0], *(conv_out_size(x[2 + i], w[2 + i], s[i], p[i], d[i]) for i in range(nd)))


def f32_long(k: int) -> float:
    """f32 tolerance for dot products of length k on values in [-2, 2]."""
    return max(1e-5, 2e-6 * k**0.5 * 4)


def half_long(k: int) -> float:
    """f16/bf16 tolerance for cuDNN's data gradient (conv_transpose's forward) over k terms on
    values in [-2, 2]: its half-precision engines round partial sums (docs/perf/conv.md; torch's
    conv_transpose2d on the same data is as far off)."""
    return max(1e-2, 4e-3 * k**0.5)


def cases(tensors, dtypes, description, attrs, f32_atol=None, half_atol=None, **kw) -> list[Case]:
    """One case; with ``f32_atol`` (``half_atol``), f32 (f16 and bf16) get their own case with
    that absolute tolerance (long dot products) and the other dtypes keep theirs."""
    split = {DType.F32: f32_atol, DType.F16: half_atol, DType.BF16: half_atol}
    own = {d: a for d, a in split.items() if a is not None and d in dtypes}
    rest = tuple(d for d in dtypes if d not in own)
    out = [Case(tensors, rest, description, attrs=attrs, **kw)] if rest else []
    for atol in dict.fromkeys(own.values()):
        dts = tuple(d for d in dtypes if own.get(d) == atol)
        out.append(Case(tensors, dts, description, attrs=attrs, atol=atol, **kw))
    return out


def conv(x, w, bias: bool, dtypes, description, attrs=None, xs=None, ws=None, ys=None, f32_atol=None, **kw) -> list[Case]:
    """Case(s) with y's shape from the formula (see ``cases``)."""
    attrs = attrs or {}
    y = out_shape(x, w, attrs)
    t = {"y": T(y, ys), "x": T(x, xs), "w": T(w, ws), "b": T((w[0],)) if bias else None}
    return cases(t, dtypes, description, attrs, f32_atol, **kw)


_TABLE = [
    conv((2, 3, 9), (4, 3, 3), True, DT, "1-d k3 with bias"),
    conv((2, 4, 11), (6, 2, 3), False, DT, "1-d stride 3 pad 1 groups 2", {"strides": (3,), "pads": (1,), "groups": 2}),
    conv((2, 3, 7, 8), (4, 3, 3, 3), True, DT, "2-d k3 with bias"),
    conv((2, 3, 7, 8), (4, 3, 3, 3), False, DT, "2-d k3 pad 1 (same size)", {"pads": (1,)}),
    conv(
        (1, 4, 9, 7),
        (6, 2, 3, 2),
        True,
        DT,
        "2-d stride (2,3) pad (1,0) dilation (1,2) groups 2",
        {"strides": (2, 3), "pads": (1, 0), "dilations": (1, 2), "groups": 2},
    ),
    conv((2, 8, 9, 9), (8, 1, 3, 3), True, DT, "depthwise 3x3 stride 2 pad 1", {"strides": (2,), "pads": (1,), "groups": 8}),
    conv((2, 3, 6, 7), (6, 1, 5, 5), False, DT, "depthwise multiplier 2, 5x5 pad 2", {"pads": (2,), "groups": 3}),
    conv((1, 4, 7, 11), (4, 1, 3, 3), False, DT, "depthwise dilation 2", {"dilations": (2,), "groups": 4}),
    conv((2, 6, 13), (6, 1, 4), True, DT, "1-d depthwise k4 pad 2", {"pads": (2,), "groups": 6}),
    conv((2, 5, 11, 10), (3, 5, 2, 2), True, DT, "stride 4 > kernel 2", {"strides": (4,)}),
    conv((1, 3, 5, 6, 4), (5, 3, 3, 3, 3), True, DT, "3-d k3"),
    conv(
        (2, 4, 5, 6, 7),
        (4, 2, 2, 3, 2),
        False,
        DT,
        "3-d stride (1,2,2) pad 1 dilation (2,1,2) groups 2",
        {"strides": (1, 2, 2), "pads": (1,), "dilations": (2, 1, 2), "groups": 2},
    ),
    conv((2, 3, 7, 8), (4, 3, 3, 3), True, DT, "channels-last x and y", ys=(120, 1, 24, 4), xs=(168, 1, 24, 3)),
    conv(
        (2, 3, 7, 8),
        (4, 3, 3, 3),
        False,
        DT,
        "padded y rows, permuted x and w",
        ys=(200, 40, 7, 1),
        xs=(3, 6, 384, 48),
        ws=(1, 4, 36, 12),
    ),
    conv((2, 4, 7, 7), (4, 1, 3, 3), True, DT, "depthwise, channels-last", {"pads": (1,), "groups": 4}, xs=(196, 1, 28, 4)),
    conv((0, 3, 7, 8), (4, 3, 3, 3), True, DT, "empty batch"),
    conv((3, 7, 1, 1), (5, 7, 1, 1), True, DT, "1x1 on 1x1"),
    conv((2, 16, 8, 8), (16, 16, 1, 1), True, DT, "1x1 pointwise 16->16"),
    conv((2, 24, 6, 6), (32, 24, 3, 3), True, DT, "2-d 24->32 k3 pad 1 (K = 216)", {"pads": (1,)}),
    conv((2, 40, 9, 9), (20, 40, 3, 3), True, DT, "2-d 40->20 k3 stride 2 (K = 360)", {"strides": (2,)}, f32_atol=f32_long(360)),
    conv((2, 4, 32, 32), (8, 4, 7, 7), True, DT, "tiny grid N2 4->8 32x32 k7", {"pads": (3,)}, suites=("full",)),
    conv(
        (4, 64, 28, 28),
        (64, 64, 3, 3),
        True,
        DT,
        "N4 C64 28x28 k3 (K = 576)",
        {"pads": (1,)},
        f32_atol=f32_long(576),
        suites=("full",),
    ),
    conv(
        (2, 32, 56, 56),
        (32, 1, 3, 3),
        False,
        DT,
        "depthwise 56x56 stride 2",
        {"strides": (2,), "pads": (1,), "groups": 32},
        suites=("full",),
    ),
]
CASES = [case for group in _TABLE for case in group]
