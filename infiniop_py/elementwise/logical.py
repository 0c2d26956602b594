"""Truth values and bit-exact storage types of the select and comparison operators (where,
equal, logical_and, logical_or).

Their NVIDIA kernels move data as the unsigned integer of its size and read integer or bool
operands as unsigned integers of theirs (nonzero is the same test), so a few instantiations
cover every dtype pair; float operands are compared as floats (-0.0 is false, NaN is true).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import SI, DType, F, is_float, itemsize
from . import split_compile_units
from .declare import binary_op, camel

DATA = F | SI | {DType.U8, DType.BOOL}  # the data (and condition) dtypes of the family
LOGICAL_OUT = frozenset({DType.BOOL, DType.U8, DType.I8})  # a truth value: bool, or a 0/1 byte
_BY_SIZE = {1: DType.U8, 2: DType.U16, 4: DType.U32, 8: DType.U64}


def bits_type(dtype: DType) -> DType:
    """The unsigned integer type of the same size (bit-exact storage stand-in)."""
    return _BY_SIZE[itemsize(dtype)]


def truth_type(dtype: DType) -> DType:
    """A storage type whose `!= 0` test gives the same truth value as ``dtype``'s."""
    return dtype if is_float(dtype) else bits_type(dtype)


TRUTH_TYPES = sorted({truth_type(d) for d in DATA})


def logical_dtypes(check, out, ins):
    """a and b: any of DATA (they may differ); c: bool, or u8/i8 holding 0/1."""
    check.dtype_in(out, LOGICAL_OUT)
    for n in ins:
        check.dtype_in(n, DATA)


def logical_kernel_types(name, dtype):
    """c is written as a 0/1 byte whatever its 1-byte type; inputs are read by truth value."""
    return DType.U8 if name == "c" else truth_type(dtype)


def logical_combos():
    return [(DType.U8, (x, y)) for x in TRUTH_TYPES for y in TRUTH_TYPES]


def logical_op(word: str, cxx: str):
    """``logical_<word>``: c = (a != 0) <cxx> (b != 0) for a and b of any DATA dtypes; C-style
    alias ``<Word>``, GGUF alias ``op_<word>``."""
    name = f"logical_{word}"
    spec = binary_op(
        name,
        cuda=f"return (a != A(0)) {cxx} (b != B(0));",
        numpy=getattr(np, name),
        dtypes=DATA,
        dtype_rule=logical_dtypes,
        type_combos=logical_combos,
        kernel_types=logical_kernel_types,
        summary=f"c = a {cxx} b (nonzero is true; c bool, or u8/i8 0/1)",
        gguf_names=(f"op_{word}",),
        stem_aliases=(camel(word),),
    )
    split_compile_units(spec)
    return spec
