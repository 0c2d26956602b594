"""Discovers operators from ``ops/*/`` (no hand-kept list anywhere) and answers questions about them."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

from .spec import REQUIRED, OpSpec
from .status import Status, error

_PACKAGE = "infiniop_ops"
_SPECS: dict[str, OpSpec] | None = None
_ALIASES: dict[str, str] = {}


def ops_dir() -> Path:
    """The folder holding one sub-folder per operator."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "ops", here / "_ops"):
        if cand.is_dir():
            return cand
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    raise error(Status.INTERNAL_ERROR, "cannot find the ops/ folder")


def _package() -> types.ModuleType:
    pkg = sys.modules.get(_PACKAGE)
    if pkg is None:
        pkg = types.ModuleType(_PACKAGE)
        pkg.__path__ = [str(ops_dir())]
        pkg.__package__ = _PACKAGE
        sys.modules[_PACKAGE] = pkg
    return pkg


def _discover() -> dict[str, OpSpec]:
    global _SPECS
    if _SPECS is not None:
        return _SPECS
    _package()
    specs: dict[str, OpSpec] = {}
    for folder in sorted(ops_dir().iterdir()):
        if not (folder / "__init__.py").is_file() or folder.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_PACKAGE}.{folder.name}")
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, OpSpec):
            raise error(Status.INTERNAL_ERROR, f"ops/{folder.name}/__init__.py defines no SPEC")
        if spec.name != folder.name:
            raise error(Status.INTERNAL_ERROR, f"ops/{folder.name}: SPEC.name is {spec.name!r}")
        spec.module = module
        specs[spec.name] = spec
    for spec in specs.values():
        for alias in spec.gguf_names:
            _ALIASES[alias] = spec.name
    _SPECS = specs
    return specs


def list_ops() -> list[str]:
    """Sorted names of every registered operator."""
    return sorted(_discover())


def all_specs() -> list[OpSpec]:
    return [s for _, s in sorted(_discover().items())]


def resolve(name: str) -> str | None:
    """Canonical name for an op name or GGUF alias (None if unknown)."""
    specs = _discover()
    if name in specs:
        return name
    return _ALIASES.get(name)


def get_spec(name: str) -> OpSpec:
    canonical = resolve(name) if isinstance(name, str) else None
    if canonical is None:
        raise error(Status.BAD_PARAM, f"unknown operator {name!r}")
    return _discover()[canonical]


def get_cases(name: str) -> list:
    """The case table ``ops/<name>/cases.py:CASES`` (empty if the op has none)."""
    spec = get_spec(name)
    try:
        module = importlib.import_module(f"{_PACKAGE}.{spec.name}.cases")
    except ModuleNotFoundError as exc:
        if exc.name == f"{_PACKAGE}.{spec.name}.cases":
            return []
        raise
    return list(getattr(module, "CASES", []))


def by_stem() -> dict[str, OpSpec]:
    """C-style stem -> spec, including each spec's ``stem_aliases`` (the canonical stem wins)."""
    specs = _discover().values()
    return {**{a: s for s in specs for a in s.stem_aliases}, **{s.stem: s for s in specs}}


def op_info(name: str) -> dict:
    """Roles, attributes, dtypes, C-style stem, torch alignment and GGUF aliases of one op."""
    spec = get_spec(name)

    def attr_row(a):
        return {
            "name": a.name,
            "kind": a.kind,
            "default": None if a.default is REQUIRED else a.default,
            "required": a.default is REQUIRED,
            "aliases": list(a.aliases),
            "choices": list(a.choices) if a.choices else None,
        }

    nv = spec.nvidia_dtypes if spec.nvidia_dtypes is not None else spec.dtypes
    return {
        "name": spec.name,
        "stem": spec.stem,
        "summary": spec.summary,
        "torch": spec.torch,
        "tensors": [{"name": t.name, "role": t.role, "optional": t.optional, "aliases": list(t.aliases)} for t in spec.tensors],
        "attrs": [attr_row(a) for a in spec.attrs],
        "runtime": [attr_row(a) for a in spec.runtime],
        "dtypes": {
            "cpu": sorted(d.name for d in spec.dtypes) if spec.cpu else [],
            "nvidia": sorted(d.name for d in nv) if spec.nvidia else [],
        },
        "c_style": c_names(spec),
        "gguf_names": [spec.name, *spec.gguf_names],
        "inplace": [list(p) for p in spec.inplace],
    }


def c_names(spec: OpSpec) -> dict[str, str | None]:
    s = spec.stem
    return {
        "create": f"infiniopCreate{s}Descriptor",
        "workspace": f"infiniopGet{s}WorkspaceSize" if spec.c_workspace_args else None,
        "calculate": f"infiniop{s}",
        "destroy": f"infiniopDestroy{s}Descriptor",
    }
