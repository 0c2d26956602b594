"""The checklist every discovered operator must satisfy (nothing is listed by hand anywhere)."""

from pathlib import Path

import pytest

import infiniop_py as iop
from infiniop_py.registry import get_cases, get_spec

ROOT = Path(__file__).resolve().parent.parent
OPS = iop.list_ops()


def test_registry_discovers_ops_folders():
    folders = sorted(p.name for p in (ROOT / "ops").iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_"))
    assert OPS == folders
    assert len(OPS) >= 7


@pytest.mark.parametrize("op", OPS)
def test_checklist(op):
    spec = get_spec(op)
    info = iop.op_info(op)
    assert spec.summary, "summary missing"
    assert spec.reference is not None, "no reference function"
    cases = get_cases(op)
    assert any("quick" in c.suites for c in cases), "no quick cases"
    covered = {dt for c in cases for dt in c.dtypes}
    assert covered == set(spec.dtypes), (
        f"cases cover {sorted(d.name for d in covered)}, spec lists {sorted(d.name for d in spec.dtypes)}"
    )
    assert spec.cpu is not None, "no CPU backend"
    assert spec.nvidia is not None, "no NVIDIA backend"
    assert callable(getattr(spec.nvidia, "compile_units", None)), "NVIDIA backend has no compile_units() for the compile check"
    assert info["dtypes"]["cpu"] == info["dtypes"]["nvidia"], "dtype lists differ between backends"
    from gguf_cases import generator_for

    assert generator_for(op).op == op, "no GGUF generator for this op"
    assert (ROOT / "test" / "infiniop" / f"{op}.py").is_file(), "no profile script test/infiniop/<op>.py"
    docs = (ROOT / "docs" / "ops.md").read_text()
    assert f"`{op}`" in docs, "docs/ops.md lacks this op (run python tools/gen_docs.py)"


def test_docs_table_is_current():
    from tools.gen_docs import render

    assert (ROOT / "docs" / "ops.md").read_text() == render(), "docs/ops.md is stale: run python tools/gen_docs.py"


def test_op_info_shape():
    info = iop.op_info("add")
    assert info["stem"] == "Add" and [t["name"] for t in info["tensors"]] == ["c", "a", "b"]
    assert info["c_style"]["create"] == "infiniopCreateAddDescriptor"
    assert "F16" in info["dtypes"]["nvidia"]
