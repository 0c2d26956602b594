"""GGUF test-case generators: ``python -m gguf_cases [--suite quick|full|all] [--out DIR] [--seed N] [--check] [OP ...]``.

The list of operators comes from the registry; each gets the generic :class:`OpGenerator`, or
the ``GENERATOR`` of ``gguf_cases/<op>.py`` where that module exists (an operator needing a
subclass or a setting). See gguf.md §5 and docs/gguf.md.
"""

from __future__ import annotations

import importlib

from ._common import OpGenerator


def generator_for(op: str) -> OpGenerator:
    """The operator's ``GENERATOR`` (its module may subclass OpGenerator), else the generic one."""
    try:
        module = importlib.import_module(f"{__name__}.{op}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{op}":
            raise
        return OpGenerator(op)
    return getattr(module, "GENERATOR", None) or OpGenerator(op)
