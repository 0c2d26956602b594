"""Validation and geometry shared by conv, conv_transpose and conv_backward (ops.md §6.0-§6.3).

Every check happens here, at create, and names the argument. The result is a frozen
:class:`Geometry`: batch, channels, groups and the per-dim spatial numbers, with which both
backends plan. ``forward`` describes the convolution as a mapping from a "small" side to a
"large" one: for conv and conv_backward, input (length L) -> output (length O) with
O = floor((L + 2p - d(k-1) - 1)/s) + 1; for conv_transpose the roles swap (its input is the
small side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infiniop_py.dtypes import F
from infiniop_py.spatial import conv_out_size, conv_transpose_out_size, spatial_list, spatial_rank
from infiniop_py.spec import Attr, Checker
from infiniop_py.status import Status

DTYPES = F


def attrs(transpose: bool = False, c_rank: bool = False) -> tuple[Attr, ...]:
    """The create attributes of the family, in ops.md order (then the tuning ones)."""
    out = [
        Attr("pads", "ints", (0,), aliases=("padding", "pad"), doc="zero padding per spatial dim (length 1 broadcasts)"),
        Attr("strides", "ints", (1,), aliases=("stride",), doc="stride per spatial dim (length 1 broadcasts)"),
        Attr("dilations", "ints", (1,), aliases=("dilation",), doc="dilation per spatial dim (length 1 broadcasts)"),
    ]
    if transpose:
        out.append(Attr("output_padding", "ints", (0,), doc="extra size on one side of each output dim, < max(stride, dilation)"))
    out.append(Attr("groups", "int", 1, aliases=("group",), doc="channel groups; Cin and Cout divisible by it"))
    if c_rank:
        out.append(Attr("n", "int", None, doc="C-style only: the number of spatial dims (length of pads/strides/dilations)"))
    out += [
        Attr(
            "allow_tf32", "bool", False, doc="NVIDIA: let f32 use TF32 tensor cores (a cuDNN plan); f32 stays true f32 by default"
        ),
        Attr(
            "plan",
            "str",
            None,
            doc="pin the plan by name (NVIDIA: a config, 'measure': time the candidates at create; CPU: a name ending in '-f64' accumulates f32 in f64); None: the rule table",
        ),
    ]
    return tuple(out)


@dataclass(frozen=True)
class Geometry:
    """Convolution numbers. ``L``: lengths of the data tensor (x for conv and conv_backward's
    input, x for conv_transpose); ``O``: lengths of the other side; ``k``, ``s``, ``p``, ``d``:
    kernel, stride, padding, dilation; ``op``: output_padding (conv_transpose only).
    ``cin``/``cout`` are the channels of the convolution's input and output sides (for
    conv_transpose: x's and y's channels)."""

    nd: int
    batch: int
    cin: int
    cout: int
    groups: int
    L: tuple[int, ...]
    O: tuple[int, ...]  # noqa: E741 - the spec's name
    k: tuple[int, ...]
    s: tuple[int, ...]
    p: tuple[int, ...]
    d: tuple[int, ...]
    op: tuple[int, ...]

    @property
    def cin_g(self) -> int:
        return self.cin // self.groups

    @property
    def cout_g(self) -> int:
        return self.cout // self.groups

    @property
    def kvol(self) -> int:
        return math.prod(self.k)


def check_plan(check: Checker, known) -> None:
    """A pinned plan must be a name the operator knows (whether it can run the problem is the
    backend's business at create)."""
    pinned = check.attrs.get("plan")
    if pinned is not None and pinned not in known:
        check.fail(Status.BAD_PARAM, f"attribute 'plan'={pinned!r} is not a plan of {check.op} (known: {sorted(known)})")


def full_lists(nd: int, *values) -> list[tuple[int, ...]]:
    """List attributes as given to a reference: each broadcast to nd ints (a length-1 list repeats)."""
    return [tuple(v) * nd if len(tuple(v)) == 1 else tuple(v) for v in values]


def _lists(check: Checker, nd: int, transpose: bool):
    a = check.attrs
    p = spatial_list(check, "pads", a["pads"], nd, minimum=0, default=0)
    s = spatial_list(check, "strides", a["strides"], nd, minimum=1, default=1)
    d = spatial_list(check, "dilations", a["dilations"], nd, minimum=1, default=1)
    op = (0,) * nd
    if transpose:
        op = spatial_list(check, "output_padding", a["output_padding"], nd, minimum=0, default=0)
        for i in range(nd):
            if op[i] >= max(s[i], d[i]):
                check.fail(
                    Status.BAD_PARAM,
                    f"attribute 'output_padding' {list(op)} must be < max(stride, dilation) = "
                    f"{[max(a, b) for a, b in zip(s, d)]} in every dim",
                )
    groups = a["groups"]
    if groups < 1:
        check.fail(Status.BAD_PARAM, f"attribute 'groups' must be >= 1, got {groups}")
    n = a.get("n")
    if n is not None and n != nd:
        check.fail(Status.BAD_PARAM, f"attribute 'n' (spatial dims) is {n} but the tensors have {nd}")
    return p, s, d, op, groups


def _same_rank(check: Checker, ref: str, *names: str) -> None:
    want = check[ref].ndim
    for n in names:
        t = check[n]
        if t is not None and t.ndim != want:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{n}' shape {list(t.shape)} must have the rank of '{ref}' ({want})")


def bias_shape(check: Checker, name: str, channels: int) -> None:
    """A bias-shaped tensor ``name`` (when given) is (channels,)."""
    b = check[name]
    if b is not None and b.shape != (channels,):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(b.shape)} must be [{channels}]")


