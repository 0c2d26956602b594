"""Benchmark suites: one module per operator family, discovered (no list to keep).

A suite module defines ``NAME`` (what ``--family`` selects) and
``cases(env, quick: bool) -> list[BenchCase]``, and optionally ``PAGE``, the docs/perf page its
rows go to (default: ``NAME``); see ``elementwise.py`` for the pattern and
``conv_grid.py`` for a suite with peers of its own (``Workload.peers``, named in the module's
``PEERS``; ``Workload.jax_fn`` for the JAX peer). A new family adds one file here.

A module that fails to import, or whose ``cases`` raises, does not stop a run: it becomes one
error row (:class:`Broken`), and the other suites run.
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback


class Broken:
    """Stands in for a suite module that could not be imported: ``cases`` raises its error."""

    def __init__(self, name: str, error: str, trace: str):
        self.NAME = name
        self.error = error
        self.trace = trace

    def cases(self, env, quick: bool = False):
        raise ImportError(self.error)


def discover() -> dict:
    """{suite name: module} for every module in this package (names starting with '_' excluded);
    a module that fails to import is a :class:`Broken` under its file name."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as exc:
            found[info.name] = Broken(info.name, f"suite {info.name}.py: {type(exc).__name__}: {exc}", traceback.format_exc())
            continue
        found[getattr(module, "NAME", info.name)] = module
    return found
