"""The generic operator test: registry x case table x dtypes x devices, against float64 torch.

Every instance draws fresh random inputs, poisons outputs and gaps, drops the tensor
descriptors right after create, poisons the workspace, then checks gaps and values
(see infiniop_py/testing/run.py). INFINIOP_FULL=1 adds the full suite's realistic sizes.
"""

import os

import pytest
from conftest import DEVICES

import infiniop_py as iop
from infiniop_py.registry import get_cases

SUITES = ("quick", "full") if os.environ.get("INFINIOP_FULL") == "1" else ("quick",)


def _instances():
    for op in iop.list_ops():
        for index, case in enumerate(get_cases(op)):
            if not any(s in case.suites for s in SUITES):
                continue
            for dt in case.dtypes:
                yield pytest.param(op, index, dt, id=f"{op}-{index}-{dt.name}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,index,dtype", list(_instances()))
def test_case(op, index, dtype, device):
    from infiniop_py.testing.run import run_case

    case = get_cases(op)[index]
    result = run_case(op, case, dtype, device)
    assert result.ok, f"{op} [{case.description}] {dtype.name} on {device}: " + "; ".join(result.messages)
    assert result.comparisons, "nothing was compared"
