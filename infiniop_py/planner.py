"""Planners as ordered rule tables, evaluated one way.

A rule table is a tuple of ``Rule(rule_id, condition, config)``: ``condition(problem)`` says
whether the rule applies, ``config`` names what the backend builds. ``first_match`` returns the
first applying rule; ``matching`` lists every applying config in table order (the fallbacks of a
config that may decline at build time). A table ends with an unconditional rule. Rule ids name the
measurements behind each rule on the family's performance page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .status import Status, error


class Rule(NamedTuple):
    rule_id: str
    condition: Callable[[Any], bool]
    config: Any  # a config name or the config itself


def always(_problem) -> bool:
    """The condition of a table's last rule."""
    return True


def first_match(rules, problem, what: str = "planner") -> tuple[str, str]:
    """(rule id, config name) of the first rule whose condition holds for ``problem``."""
    for rule_id, condition, config in rules:
        if condition(problem):
            return rule_id, config
    raise error(Status.INTERNAL_ERROR, f"{what}: no rule matched")  # a table ends with an unconditional rule


def matching(rules, problem) -> list[str]:
    """Config names of every rule whose condition holds, in table order (first = preferred)."""
    out = []
    for _, condition, config in rules:
        if condition(problem) and config not in out:
            out.append(config)
    return out
