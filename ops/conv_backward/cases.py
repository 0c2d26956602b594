from infiniop_py.testing.cases import Case, T

from ..conv.cases import cases, f32_long, out_shape
from . import SPEC

DT = tuple(sorted(SPEC.dtypes))


def bw(
    x, w, bias: bool, dtypes, description, attrs=None, xs=None, ws=None, gos=None, gis=None, f32_atol=None, **kw
) -> list[Case]:
    """One case (grad_output's shape from the forward formula); with ``f32_atol`` f32 gets its own case."""
    attrs = attrs or {}
    y = out_shape(x, w, attrs)
    t = {
        "grad_input": T(x, gis),
        "grad_weight": T(w),
        "grad_bias": T((w[0],)) if bias else None,
        "grad_output": T(y, gos),
        "input": T(x, xs),
        "weight": T(w, ws),
    }
    return cases(t, dtypes, description, attrs, f32_atol, **kw)


_TABLE = [
    bw((2, 3, 9), (4, 3, 3), True, DT, "1-d k3 with bias"),
    bw((2, 4, 11), (6, 2, 3), False, DT, "1-d stride 3 pad 1 groups 2", {"strides": (3,), "pads": (1,), "groups": 2}),
    bw((2, 3, 7, 8), (4, 3, 3, 3), True, DT, "2-d k3 with bias"),
    bw((2, 3, 7, 8), (4, 3, 3, 3), False, DT, "2-d k3 pad 1", {"pads": (1,)}),
    bw(
        (1, 4, 9, 7),
        (6, 2, 3, 2),
        True,
        DT,
        "2-d stride (2,3) pad (1,0) dilation (1,2) groups 2",
        {"strides": (2, 3), "pads": (1, 0), "dilations": (1, 2), "groups": 2},
    ),
    bw((2, 6, 9, 9), (6, 1, 3, 3), True, DT, "depthwise 3x3 stride 2 pad 1", {"strides": (2,), "pads": (1,), "groups": 6}),
    bw((1, 3, 8, 8), (2, 3, 2, 2), False, DT, "dilation 2 stride 2", {"strides": (2,), "dilations": (2,)}),
    bw((2, 5, 11, 10), (3, 5, 2, 2), True, DT, "stride 4 > kernel 2 (uncovered inputs)", {"strides": (4,)}),
    bw((1, 3, 5, 6, 4), (5, 3, 3, 3, 3), True, DT, "3-d k3", f32_atol=f32_long(81)),
    bw(
        (2, 4, 5, 6, 7),
        (4, 2, 2, 3, 2),
        False,
        DT,
        "3-d stride (1,2,2) pad 1 dilation (2,1,2) groups 2",
        {"strides": (1, 2, 2), "pads": (1,), "dilations": (2, 1, 2), "groups": 2},
    ),
    bw(
        (2, 3, 7, 8),
        (4, 3, 3, 3),
        True,
        DT,
        "channels-last tensors",
        xs=(168, 1, 24, 3),
        gos=(120, 1, 24, 4),
        gis=(168, 1, 24, 3),
    ),
    bw(
        (2, 3, 7, 8),
        (4, 3, 3, 3),
        False,
        DT,
        "padded grad_output rows, permuted input and weight",
        gos=(200, 40, 7, 1),
        xs=(3, 6, 384, 48),
        ws=(1, 4, 36, 12),
    ),
    bw((0, 3, 7, 8), (4, 3, 3, 3), True, DT, "empty batch (zero weight and bias gradients)"),
    bw((2, 16, 8, 8), (16, 16, 1, 1), True, DT, "1x1 pointwise 16->16", f32_atol=f32_long(128)),
    bw((3, 24, 6, 6), (32, 24, 3, 3), True, DT, "2-d 24->32 k3 pad 1", {"pads": (1,)}, f32_atol=f32_long(288)),
    bw(
        (4, 32, 14, 14),
        (32, 32, 3, 3),
        True,
        DT,
        "N4 C32 14x14 k3 pad 1",
        {"pads": (1,)},
        f32_atol=f32_long(784),
        suites=("full",),
    ),
]
CASES = [case for group in _TABLE for case in group]
