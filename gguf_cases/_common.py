"""Shared logic of the GGUF case generators (gguf.md §5).

Every registered operator gets ``OpGenerator("<op>")``; an operator needing a subclass or a
setting has a module ``gguf_cases/<op>.py`` defining ``GENERATOR``. The generator takes the operator's case table (``ops/<op>/cases.py``, shared with
pytest), makes each instance's inputs exactly as the pytest runner does (same case table, same
data functions, inputs rounded to their dtype), computes the float64 PyTorch reference from the
stored values and writes everything through :mod:`infiniop_py.gguf`.

A generator made with ``quick_elements=N`` keeps the quick suite's files small (gguf.md §5.4:
tensors of about 64K elements): a quick instance with a tensor of more than N elements (its
storage span, padding included) is written to the full suite instead. pytest still runs it in
its quick set (the case table is unchanged); the row-wise norms use this for their many-row
cases, whose purpose is the GPU's grid and pipelining paths.
"""

from __future__ import annotations

import numpy as np

from infiniop_py.dtypes import DType, is_float, to_numpy
from infiniop_py.gguf import TestRecord, storable, write_file
from infiniop_py.gguf.dialect import dialect_of
from infiniop_py.registry import get_cases, get_spec
from infiniop_py.spec import REQUIRED
from infiniop_py.testing.cases import Case, case_seed, instances
from infiniop_py.testing.compare import compare_mode
from infiniop_py.testing.reference import reference
from infiniop_py.testing.run import make_inputs

SUITES = ("quick", "full")
QUICK_ELEMENTS = 1 << 16  # gguf.md §5.4: quick tensors of about 64K elements


def torch_missing() -> bool:
    """True when PyTorch cannot be imported (the references of most operators need it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return True
    return False


def deterministic_torch() -> None:
    """Single-threaded, deterministic PyTorch on the CPU (gguf.md §5.2)."""
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


class OpGenerator:
    """Builds the GGUF tests of one operator from its case table. Override to customise."""

    def __init__(self, op: str, quick_elements: int | None = None):
        self.spec = get_spec(op)
        self.op = self.spec.name
        self.dialect = dialect_of(self.spec)
        self.quick_elements = quick_elements
        self.needs_torch = self.spec.reference_inputs != "numpy"

    # -- which instances -------------------------------------------------------------------------
    def instances(self, suite: str) -> list[tuple[Case, DType]]:
        """(case, dtype) pairs of ``suite`` whose tensors GGUF can store (no unsigned/F8/complex);
        with ``quick_elements``, the quick instances over that size move to the full suite."""
        out = [(c, dt) for c, dt in instances(get_cases(self.op), suite) if self._storable(c, dt)]
        if self.quick_elements is None:
            return out
        if suite == "quick":
            return [(c, dt) for c, dt in out if not self._oversized(c, dt)]
        quick = [(c, dt) for c, dt in instances(get_cases(self.op), "quick") if suite not in c.suites]
        return out + [(c, dt) for c, dt in quick if self._storable(c, dt) and self._oversized(c, dt)]

    @staticmethod
    def _storable(case: Case, dtype: DType) -> bool:
        return all(storable(tc.resolved(dtype)[2]) for tc in case.tensors.values() if tc is not None)

    def _oversized(self, case: Case, dtype: DType) -> bool:
        """A tensor of the instance spans more than ``quick_elements`` elements."""
        for tc in case.tensors.values():
            if tc is None:
                continue
            shape, strides, _ = tc.resolved(dtype)
            if 0 not in shape and 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides)) > self.quick_elements:
                return True
        return False

    def description(self, case: Case, dtype: DType) -> str:
        return f"{case.description}, {dtype.name.lower()}" if case.description else dtype.name.lower()

    # -- one test -------------------------------------------------------------------------------
    def record(self, case: Case, dtype: DType, seed: int) -> TestRecord:
        spec = self.spec
        rng = np.random.Generator(np.random.PCG64(seed))
        layouts, data = make_inputs(spec, case, dtype, rng)
        rec = TestRecord(spec.name)
        rec.set("description", self.description(case, dtype), "str")
        rec.set("seed", seed, "u64")
        attrs = self._scalars(rec, spec.attrs, case.attrs)
        runtime = self._scalars(rec, spec.runtime, case.runtime)
        if case.atol is not None:
            rec.set("atol", case.atol, "f64")
        if case.rtol is not None:
            rec.set("rtol", case.rtol, "f64")
        for role in spec.tensors:
            if role.name not in layouts:
                continue
            shape, strides, dt = layouts[role.name]
            if role.role == "out":
                rec.add_output(role.name, shape, strides, dt, inplace=case.inplace.get(role.name))
            elif role.role == "inout":
                rec.add_inout(role.name, data[role.name], dt, strides, inplace=case.inplace.get(role.name))
            else:
                rec.add_input(role.name, data[role.name], dt, strides)
        out_dtypes = {r.name: layouts[r.name][2] for r in spec.outputs if r.name in layouts}
        inputs = {r.name: data.get(r.name) for r in spec.tensors if r.role != "out" and (r.name in layouts or r.optional)}
        out_shapes = {r.name: layouts[r.name][0] for r in spec.outputs if r.name in layouts}
        expected = reference(spec, inputs, attrs, runtime, out_dtypes, out_shapes)
        single = len(spec.outputs) == 1
        for role in spec.outputs:
            if role.name not in out_dtypes or role.name not in expected:
                continue
            rec.add_expected(
                "ans" if single else f"ans_{role.name}", *self.expected(role, expected[role.name], out_dtypes[role.name])
            )
        self.dialect.write(rec)
        return rec

    def expected(self, role, value, dtype: DType) -> tuple[np.ndarray, DType]:
        """How an expected value is stored: F64 for floats, bitwise outputs in their own dtype."""
        value = np.asarray(value)
        if compare_mode(role.compare, dtype) == "bitwise":
            return value.astype(to_numpy(dtype)), dtype
        if is_float(dtype):
            return value.astype(np.float64), DType.F64
        return value, (dtype if storable(dtype) else DType.I64)

    def _scalars(self, rec: TestRecord, declared, given: dict) -> dict:
        """Write attributes (given ones, then other non-None defaults); values as a reader sees them."""
        values = {}
        for a in declared:
            value = given.get(a.name, a.default)
            if value is REQUIRED:
                raise ValueError(f"{self.op}: case lacks required attribute '{a.name}'")
            if value is None:
                values[a.name] = None
                continue
            values[a.name] = rec.set_attr(a.name, a.kind, value, self.dialect.attr_types.get(a.name))
        return values

    # -- files ----------------------------------------------------------------------------------
    def build(self, suite: str, base_seed: int = 0) -> list[TestRecord]:
        return [self.record(case, dt, case_seed(base_seed, self.op, i)) for i, (case, dt) in enumerate(self.instances(suite))]

    def write(self, path, suite: str, base_seed: int = 0) -> int:
        """Write ``suite`` to ``path``; returns the number of tests (0: nothing written)."""
        records = self.build(suite, base_seed)
        if records:
            write_file(path, records, f"{self.op}, {suite} suite")
        return len(records)
