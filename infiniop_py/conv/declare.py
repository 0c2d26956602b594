"""How conv, conv_transpose and conv_backward declare themselves: ``conv_op`` fills what their
``OpSpec`` share (dtypes, the CPU and NVIDIA callables, the kernel sources the compile check
names); ``DATA_TENSORS`` and ``data_validate`` are conv's and conv_transpose's tensors and
validation, ``planned_info`` the end of every validation (a pinned plan must be a name the
operator knows).
"""

from __future__ import annotations

from infiniop_py.cpu import pool
from infiniop_py.spec import Checker, Info, OpSpec, inp, out

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
        dtype = info[dtype_of].dtype
        work = cpu.work_dtype(dtype, info.attrs.get("plan"))

        def run(views, ws, rt):
            token = pool.fp_quiet()  # inf/NaN results as they arise, without NumPy's warnings
            try:
                compute(geo, views, work)
            finally:
                pool.fp_restore(token)

        run.plan_name = cpu.plan_name(kind, geo, work, exact=work != cpu.work_dtype(dtype))
        return run

    return factory


def nvidia_backend(cuda):
    """The SPEC's ``nvidia`` callable of an operator whose ``cuda`` module plans and builds."""

    def factory(info: Info, handle):
        return cuda.create(info, handle)

    factory.compile_units = cuda.compile_units
    return factory


def conv_op(*, cuda, cpu_kind: str, cpu_run, work_of: str = "x", **fields) -> OpSpec:
    """The OpSpec of one of the family's operators: the family's dtypes and kernel sources, the
    NVIDIA backend of its ``cuda`` module, the CPU backend running ``cpu_run(geo, views, work
    dtype)`` (plan name of ``cpu_kind``, work dtype from tensor ``work_of``); ``fields``: the
    rest of the OpSpec."""
    cpu_fn = cpu_backend(cpu_kind, work_of, cpu_run)
    return OpSpec(dtypes=DTYPES, cpu=cpu_fn, nvidia=nvidia_backend(cuda), kernel_sources=KERNEL_SOURCES, **fields)
