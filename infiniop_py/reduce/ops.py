"""Validation and backends shared by the reductions (sum, max or mean over dims), and
``single_dim_op``, the builder of a one-dim reduction operator from its ``ops/<name>`` declaration."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cpu import jit
from ..cpu.rows import ONE_PASS_PART, Outputs, bits, rows2d, run_rows, split
from ..spec import Attr, Checker, Info, OpSpec, inp, out
from ..status import Status
from . import REDUCE_SOURCE, ReduceKernel, kernel_names, reduce_numpy, store


def reduced_shape(shape, axes, keepdim) -> tuple:
    """``shape`` reduced over ``axes`` (every dim when empty): size 1 there, or those dims removed."""
    nd = len(shape)
    axes = {a % nd for a in axes} if axes and nd else set(range(nd))
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def check_output(check: Checker, axes: tuple, keepdim: bool) -> None:
    """``output`` must have the reduced shape (size 1 at reduced dims, or those dims removed)."""
    x, y = check["input"], check["output"]
    want = reduced_shape(x.shape, axes, keepdim)
    if y.shape != want:
        check.fail(
            Status.BAD_TENSOR_SHAPE,
            f"tensor 'output' shape {list(y.shape)} does not match the reduced shape {list(want)} "
            f"(input {list(x.shape)}, dims {list(axes)}, keepdim={keepdim})",
        )
    check.same_dtype("input", "output")
    check.writable("output")


def kept_strides(info: Info) -> list[int]:
    """Output stride for each input dim (0 for reduced dims)."""
    x, y = info.tensors["input"], info.tensors["output"]
    axes = info.axes
    if info.keepdim:
        return [0 if i in axes else y.strides[i] for i in range(x.ndim)]
    it = iter(y.strides)
    return [0 if i in axes else next(it) for i in range(x.ndim)]


def cpu_factory(op: str):
    def cpu(info: Info):
        dtype = info.tensors["input"].dtype
        axes = info.axes

        x_nd = info.tensors["input"].ndim
        trailing = bool(axes) and sorted(axes) == list(range(x_nd - len(axes), x_nd))
        d = math.prod(info.tensors["input"].shape[a] for a in axes) if trailing else 0

        def run(views, ws, rt):
            out = views["output"]
            if out.size == 0:
                return
            k = jit.kernels() if d else None
            if k is not None and bits(views["input"]) is not None:
                outs = Outputs()
                x2, o1 = rows2d(views["input"], d), outs.flat(out)
                xb, ob = bits(x2), bits(o1)
                ranges = split(*x2.shape, ONE_PASS_PART)
                if op == "max":
                    run_rows(lambda _, r0, r1: k.row_max(xb, ob, r0, r1), ranges)
                else:
                    scale = 1.0 if op == "sum" else 1.0 / d
                    run_rows(lambda _, r0, r1: k.row_sums(xb, ob, scale, r0, r1), ranges)
                outs.done()
                return
            store(out, reduce_numpy(views["input"], axes, op, dtype), dtype)

        return run

    return cpu


@dataclass(frozen=True)
class ReduceFamily:
    """What a reduction's NVIDIA factory declares: its op (sum, max or mean) and dtypes."""

    op: str
    dtypes: frozenset

    def compile_units(self):  # every kernel a plan can launch
        return [(REDUCE_SOURCE, [n for dt in sorted(self.dtypes) for n in kernel_names(dt, self.op)])]


def nvidia_factory(op: str, dtypes):
    def factory(info: Info, handle):
        return ReduceKernel(handle, info.tensors["input"], kept_strides(info), info.axes, op)

    factory.reduction = ReduceFamily(op, frozenset(dtypes))
    factory.compile_units = factory.reduction.compile_units
    return factory


def single_dim_op(*, name: str, stem: str, op: str, dtypes, torch: str, summary: str, empty_extent: bool = True) -> OpSpec:
    """The OpSpec of ``op`` (sum, max or mean) of ``input`` over one ``dim`` into ``output``, keepdim
    implied by the output's ndim (if given it must agree); ``torch`` is the torch function's name,
    the reference. ``empty_extent=False``: an empty reduced extent is BAD_TENSOR_SHAPE."""

    def validate(check: Checker) -> Info:
        x, y = check["input"], check["output"]
        check.dtype_in("input", dtypes)
        nd = x.ndim
        axis = check.axis("dim", check.attrs["dim"], nd)
        axes = (axis,) if nd else ()
        if y.ndim == nd:
            keepdim = True
        elif y.ndim == nd - 1:
            keepdim = False
        else:
            want = f"{nd} (keepdim) or {nd - 1}" if nd else "0"
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'output' has ndim {y.ndim}; expected {want}")
        if check.attrs.get("keepdim") is not None and bool(check.attrs["keepdim"]) != keepdim:
            want = nd if check.attrs["keepdim"] else nd - 1
            check.fail(
                Status.BAD_TENSOR_SHAPE,
                f"tensor 'output' has ndim {y.ndim}; keepdim={check.attrs['keepdim']} needs {want}",
            )
        if not empty_extent and nd and x.shape[axis] == 0:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'input' has an empty extent at dim {axis}: {op} of nothing")
        check_output(check, axes, keepdim)
        return Info(check.op, check.tensors, check.attrs, axes=axes, keepdim=keepdim)

    def reference(input, dim=-1, keepdim=None):
        import torch as th

        if input.ndim == 0:
            return input.clone()
        return {"output": getattr(th, torch)(input, dim=dim, keepdim=bool(keepdim))}

    def infer(input, dim=-1, keepdim=None):
        from ..tensor import create_tensor_descriptor

        return {"output": create_tensor_descriptor(reduced_shape(input.shape, (dim,), bool(keepdim)), None, input.dtype)}

    return OpSpec(
        name=name,
        stem=stem,
        tensors=(out("output"), inp("input")),
        attrs=(
            Attr("dim", "int", -1, aliases=("axis",)),
            Attr("keepdim", "bool", None, doc="optional: implied by the output's ndim; if given it must agree"),
        ),
        validate=validate,
        dtypes=frozenset(dtypes),
        cpu=cpu_factory(op),
        nvidia=nvidia_factory(op, dtypes),
        reference=reference,
        infer=infer,
        torch=f"torch.{torch}(input, dim, keepdim)",
        summary=summary,
    )
