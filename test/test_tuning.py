"""The library reads only the environment variables declared in infiniop_py.tuning."""

import re
from pathlib import Path

import pytest

from infiniop_py.status import InfiniopError, Status
from infiniop_py.tuning import KNOBS, knob

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"\b(?:IOP|INFINIOP)_[A-Z0-9_]+")


def _names_in_sources() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for folder in ("infiniop_py", "ops", "gguf_cases"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in set(NAME.findall(path.read_text())):
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_variable_read_is_declared():
    undeclared = {n: files for n, files in _names_in_sources().items() if n not in KNOBS}
    assert not undeclared, f"environment names in the sources but not in infiniop_py.tuning: {undeclared}"


def test_few_knobs():
    assert len(KNOBS) <= 5
    for k in KNOBS.values():
        assert k.kind in (bool, int) and k.selects


def test_knob_values(monkeypatch):
    name = "INFINIOP_TEST_TRACEBACK"
    monkeypatch.delenv(name, raising=False)
    assert knob(name) is False
    for v, want in (("", False), ("0", False), ("1", True), ("yes", True)):
        monkeypatch.setenv(name, v)
        assert knob(name) is want
    with pytest.raises(KeyError):
        knob("INFINIOP_NOT_A_KNOB")


def test_bad_int_knob_is_bad_param(monkeypatch):
    from infiniop_py import tuning

    monkeypatch.setitem(tuning.KNOBS, "INFINIOP_X_INT", tuning.Knob("INFINIOP_X_INT", int, 3, "a test knob"))
    monkeypatch.setenv("INFINIOP_X_INT", "three")
    with pytest.raises(InfiniopError) as e:
        knob("INFINIOP_X_INT")
    assert e.value.status == Status.BAD_PARAM and "INFINIOP_X_INT" in str(e.value)
    monkeypatch.setenv("INFINIOP_X_INT", "7")
    assert knob("INFINIOP_X_INT") == 7
