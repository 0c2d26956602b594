"""Declarations of the common elementwise shapes, on top of :func:`elementwise_op`.

    SPEC = unary_op("exp", summary="output = e^x")             # output = f(input), floats
    SPEC = arithmetic_op("add", "+", np.add, F | SI | {U8})    # c = a + b
    SPEC = fill_op("ones", 1)                                  # y = 1, x gives the shape
    SPEC = backward_op("relu_backward", cuda=..., numpy=..., summary=..., ...)  # grad_input

Each fills in the tensor roles of its shape, the C-style stem (the name in CamelCase unless
``stem=`` says otherwise) and, from the torch function it names, the reference and the docs'
torch column; every other ``elementwise_op`` keyword passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import ALL, F, H
from ..spec import OpSpec
from . import elementwise_op, float_expr

_F_PREFIX = "nn.functional."


def camel(name: str) -> str:
    """The default C-style stem of an operator name: ``leaky_relu`` -> ``LeakyRelu``."""
    return "".join(part.capitalize() for part in name.split("_"))


def torch_function(path: str) -> Callable:
    """``torch.<path>`` (e.g. ``"cos"``, ``"nn.functional.silu"``), looked up at call time so
    that declaring an operator does not import torch."""

    def fn(*args):
        import torch

        f = torch
        for part in path.split("."):
            f = getattr(f, part)
        return f(*args)

    return fn


def torch_text(path: str, args: str) -> str:
    """The docs' torch column for ``torch.<path>(args)``; ``torch.nn.functional`` is shown as ``F``."""
    shown = "F." + path.removeprefix(_F_PREFIX) if path.startswith(_F_PREFIX) else "torch." + path
    return f"{shown}({args})"


def by_output(accurate: str, half: str | Callable[..., str]) -> Callable:
    """A ``cuda_variant``: ``half`` (an expression, or ``half(dtype)`` giving one) for f16/bf16
    outputs, ``accurate`` for f32/f64."""
    pick = half if callable(half) else (lambda _dt: half)
    return lambda dt, _choices: pick(dt) if dt in H else accurate


def unary_op(
    name: str,
    *,
    summary: str,
    torch_fn: str | None = None,
    cuda: str | None = None,
    numpy: Callable | None = None,
    dtypes=F,
    stem: str | None = None,
    **extra,
) -> OpSpec:
    """``output = f(input)`` (GGUF / keyword aliases ``y`` and ``x``).

    ``torch_fn``: the torch function, a path under ``torch`` (default ``name``); it is the
    reference and the docs' torch column unless ``reference=`` / ``torch=`` are given.
    ``cuda`` defaults to the C++ math function of the same name (``float_expr("{name}(input)")``),
    ``numpy`` to NumPy's.
    """
    fn = torch_fn or name
    extra.setdefault("reference", lambda input: torch_function(fn)(input))
    extra.setdefault("torch", torch_text(fn, "input"))
    return elementwise_op(
        name=name,
        stem=stem or camel(name),
        out="output",
        ins=("input",),
        cuda=float_expr(f"{{{name}}}(input)") if cuda is None else cuda,
        numpy=getattr(np, name) if numpy is None else numpy,
        dtypes=dtypes,
        summary=summary,
        tensor_aliases={"x": "input", "y": "output"},
        **extra,
    )


def binary_op(name: str, *, cuda: str, numpy: Callable, dtypes, summary: str, torch_fn: str | None = None, **extra) -> OpSpec:
    """``c = f(a, b)``; ``torch_fn`` as for :func:`unary_op`."""
    fn = torch_fn or name
    extra.setdefault("reference", lambda a, b: torch_function(fn)(a, b))
    extra.setdefault("torch", torch_text(fn, "a, b"))
    extra.setdefault("stem", camel(name))
    return elementwise_op(name=name, out="c", ins=("a", "b"), cuda=cuda, numpy=numpy, dtypes=dtypes, summary=summary, **extra)


def backward_op(name: str, *, cuda: str, numpy: Callable, summary: str, dtypes=F, **extra) -> OpSpec:
    """``grad_input = f(input, grad_output)``, the gradient of a pointwise activation; grad_input
    may alias grad_output (not input)."""
    return elementwise_op(
        name=name,
        stem=camel(name),
        out="grad_input",
        ins=("input", "grad_output"),
        inplace=("grad_output",),
        cuda=cuda,
        numpy=numpy,
        dtypes=dtypes,
        summary=summary,
        **extra,
    )


def arithmetic_op(name: str, symbol: str, numpy: np.ufunc, dtypes, note: str = "") -> OpSpec:
    """``c = a <symbol> b``, the C++ operator; ``numpy`` is the matching ufunc (the CPU backend
    has compiled half-precision loops for np.add / subtract / multiply / true_divide)."""
    expr = f"a {symbol} b"
    return binary_op(name, cuda=expr, numpy=numpy, dtypes=dtypes, summary=f"c = {expr}{note}")


def fill_op(name: str, value: int) -> OpSpec:
    """``y = value`` in y's dtype; x supplies only the shape (it is never read, any dtype)."""

    def dtype_rule(check, out, ins):
        check.dtype_in(out, ALL)

    return elementwise_op(
        name=name,
        stem=camel(name),
        out="y",
        ins=("x",),
        reads=(),
        inplace=("x",),
        cuda=str(value),
        numpy=lambda: value,
        dtypes=ALL,
        dtype_rule=dtype_rule,
        reference=lambda x: torch_function(f"{name}_like")(x),
        torch=f"torch.{name}_like(x)",
        summary=f"y = {value}",
    )
