"""Every CUDA kernel that a default plan can launch compiles for sm_90, without a GPU.

Runs ``tools/compile_check.py`` (NVRTC from the nvidia-cuda-nvrtc wheel, else nvcc) in a
subprocess; skips cleanly where neither compiler is installed. A cold run compiles about 4,800
kernels (minutes on two cores): its progress is shown on the terminal, and the results are
cached, so later runs take seconds.

Planners swept over every operator's case tables on a fake sm_90 device (its module loader
records the name expressions instead of compiling) ask only for kernels in the compile lists.
The reduction and row-wise planners' sweeps (compile set equal to the reachable set) are in
test_reduce.py and test_softmax_rows.py.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.compile_check import per_unit, plan_jobs, run_jobs  # noqa: E402
from tools.compile_job import compile_unit, find_backend  # noqa: E402

BACKEND = find_backend()
needs_compiler = pytest.mark.skipif(BACKEND is None, reason="neither NVRTC nor nvcc is available")
TUNING_ENV = ("IOP_", "INFINIOP_")  # prefixes of the tuning switches (unset: the defaults)


@needs_compiler
def test_every_kernel_compiles(capsys):
    # the progress (stderr) goes straight to the terminal: a cold check takes minutes
    with capsys.disabled():
        proc = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "compile_check.py"), "--progress"], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
    assert proc.returncode == 0, proc.stdout


@needs_compiler
def test_a_broken_kernel_is_reported():
    job = {
        "op": "broken",
        "unit": 0,
        "source": "template <class T> __global__ void k(T* p) { p[0] = not_declared; }",
        "names": ["k<float>"],
        "options": ["-std=c++17", "--gpu-architecture=sm_90"],
        "backend": BACKEND[0],
        "tool": BACKEND[1],
    }
    result = compile_unit(job)
    assert not result.ok
    assert "not_declared" in result.log


SHARED = "template <class T> __global__ void k(T* p) { p[0] = T(1); }\n"


def _unit(op, names, source=SHARED):
    return {"op": op, "unit": 0, "source": source, "names": names, "options": ["-std=c++17", "--gpu-architecture=sm_90"]}


def test_units_sharing_a_source_compile_each_kernel_once():
    units = [_unit("a", ["k<float>", "k<int>"]), _unit("b", ["k<int>", "k<double>"]), _unit("c", ["k<float>"], SHARED + "//\n")]
    jobs = plan_jobs(units, ("nvrtc", "libnvrtc.so"), chunk=2)
    assert sorted(n for j in jobs for n in j["names"]) == ["k<double>", "k<float>", "k<float>", "k<int>"]
    assert max(len(j["names"]) for j in jobs) <= 2
    assert {tuple(o) for j in jobs for o in j["owners"]} == {("a", 0), ("b", 0), ("c", 0)}
    # nvcc names kernels by mangled name only: its jobs keep to one unit
    assert all(len(j["owners"]) == 1 for j in plan_jobs(units, ("nvcc", "nvcc"), chunk=2))


@needs_compiler
def test_a_failure_in_a_shared_job_is_charged_to_its_unit():
    units = [_unit("good", ["k<float>", "k<int>"]), _unit("bad", ["k<int>", "k<not_a_type>"])]
    jobs = plan_jobs(units, BACKEND)
    results = per_unit(units, jobs, run_jobs(jobs, 1))
    by_op = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    assert all(r.ok for r in by_op["good"]), [r.log for r in by_op["good"]]
    assert not all(r.ok for r in by_op["bad"])
    assert "not_a_type" in "".join(r.log for r in by_op["bad"])
    if BACKEND[0] == "nvrtc":  # kernels are named: each unit gets its own
        assert sorted(k["name"] for r in by_op["good"] for k in r.kernels) == ["k<float>", "k<int>"]


def test_no_factory_lists_kernels_only_switches_reach():
    """The compile lists are what the planners reach: no factory keeps ``tuning_units()`` (kernels
    that only tuning switches selected) any more."""
    import infiniop_py as iop
    from infiniop_py.registry import get_spec

    split = [op for op in iop.list_ops() if getattr(get_spec(op).nvidia, "tuning_units", None) is not None]
    assert not split, split


# An elementwise operator lists its broadcast (ew_rowvec) and staging (ew_tiled) kernels for one
# representative mask, 0 or 2 (the first input's bit): a kernel with another mask has the same
# types and code paths (make_nvidia's docstring).
_MASKED = (
    (re.compile(r"^(ew_rowvec<.*), (\d+)>$"), lambda m: f"{m[1]}, {min(int(m[2]), 2)}>"),
    (re.compile(r"^(ew_tiled<.*), \d+, (unsigned int|long long)>$"), lambda m: f"{m[1]}, 2, {m[2]}>"),
)


def _representative(name: str) -> str:
    for pattern, repl in _MASKED:
        name = pattern.sub(repl, name)
    return name


def _planner_names() -> dict:
    """{op: [names its planners request over its case tables that its compile list lacks]}, on
    the fake sm_90 device; operators whose library (cuBLAS through CuPy) is missing are skipped."""
    import infiniop_py as iop
    from infiniop_py.registry import get_cases, get_spec
    from infiniop_py.status import InfiniopError, Status
    from infiniop_py.testing.cases import instances
    from infiniop_py.testing.fake_device import fake_nvidia

    missing, created = {}, 0
    with fake_nvidia() as requested:
        handle = iop.create_handle("nvidia")
        for op in iop.list_ops():
            spec = get_spec(op)
            if getattr(spec.nvidia, "compile_units", None) is None:
                continue
            requested.clear()
            for case, dt in instances(get_cases(op)):
                tensors = {}
                for name, tc in case.tensors.items():
                    shape, strides, d = tc.resolved(dt) if tc is not None else (None, None, None)
                    tensors[name] = None if tc is None else iop.create_tensor_descriptor(shape, strides, d)
                try:
                    iop.create_descriptor(op, handle, **tensors, **case.attrs).destroy()
                except InfiniopError as exc:
                    if exc.status != Status.DEVICE_NOT_INITIALIZED:
                        raise
                    continue
                created += 1
            listed = {n for _, names in spec.nvidia.compile_units() for n in names}
            extra = sorted({_representative(n) for n in requested} - listed)
            if extra:
                missing[op] = extra
    return {"created": created, "missing": missing}


def test_compile_lists_cover_what_planners_request():
    """Every kernel a planner asks for over its operator's case tables is in the compile list,
    under the default tuning (no switches set)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(TUNING_ENV)}
    code = "import json, sys; sys.path.insert(0, 'test'); from test_compile_check import _planner_names; print(json.dumps(_planner_names()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["created"] > 1000, found["created"]  # the sweep did reach the planners
    assert not found["missing"], json.dumps(found["missing"], indent=1)[:3000]