def _data(check: Checker, name: str) -> None:
    t = check[name]
    if t.shape[1] < 1 or any(v < 1 for v in t.shape[2:]):
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor '{name}' shape {list(t.shape)} needs at least one channel and one element per spatial dim",
        )


def _start(check: Checker, x: str, w: str, y: str, transpose: bool):
    """The checks both directions begin with; (nd, (p, s, d, op, groups), N, Cin, k)."""
    nd = spatial_rank(check, x)
    _same_rank(check, x, w, y)
    lists = _lists(check, nd, transpose)
    groups = lists[-1]
    _data(check, x)
    n, cin = check[x].shape[:2]
    if cin % groups:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{x}' has {cin} channels, not divisible by groups={groups}")
    return nd, lists, n, cin, tuple(check[w].shape[2:])


def _finish(check: Checker, y: str, b: str | None, want: tuple, cout: int) -> None:
    """The checks both directions end with: y's shape, then b's."""
    yd = check[y]
    if yd.shape != want:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{y}' shape {list(yd.shape)} does not match the expected {list(want)}")
    if b is not None:
        bias_shape(check, b, cout)


def forward(check: Checker, x: str, w: str, y: str, b: str | None) -> Geometry:
    """conv / conv_backward: x (N, Cin, *L), w (Cout, Cin/G, *k), y (N, Cout, *O), b (Cout,)."""
    nd, (p, s, d, op, groups), n, cin, k = _start(check, x, w, y, False)
    xd, wd = check[x], check[w]
    cout = wd.shape[0]
    if cout % groups:
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{w}' has {cout} output channels, not divisible by groups={groups}")
    if wd.shape[1] != cin // groups or any(v < 1 for v in k):
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor '{w}' shape {list(wd.shape)} must be [Cout, Cin/groups = {cin // groups}, *kernel] with kernel sizes >= 1",
        )
    L = tuple(xd.shape[2:])
    O = tuple(conv_out_size(L[i], k[i], s[i], p[i], d[i]) for i in range(nd))  # noqa: E741
    if any(v < 1 for v in O):
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"kernel {list(k)} with dilation {list(d)} is larger than the padded input {[a + 2 * q for a, q in zip(L, p)]} "
            f"of tensor '{x}'",
        )
    _finish(check, y, b, (n, cout, *O), cout)
    return Geometry(nd, n, cin, cout, groups, L, O, k, s, p, d, op)


def transpose(check: Checker, x: str, w: str, y: str, b: str | None) -> Geometry:
    """conv_transpose: x (N, Cin, *L), w (Cin, Cout/G, *k), y (N, Cout, *O), b (Cout,)."""
    nd, (p, s, d, op, groups), n, cin, k = _start(check, x, w, y, True)
    xd, wd = check[x], check[w]
    if wd.shape[0] != cin or any(v < 1 for v in k):
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor '{w}' shape {list(wd.shape)} must be [Cin = {cin}, Cout/groups, *kernel] with kernel sizes >= 1",
        )
    cout = wd.shape[1] * groups
    L = tuple(xd.shape[2:])
    O = tuple(conv_transpose_out_size(L[i], k[i], s[i], p[i], d[i], op[i]) for i in range(nd))  # noqa: E741
    if any(v < 1 for v in O):
        check.fail(Status.BAD_TENSOR_SHAPE, f"padding {list(p)} leaves no output (output size {list(O)})")
    _finish(check, y, b, (n, cout, *O), cout)
    return Geometry(nd, n, cin, cout, groups, L, O, k, s, p, d, op)
