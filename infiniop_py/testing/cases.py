"""The case table format shared by pytest, the GGUF generators and the profile scripts.

Each ``ops/<name>/cases.py`` defines ``CASES: list[Case]``. A case fixes tensor layouts
(shape, strides, optional dtype override), attributes, runtime scalars and in-place aliasing,
and is instantiated once per dtype in ``dtypes``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DType
from ..tensor import contiguous_strides


@dataclass(frozen=True)
class TensorCase:
    shape: tuple
    strides: tuple | None = None  # None: contiguous
    dtype: DType | None = None  # None: the case's dtype

    def resolved(self, dtype: DType) -> tuple[tuple, tuple, DType]:
        shape = tuple(self.shape)
        strides = tuple(self.strides) if self.strides is not None else contiguous_strides(shape)
        return shape, strides, self.dtype if self.dtype is not None else dtype


def T(shape, strides=None, dtype=None) -> TensorCase:  # noqa: N802 - short constructor for case tables
    return TensorCase(tuple(shape), None if strides is None else tuple(strides), dtype)


@dataclass(frozen=True)
class Case:
    tensors: dict  # role name -> TensorCase or None (absent optional)
    dtypes: tuple
    description: str = ""
    attrs: dict = field(default_factory=dict)
    runtime: dict = field(default_factory=dict)
    inplace: dict = field(default_factory=dict)  # output -> input it aliases
    suites: tuple = ("quick",)  # "quick" and/or "full"
    atol: float | None = None
    rtol: float | None = None
    data: Callable | None = None  # (rng, name, dtype, shape) -> ndarray or None for the default


def case_seed(base: int, op: str, index: int) -> int:
    """Stable 64-bit seed: the first 8 bytes of SHA-256 over a canonical string."""
    digest = hashlib.sha256(f"{base}:{op}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def instances(cases, suite: str | None = None):
    """Yield (case, dtype) pairs, optionally restricted to one suite."""
    for case in cases:
        if suite is not None and suite not in case.suites:
            continue
        for dt in case.dtypes:
            yield case, dt


def elementwise_cases(out: str, ins, dtypes, *, inplace=None, full=True, nonempty=False, extra=()) -> list[Case]:
    """The mandatory elementwise coverage of gguf.md §5.3 for one operator.

    contiguous; padded rows; permuted (column-major) inputs and output; each input broadcast
    alone and all together; odd sizes; 0-d and 1-element; empty; in-place for each input.
    """
    ins = tuple(ins)
    inplace = ins if inplace is None else tuple(inplace)
    dt = tuple(sorted(dtypes))

    def same(shape, strides=None, **over):
        t = {n: T(shape, strides) for n in (out, *ins)}
        t.update(over)
        return t

    cases = [
        Case(same((13, 4)), dt, "contiguous 13x4"),
        Case(same((16, 33)), dt, "contiguous 16x33"),
        Case(same((13, 4), (10, 1)), dt, "padded strides (13,4)/(10,1)"),
        Case(same((4097,)), dt, "odd length 4097"),
        Case(same(()), dt, "0-d"),
        Case(same((1,)), dt, "one element"),
        Case(same((5, 3, 7)), dt, "3-d odd sizes"),
    ]
    if ins:
        cases.append(Case(same((13, 7), **{n: T((13, 7), (1, 13)) for n in ins}), dt, "column-major inputs"))
        cases.append(Case(same((13, 7), **{out: T((13, 7), (1, 13))}), dt, "column-major output"))
        cases.append(Case(same((3, 5, 6), **{ins[0]: T((3, 5, 6), (1, 18, 3))}), dt, "permuted input"))
        for n in ins:
            cases.append(Case(same((13, 7), **{n: T((13, 7), (0, 1))}), dt, f"'{n}' broadcast row (stride 0)"))
        if len(ins) > 1:
            cases.append(
                Case(same((9, 11), **{ins[0]: T((9, 11), (0, 1)), ins[1]: T((9, 11), (1, 0))}), dt, "all inputs broadcast")
            )
        cases.append(Case(same((6, 5), **{n: T((6, 5), (0, 0)) for n in ins}), dt, "scalar inputs (all strides 0)"))
        # Rows whose length is a multiple of every pack width: the vectorised row paths.
        cases.append(Case(same((8, 64), (72, 1)), dt, "padded rows 8x64/(72,1)"))
        cases.append(Case(same((5, 64), **{ins[0]: T((5, 64), (0, 1))}), dt, f"'{ins[0]}' broadcast row 5x64"))
        cases.append(Case(same((5, 64), **{ins[-1]: T((5, 64), (1, 0))}), dt, f"'{ins[-1]}' broadcast column 5x64"))
        cases.append(Case(same((40, 48), **{ins[-1]: T((40, 48), (1, 40))}), dt, f"'{ins[-1]}' transposed 40x48"))
        cases.append(Case(same((3, 40, 72), **{ins[0]: T((3, 40, 72), (1, 216, 3))}), dt, "batched transposed input"))
    if not nonempty:
        cases.append(Case(same((0, 5)), dt, "empty (0x5)"))
    for n in inplace:
        cases.append(Case(same((13, 4), (10, 1)), dt, f"in-place on '{n}', padded", inplace={out: n}))
    if full:
        cases += [
            Case(same((16, 5632)), dt, "16x5632", suites=("full",)),
            Case(same((4, 4, 5632)), dt, "4x4x5632", suites=("full",)),
            Case(same((32, 20, 512)), dt, "32x20x512", suites=("full",)),
            Case(same((4, 4, 5632), (45056, 1, 4)), dt, "4x4x5632 permuted", suites=("full",)),
        ]
    cases += list(extra)
    return cases


def default_data(rng: np.random.Generator, dtype: DType, shape):
    from .data import random_data

    return random_data(rng, dtype, shape)
