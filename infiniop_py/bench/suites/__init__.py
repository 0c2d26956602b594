"""Benchmark suites: one module per operator family, discovered (no list to keep).

A suite module defines ``NAME`` (what ``--suite`` selects) and
``cases(env, quick: bool) -> list[BenchCase]``; see ``elementwise.py`` for the pattern. A new
family adds one file here.
"""

from __future__ import annotations

import importlib
import pkgutil


def discover() -> dict:
    """{suite name: module} for every module in this package (names starting with '_' excluded)."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found[getattr(module, "NAME", info.name)] = module
    return found
