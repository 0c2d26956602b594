"""reduce_max / reduce_mean: one dim, keepdim implied by the output's ndim (ops.md §2.2)."""

from __future__ import annotations

from ..spec import Attr, Checker, Info, OpSpec, inp, out
from ..status import Status
from .cases import reduced_shape
from .ops import check_output, cpu_factory, nvidia_factory


def make_validate(dtypes, reject_empty: bool):
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
        if reject_empty and nd and x.shape[axis] == 0:
            check.fail(Status.BAD_TENSOR_SHAPE, f"tensor 'input' has an empty extent at dim {axis}: max of nothing")
        check_output(check, axes, keepdim)
        return Info(check.op, check.tensors, check.attrs, axes=axes, keepdim=keepdim)

    return validate


def single_dim_spec(name: str, stem: str, op: str, dtypes, torch_fn: str, summary: str) -> OpSpec:
    def reference(input, dim=-1, keepdim=None):
        import torch

        if input.ndim == 0:
            return input.clone()
        fn = torch.amax if op == "max" else torch.mean
        return {"output": fn(input, dim=dim, keepdim=bool(keepdim))}

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
        validate=make_validate(dtypes, op == "max"),
        dtypes=frozenset(dtypes),
        cpu=cpu_factory(op),
        nvidia=nvidia_factory(op, dtypes),
        reference=reference,
        infer=infer,
        torch=torch_fn,
        summary=summary,
    )
