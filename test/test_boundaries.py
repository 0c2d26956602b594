"""Operator folders share code only through the library: no module of ``ops/<a>/`` imports from
``ops/<b>/`` (relative ``..b``, absolute ``infiniop_ops.b`` / ``ops.b``, or a module name string
handed to importlib), except within the families named in ``EXEMPT``, which is to shrink."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "ops"

# Operator families whose folders still import from each other (their shared code is to move into
# infiniop_py/ as the others' did); an import between two folders of one family is allowed.
EXEMPT = (
    ("conv", "conv_transpose", "conv_backward"),
    ("causal_conv1d", "causal_conv1d_backward", "causal_conv1d_update"),
    ("avg_pool", "avg_pool_backward", "max_pool", "max_pool_backward"),
)
PACKAGES = ("infiniop_ops", "ops")
MODULE_STRING = re.compile(r"""["'](?:infiniop_ops|ops)\.([A-Za-z_][A-Za-z0-9_]*)""")


def _targets(path: Path, tree: ast.AST):
    """(line, operator folder) of every import in ``path`` that names an operator folder."""
    folder = path.relative_to(OPS).parts
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(folder[:-1])  # the module's package, as folders under ops/
                up = node.level - 1
                if up > len(base):
                    continue
                base = base[: len(base) - up]
                parts = base + (node.module.split(".") if node.module else [])
                if not parts:  # "from .. import x": x is a folder
                    for alias in node.names:
                        yield node.lineno, alias.name
                else:
                    yield node.lineno, parts[0]
            elif node.module:
                parts = node.module.split(".")
                if parts[0] in PACKAGES:
                    if len(parts) > 1:
                        yield node.lineno, parts[1]
                    else:
                        for alias in node.names:
                            yield node.lineno, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in PACKAGES and len(parts) > 1:
                    yield node.lineno, parts[1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = MODULE_STRING.match(repr(node.value))
            if m:
                yield node.lineno, m.group(1)


def cross_imports() -> list[tuple[str, str, str]]:
    """(place, importing folder, imported folder) for every import between operator folders."""
    folders = {p.name for p in OPS.iterdir() if (p / "__init__.py").is_file()}
    found = []
    for path in sorted(OPS.rglob("*.py")):
        a = path.relative_to(OPS).parts[0]
        for line, b in _targets(path, ast.parse(path.read_text(), str(path))):
            if b in folders and b != a:
                found.append((f"{path.relative_to(ROOT)}:{line}", a, b))
    return found


def _exempt(a: str, b: str) -> bool:
    return any(a in family and b in family for family in EXEMPT)


def test_no_imports_between_operator_folders():
    bad = [f"{place}: ops/{a} imports ops/{b}" for place, a, b in cross_imports() if not _exempt(a, b)]
    assert not bad, "operator folders share code through infiniop_py/, not each other:\n" + "\n".join(bad)


def test_exempt_families_are_operator_folders():
    folders = {p.name for p in OPS.iterdir() if (p / "__init__.py").is_file()}
    assert len(EXEMPT) <= 3, "the exemptions only shrink"
    for family in EXEMPT:
        assert set(family) <= folders, f"no such operator folder: {sorted(set(family) - folders)}"


def test_the_scan_sees_each_import_form(tmp_path, monkeypatch):
    """Relative, absolute and importlib-string imports of another folder are all found."""
    fake = tmp_path / "ops"
    for name in ("a", "b"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text("")
    (fake / "a" / "x.py").write_text(
        "from ..b import y\nfrom infiniop_ops.b.z import w\nimport ops.b\nfrom .. import b\n"
        "import importlib\nimportlib.import_module('infiniop_ops.b.cases')\nfrom . import own\n"
    )
    monkeypatch.setattr(__import__(__name__), "OPS", fake)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert [(line, a, b) for line, a, b in [(p.rsplit(":", 1)[1], a, b) for p, a, b in cross_imports()]] == [
        ("1", "a", "b"),
        ("2", "a", "b"),
        ("3", "a", "b"),
        ("4", "a", "b"),
        ("6", "a", "b"),
    ]
