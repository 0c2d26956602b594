"""The GGUF suites' sizes (gguf.md §5.4): the quick suite keeps tensors to about 64K elements
where a generator sets ``quick_elements`` (its larger quick instances go to the full suite, and
nothing is lost), and the whole quick suite stays small. Sizes are estimated from the layouts:
no data is generated."""

import math

from gguf_cases import generator_for
from gguf_cases._common import QUICK_ELEMENTS
from infiniop_py.dtypes import is_float, itemsize
from infiniop_py.registry import get_cases, get_spec, list_ops
from infiniop_py.testing.cases import instances

QUICK_MAX_BYTES = 200 * 2**20


def span(shape, strides) -> int:
    return 0 if 0 in shape else 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def instance_bytes(op, case, dtype) -> int:
    """Stored bytes of one test: inputs as laid out, expected outputs (float ones as F64)."""
    spec, total = get_spec(op), 0
    for role in spec.tensors:
        tc = case.tensors.get(role.name)
        if tc is None:
            continue
        shape, strides, dt = tc.resolved(dtype)
        if role.role != "out":
            total += span(shape, strides) * itemsize(dt)
        if role.is_output:
            total += math.prod(shape) * (8 if is_float(dt) else itemsize(dt))
    return total


def test_quick_budget_moves_instances_to_full():
    budgeted = [op for op in list_ops() if generator_for(op).quick_elements is not None]
    assert budgeted, "no generator keeps its quick tensors small"
    for op in budgeted:
        gen = generator_for(op)
        quick, full = gen.instances("quick"), gen.instances("full")
        for case, dt in quick:
            for tc in case.tensors.values():
                if tc is not None:
                    assert span(*tc.resolved(dt)[:2]) <= QUICK_ELEMENTS, (op, case.description)
        both = {(id(c), dt) for c, dt in quick} | {(id(c), dt) for c, dt in full}
        table = {(id(c), dt) for c, dt in instances(get_cases(op)) if gen._storable(c, dt)}
        assert both == table, f"{op}: an instance of the case table is in no GGUF suite"


def test_quick_suite_size():
    total = sum(instance_bytes(op, c, dt) for op in list_ops() for c, dt in generator_for(op).instances("quick"))
    assert total < QUICK_MAX_BYTES, f"quick suite about {total / 2**20:.0f} MiB"
