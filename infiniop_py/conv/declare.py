"""How conv, conv_transpose and conv_backward declare themselves: their data tensors, the end of
every validation (a pinned plan must be a name the operator knows), the CPU and NVIDIA
callables of an ``OpSpec`` and the kernel sources the compile check names.
"""

from __future__ import annotations

from infiniop_py.spec import Checker, Info, inp, out

from . import cpu
from .geometry import DTYPES, Geometry, check_plan

KERNEL_SOURCES = ("../../infiniop_py/conv/kernel.cu", "../../infiniop_py/conv/wgrad.cu")

# conv's and conv_transpose's tensors: y | x, w, b?
DATA_TENSORS = (
    out("y", aliases=("output",)),
    inp("x", aliases=("input",)),
    inp("w", aliases=("weight",)),
    inp("b", optional=True, aliases=("bias",)),
)


def planned_info(check: Checker, geo: Geometry, cuda) -> Info:
    """The Info of a validated problem, once a pinned ``plan`` is known to be a name of the
    operator's NVIDIA backend (module ``cuda``) or of the CPU backend."""
    check_plan(check, (*cuda.names(), *cpu.PLAN_NAMES))
    return Info(check.op, check.tensors, check.attrs, geo=geo)


def data_validate(shape, cuda):
    """conv's / conv_transpose's validation: x in the family's dtypes, y, w, b in x's, the shapes
    by ``shape`` (``geometry.forward`` or ``geometry.transpose``), y writable."""

    def validate(check: Checker) -> Info:
        check.dtype_in("x", DTYPES)
        check.same_dtype("x", "y", "w", "b")
        geo = shape(check, "x", "w", "y", "b")
        check.writable("y")
        return planned_info(check, geo, cuda)

    return validate


def cpu_backend(kind: str, dtype_of: str, compute):
    """The SPEC's ``cpu`` callable: ``compute(geo, views, work dtype)`` per call, the plan named
    by ``cpu.plan_name(kind, geo)``, the work dtype from tensor ``dtype_of``."""

    def factory(info: Info):
        geo = info.geo
        work = cpu.work_dtype(info[dtype_of].dtype)

        def run(views, ws, rt):
            compute(geo, views, work)

        run.plan_name = cpu.plan_name(kind, geo)
        return run

    return factory


def nvidia_backend(cuda):
    """The SPEC's ``nvidia`` callable of an operator whose ``cuda`` module plans and builds."""

    def factory(info: Info, handle):
        return cuda.create(info, handle)

    factory.compile_units = cuda.compile_units
    return factory
