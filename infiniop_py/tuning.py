"""Every environment variable the library reads, declared once: name, type, default and what it
selects. Planners take no switches from the environment; these few knobs are for users.

``knob(name)`` reads a variable each time it is called (so a test can set it), as its declared
type: a bool is on for anything but unset, empty or ``0``; an int must parse as one. A value that
does not parse is a BAD_PARAM error naming the variable. Reading an undeclared name is a bug
(KeyError), and ``test_tuning`` fails when the sources read a variable not declared here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .status import Status, error


@dataclass(frozen=True)
class Knob:
    name: str
    kind: type  # bool or int
    default: object
    selects: str


KNOBS = {
    k.name: k
    for k in (
        Knob(
            "INFINIOP_CPU_PURE",
            bool,
            False,
            "the CPU backend runs NumPy only, never the compiled kernels of the optional cpu-fast extra (read once, at import)",
        ),
        Knob("INFINIOP_TEST_TRACEBACK", bool, False, "infiniop-test prints the Python traceback of a test that raised"),
    )
}


def knob(name: str):
    """The value of the declared knob ``name`` from the environment, or its default."""
    k = KNOBS[name]
    v = os.environ.get(name, "")
    if k.kind is bool:
        return bool(k.default) if v == "" else v != "0"
    if v == "":
        return k.default
    try:
        return k.kind(v)
    except ValueError:
        raise error(Status.BAD_PARAM, f"{name}={v!r} is not {'an integer' if k.kind is int else 'a number'}") from None
