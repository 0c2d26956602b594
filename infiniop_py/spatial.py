"""Spatial attributes and output sizes shared by the convolution and pooling operators (ops.md §6).

Tensors are (N, C, *S) with n = len(S) in {1, 2, 3}. List attributes (kernel_size, stride(s),
padding/pads, dilations, output_padding) hold n ints; a length-1 list broadcasts to n.
"""

from __future__ import annotations

from .spec import Checker
from .status import Status


def spatial_rank(check: Checker, name: str) -> int:
    """The number of spatial dims n of tensor ``name``: (N, C, *S) with 1 <= n <= 3, else BAD_TENSOR_SHAPE."""
    d = check[name]
    if d.ndim not in (3, 4, 5):
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor '{name}' must be (N, C, *S) with 1-3 spatial dims, got shape {list(d.shape)}",
        )
    return d.ndim - 2


def spatial_list(check: Checker, name: str, value, n: int, *, minimum: int = 0, default: int | None = None) -> tuple[int, ...]:
    """Attribute ``name`` as n ints: a length-1 list broadcasts; None or () takes ``default`` when given.

    Anything else (wrong length, a value below ``minimum``) is BAD_PARAM naming the attribute."""
    if value is None or (not isinstance(value, int) and len(value) == 0):
        if default is None:
            check.fail(Status.BAD_PARAM, f"attribute '{name}' is required")
        value = (default,)
    if isinstance(value, int):
        value = (value,)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        check.fail(Status.BAD_PARAM, f"attribute '{name}' must hold 1 or {n} ints for {n} spatial dims, got {list(value)}")
    if any(v < minimum for v in value):
        check.fail(Status.BAD_PARAM, f"attribute '{name}' values must be >= {minimum}, got {list(value)}")
    return value


def pad3(values, fill: int) -> tuple[int, ...]:
    """Spatial values of 1-3 dims as 3 (D, H, W): leading dims of ``fill`` for 1-d and 2-d."""
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values


def conv_out_size(length: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Output length of a convolution: floor((L + 2p - d(k-1) - 1) / s) + 1 (may be <= 0 when the kernel does not fit)."""
    return (length + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def conv_transpose_out_size(length: int, kernel: int, stride: int, pad: int, dilation: int, output_padding: int) -> int:
    """Output length of a transposed convolution: (L-1)s - 2p + d(k-1) + op + 1."""
    return (length - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1


def pool_out_size(length: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """Pool output length (ops.md §6.4): floor or ceil of (L + 2p - k)/s, plus 1; in ceil_mode a last
    window that would start in the right padding is dropped, as torch does."""
    span = length + 2 * pad - kernel
    if span < 0:
        return 0
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= length + pad:
        out -= 1
    return out


def expect_spatial_shape(check: Checker, name: str, want: tuple[int, ...]) -> None:
    """Tensor ``name`` must have shape ``want`` exactly, else BAD_TENSOR_SHAPE with both shapes."""
    got = tuple(check[name].shape)
    if got != tuple(want):
        check.fail(Status.BAD_TENSOR_SHAPE, f"tensor '{name}' shape {list(got)} does not match the expected {list(want)}")


def packed_channel_order(shape, strides) -> bool:
    """Whether an (N, C, *S) tensor is packed in channel-first (N, C, *S) or channel-last
    (N, *S, C) order; dimensions of extent 1 may have any stride."""
    shape, strides = tuple(shape), tuple(strides)
    n = len(shape)
    for order in (tuple(range(n)), (0, *range(2, n), 1)):
        step = 1
        for i in reversed(order):
            if shape[i] != 1 and strides[i] != step:
                break
            step *= shape[i]
        else:
            return True
    return False
