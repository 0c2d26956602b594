"""Shared pieces of the four pooling operators (ops.md §6.4-6.8): avg_pool, avg_pool_backward,
max_pool and max_pool_backward.

- ``ATTRS``: kernel_size, stride (None or empty: kernel_size), padding, ceil_mode.
- ``validate_forward`` / ``validate_backward``: every create-time check; the Info carries a
  frozen :class:`Geometry` (k, s, p, L, O per spatial dim) as ``info.geom``.
- ``cpu.forward`` / ``cpu.backward``: the NumPy backend (``cpu.py``).
- ``nvidia_factory``: the CUDA backend (``cuda.py``; generic kernels in ``pool.cu``, the fast paths
  of common 2-d windows in ``pool_fast.cu``).
- ``reference_forward`` / ``reference_backward``: torch float64 (autograd for the backward).
- ``pool_op``: the OpSpec of each of the four operators.

Windows (ops.md §6.4): window o of a spatial dim covers [o*s - p, o*s - p + k); its in-bounds part
is that range intersected with [0, L). Every window has at least one in-bounds element (p <= k/2
and the ceil_mode rule guarantee it), so a max is always taken over real input values.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import F
from ..spatial import expect_spatial_shape, pool_out_size, spatial_list, spatial_rank
from ..spec import Attr, Checker, Info, OpSpec, inp, out
from ..status import Status

DTYPES = F

ATTRS = (
    Attr("kernel_size", "ints", aliases=("kernel_shape",), doc="window size per spatial dim (1 or n ints)"),
    Attr("stride", "ints", None, aliases=("strides",), doc="window step per spatial dim; None or empty: kernel_size"),
    Attr("padding", "ints", (0,), aliases=("pads",), doc="implicit padding on both sides, 0 <= p <= kernel_size // 2"),
    Attr(
        "ceil_mode",
        "bool",
        False,
        doc="ceil instead of floor in the output size (a window starting in the right padding is dropped)",
    ),
)


@dataclass(frozen=True)
class Geometry:
    """Sizes of one pooling problem: batch N, channels C and, per spatial dim, the input length
    L, output length O, kernel k, stride s and padding p."""

    N: int
    C: int
    L: tuple
    O: tuple  # noqa: E741 - the spec's name
    k: tuple
    s: tuple
    p: tuple
    ceil_mode: bool

    @property
    def n(self) -> int:
        return len(self.L)

    def divisors(self, d: int) -> list[int]:
        """avg_pool's count_include_pad divisor factor of each window along spatial dim d (ops.md
        §6.5): min(start + k, L + p) - start with start = o*s - p."""
        L, k, s, p = self.L[d], self.k[d], self.s[d], self.p[d]
        return [min(o * s - p + k, L + p) - (o * s - p) for o in range(self.O[d])]

    def first_inside(self, d: int) -> list[int]:
        """Per window along dim d, the offset within the window of its first in-bounds element."""
        return [max(0, self.p[d] - o * self.s[d]) for o in range(self.O[d])]


def normalize(n: int, kernel_size, stride, padding) -> tuple[tuple, tuple, tuple]:
    """(k, s, p) as n ints each, for references and tools that skip validation."""

    def expand(v, default):
        if v is None or (not isinstance(v, int) and len(v) == 0):
            return default
        v = (v,) if isinstance(v, int) else tuple(int(x) for x in v)
        return v * n if len(v) == 1 else v

    k = expand(kernel_size, None)
    return k, expand(stride, k), expand(padding, (0,) * n)


def geometry(check: Checker, name: str) -> Geometry:
    """Attributes and output sizes from tensor ``name`` (the pool's input): BAD_TENSOR_SHAPE for a
    rank outside 3-5, an empty spatial dim or a kernel larger than the padded input; BAD_PARAM
    naming the attribute for wrong list lengths or values."""
    n = spatial_rank(check, name)
    a = check.attrs
    k = spatial_list(check, "kernel_size", a["kernel_size"], n, minimum=1)
    stride = a["stride"]
    if stride is None or len(stride) == 0:
        s = k
    else:
        s = spatial_list(check, "stride", stride, n, minimum=1)
    p = spatial_list(check, "padding", a["padding"], n, minimum=0, default=0)
    for d in range(n):
        if p[d] > k[d] // 2:
            check.fail(
                Status.BAD_PARAM, f"attribute 'padding' {list(p)} must be at most kernel_size // 2 (kernel_size {list(k)})"
            )
    shape = check[name].shape
    L = tuple(shape[2:])
    O = []  # noqa: E741
    for d in range(n):
        if L[d] == 0:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' spatial dim {d + 2} is empty: shape {list(shape)}")
        o = pool_out_size(L[d], k[d], s[d], p[d], a["ceil_mode"])
        if o < 1:
            check.fail(
                Status.BAD_TENSOR_SHAPE,
                f"kernel_size {k[d]} is larger than the padded input ({L[d]} + 2*{p[d]}) of tensor '{name}' spatial dim {d + 2}",
            )
        O.append(o)
    return Geometry(shape[0], shape[1], L, tuple(O), k, s, p, bool(a["ceil_mode"]))


def validate_forward(check: Checker) -> Info:
    """create (output | input ; kernel_size, stride, padding, ceil_mode)."""
    check.dtype_in("input", DTYPES)
    check.same_dtype("input", "output")
    g = geometry(check, "input")
    expect_spatial_shape(check, "output", (g.N, g.C, *g.O))
    check.writable("output")
    return Info(check.op, check.tensors, check.attrs, geom=g)


def validate_backward(check: Checker) -> Info:
    """create (grad_input | grad_output, input ; kernel_size, stride, padding, ceil_mode)."""
    check.dtype_in("grad_output", DTYPES)
    check.same_dtype("grad_output", "grad_input", "input")
    g = geometry(check, "input")
    expect_spatial_shape(check, "grad_input", check["input"].shape)
    expect_spatial_shape(check, "grad_output", (g.N, g.C, *g.O))
    check.writable("grad_input")
    return Info(check.op, check.tensors, check.attrs, geom=g)


# -- references (torch, float64) ----------------------------------------------------------------
def _torch_pool(kind: str, x, kernel_size, stride, padding, ceil_mode):
    import torch.nn.functional as F  # noqa: N812

    n = x.ndim - 2
    k, s, p = normalize(n, kernel_size, stride, padding)
    if kind == "avg":
        return getattr(F, f"avg_pool{n}d")(x, k, s, p, ceil_mode=bool(ceil_mode), count_include_pad=True)
    return getattr(F, f"max_pool{n}d")(x, k, s, p, dilation=1, ceil_mode=bool(ceil_mode))


def reference_forward(kind: str):
    """``F.avg_pool{n}d(..., count_include_pad=True)`` or ``F.max_pool{n}d`` on the stored values."""

    def reference(input, kernel_size, stride=None, padding=0, ceil_mode=False):  # noqa: A002
        return {"output": _torch_pool(kind, input, kernel_size, stride, padding, ceil_mode)}

    return reference


def reference_backward(kind: str):
    """grad_input by autograd of the forward in float64 (torch's max rule: first maximum in scan
    order, the last NaN when there is one)."""

    def reference(grad_output, input, kernel_size, stride=None, padding=0, ceil_mode=False):  # noqa: A002
        import torch

        with torch.enable_grad():
            x = input.detach().clone().requires_grad_(True)
            y = _torch_pool(kind, x, kernel_size, stride, padding, ceil_mode)
            y.backward(grad_output)
        return {"grad_input": x.grad}

    return reference


# -- output inference for ``iop.ops`` -------------------------------------------------------------
def infer_forward(input, kernel_size, stride=None, padding=0, ceil_mode=False):  # noqa: A002
    """Output descriptor of a forward pool: (N, C, *O). Attributes it cannot size are left to
    create's validation (the input's shape is returned then)."""
    from ..tensor import create_tensor_descriptor

    shape = tuple(input.shape)
    try:
        k, s, p = normalize(len(shape) - 2, kernel_size, stride, padding)
        out = tuple(pool_out_size(L, kk, ss, pp, bool(ceil_mode)) for L, kk, ss, pp in zip(shape[2:], k, s, p, strict=True))
        if len(shape) in (3, 4, 5) and all(o >= 1 for o in out) and min(s) >= 1:
            shape = (*shape[:2], *out)
    except (TypeError, ValueError):
        pass
    return {"output": create_tensor_descriptor(shape, None, input.dtype)}


def infer_backward(grad_output, input, **_):  # noqa: A002
    """grad_input takes the input's shape."""
    from ..tensor import create_tensor_descriptor

    return {"grad_input": create_tensor_descriptor(input.shape, None, input.dtype)}


