"""Case-table helpers of conv, conv_transpose and conv_backward: the other side's shape from the
formulas, tolerances for long dot products, and one builder per operator (``conv``, ``ct``,
``bw``) that lays a problem out as that operator's tensors.

Every builder takes the problem (x, w shapes, bias or not, attributes) and optional strides of
the tensors, and returns one case, or two or three where f32 (``f32_atol``) or the half types
(``half_atol``) get their own absolute tolerance (see ``cases``).
"""

from __future__ import annotations

from infiniop_py.conv.geometry import DTYPES, full_lists
from infiniop_py.dtypes import DType
from infiniop_py.spatial import conv_out_size, conv_transpose_out_size

from .cases import Case, T

DT = tuple(sorted(DTYPES))


def _lists(nd: int, attrs: dict, *names: str) -> list[tuple[int, ...]]:
    defaults = {"pads": (0,), "strides": (1,), "dilations": (1,), "output_padding": (0,)}
    return full_lists(nd, *(attrs.get(n, defaults[n]) for n in names))


def out_shape(x, w, attrs) -> tuple:
    """y of conv (grad_output of conv_backward) for x (N, Cin, *L) and w (Cout, Cin/G, *k)."""
    nd = len(x) - 2
    p, s, d = _lists(nd, attrs, "pads", "strides", "dilations")
    return (x[0], w[0], *(conv_out_size(x[2 + i], w[2 + i], s[i], p[i], d[i]) for i in range(nd)))


def transpose_out_shape(x, w, attrs) -> tuple:
    """y of conv_transpose for x (N, Cin, *L) and w (Cin, Cout/G, *k)."""
    nd = len(x) - 2
    p, s, d, op = _lists(nd, attrs, "pads", "strides", "dilations", "output_padding")
    groups = attrs.get("groups", 1)
    return (x[0], w[1] * groups, *(conv_transpose_out_size(x[2 + i], w[2 + i], s[i], p[i], d[i], op[i]) for i in range(nd)))


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


def conv(x, w, bias: bool, dtypes, description, attrs=None, xs=None, ws=None, ys=None, **kw) -> list[Case]:
    """conv's case(s): y (strides ``ys``) from the formula, x and w with strides ``xs``, ``ws``."""
    attrs = attrs or {}
    t = {"y": T(out_shape(x, w, attrs), ys), "x": T(x, xs), "w": T(w, ws), "b": T((w[0],)) if bias else None}
    return cases(t, dtypes, description, attrs, **kw)


def ct(x, w, bias: bool, dtypes, description, attrs=None, xs=None, ws=None, ys=None, **kw) -> list[Case]:
    """conv_transpose's case(s): y (strides ``ys``) from the formula, x and w with strides ``xs``, ``ws``."""
    attrs = attrs or {}
    y = transpose_out_shape(x, w, attrs)
    t = {"y": T(y, ys), "x": T(x, xs), "w": T(w, ws), "b": T((y[1],)) if bias else None}
    return cases(t, dtypes, description, attrs, **kw)


def bw(x, w, bias: bool, dtypes, description, attrs=None, xs=None, ws=None, gos=None, gis=None, **kw) -> list[Case]:
    """conv_backward's case(s): grad_output (strides ``gos``) from the forward formula,
    grad_input (``gis``) x's shape, input and weight with strides ``xs``, ``ws``."""
    attrs = attrs or {}
    t = {
        "grad_input": T(x, gis),
        "grad_weight": T(w),
        "grad_bias": T((w[0],)) if bias else None,
        "grad_output": T(out_shape(x, w, attrs), gos),
        "input": T(x, xs),
        "weight": T(w, ws),
    }
    return cases(t, dtypes, description, attrs, **kw)
