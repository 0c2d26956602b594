"""Layout helpers shared by the frameworks: dimension collapsing and fast-division constants."""

from __future__ import annotations

import math
import struct


def collapse(shape, strides_list, order_by: int = 0):
    """Merge and reorder dimensions of operands that share ``shape``.

    Dims of size 1 are dropped; the rest are ordered by the ``order_by`` operand's strides,
    largest first (so the innermost dim is that operand's fastest), then adjacent dims i, j are
    merged when ``stride[i] == stride[j] * shape[j]`` holds for every operand.
    Returns (shape, [strides per operand]) with the innermost dim last.
    """
    dims = [i for i, d in enumerate(shape) if d != 1]
    key = strides_list[order_by]
    dims.sort(key=lambda i: (-key[i], *(-s[i] for s in strides_list)))
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides_list]
    for i in dims:
        if out_shape and all(st[-1] == s[i] * shape[i] for st, s in zip(out_strides, strides_list)):
            out_shape[-1] *= shape[i]
            for st, s in zip(out_strides, strides_list):
                st[-1] = s[i]
        else:
            out_shape.append(shape[i])
            for st, s in zip(out_strides, strides_list):
                st.append(s[i])
    return tuple(out_shape), [tuple(s) for s in out_strides]


def fast_div_params(d: int) -> tuple[int, int, int]:
    """(d, magic, shift) for FastDiv in iop_common.cuh (valid for n, d < 2^31)."""
    if d < 1:
        d = 1
    shift = 0
    while (1 << shift) < d:
        shift += 1
    magic = ((1 << 32) * ((1 << shift) - d)) // d + 1
    return d, magic & 0xFFFFFFFF, shift


MAXD = 8


def pack_strided_meta(shape, strides_list) -> bytes:
    """Bytes of ``StridedMeta`` (iop_common.cuh) for up to 4 operands and ``MAXD`` dims."""
    nd = len(shape)
    assert nd <= MAXD and len(strides_list) <= 4
    shp = list(shape) + [1] * (MAXD - nd)
    blob = struct.pack(f"<{MAXD}q", *shp)
    for k in range(4):
        st = list(strides_list[k]) if k < len(strides_list) else []
        blob += struct.pack(f"<{MAXD}q", *(st + [0] * (MAXD - len(st))))
    for d in shp:
        # FastDiv serves the 32-bit index paths only, which larger dims never take (their
        # kernels divide in 64 bits); such a dim gets the identity divisor, which fits the struct
        blob += struct.pack("<3I", *fast_div_params(d if d < 2**31 else 1))
    blob += struct.pack("<qii", math.prod(shape), nd, 0)
    return blob


def max_offset(shape, strides) -> int:
    return sum((d - 1) * s for d, s in zip(shape, strides) if d > 0)