# -- the operators ------------------------------------------------------------------------------------
KERNEL_SOURCES = ("../../infiniop_py/pool/pool.cu", "../../infiniop_py/pool/pool_fast.cu")


def pool_op(name: str, *, torch: str, summary: str) -> OpSpec:
    """The OpSpec of ``name``, one of avg_pool, max_pool, avg_pool_backward, max_pool_backward:
    a forward is (output | input), a backward (grad_input | grad_output, input); the attributes,
    validation, both backends, the reference, output inference and GGUF names follow from the
    kind (avg, max) and the direction. ``torch`` and ``summary``: the docs' lines."""
    from . import cpu, cuda

    kind, _, rest = name.partition("_pool")
    backward = rest == "_backward"
    gguf = {"avg": "averagepool", "max": "maxpool"}[kind] + rest
    if backward:
        tensors, reads = (out("grad_input"), inp("grad_output"), inp("input")), ("grad_output", "input")
    else:
        tensors, reads = (out("output"), inp("input")), ("input",)
    return OpSpec(
        name=name,
        stem="".join(w.capitalize() for w in name.split("_")),
        tensors=tensors,
        attrs=ATTRS,
        validate=validate_backward if backward else validate_forward,
        dtypes=DTYPES,
        cpu=(cpu.backward if backward else cpu.forward)(kind),
        nvidia=cuda.nvidia_factory(cuda.MODES[name], tensors[0].name, reads),
        reference=(reference_backward if backward else reference_forward)(kind),
        infer=infer_backward if backward else infer_forward,
        torch=torch,
        summary=summary,
        gguf_names=(gguf,),
        kernel_sources=KERNEL_SOURCES,
    )
