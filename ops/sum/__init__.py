"""sum: torch.sum(input, dim=dims, keepdim=keepdim) over any set of dims (ops.md §2.1).

C-style form is odd: create takes ``(output, input, dims*, dims_len, keepdim)`` and calculate
repeats ``(dims, dims_len, keepdim)`` after the tensors; the repeated values must equal
create's (BAD_PARAM). An empty ``dims`` reduces every dim.
"""

from infiniop_py.dtypes import F
from infiniop_py.reduce.ops import check_output, cpu_factory, nvidia_factory, reduced_shape
from infiniop_py.spec import Attr, Checker, Info, declare, inp, out
from infiniop_py.status import Status, error


def validate(check: Checker) -> Info:
    x = check["input"]
    check.dtype_in("input", F)
    dims = check.attrs["dims"]
    if check.attrs["dims_len"] is not None and check.attrs["dims_len"] != len(dims):
        check.fail(Status.BAD_PARAM, f"attribute 'dims_len'={check.attrs['dims_len']} but dims has {len(dims)} entries")
    nd = x.ndim
    axes = []
    for d in dims:
        if not -max(nd, 1) <= d < max(nd, 1):
            check.fail(Status.BAD_PARAM, f"attribute 'dims' entry {d} is out of range for a {nd}-d input")
        a = d % nd if nd else 0
        if a in axes:
            check.fail(Status.BAD_PARAM, f"attribute 'dims' has duplicate dim {d}")
        axes.append(a)
    if not dims or nd == 0:
        axes = list(range(nd))
    axes = tuple(sorted(axes))
    keepdim = check.attrs["keepdim"]
    check_output(check, axes, keepdim)
    return Info(check.op, check.tensors, check.attrs, axes=axes, keepdim=keepdim)


def check_runtime_repeat(info: Info, rt) -> None:
    """The C-style calculate's repeated (dims, dims_len, keepdim) must equal create's."""
    if not rt:
        return
    dims, dims_len, keepdim = (tuple(rt) + (None, None, None))[:3]
    if dims is not None and tuple(dims) != tuple(info.attrs["dims"]):
        if dims_len is None or tuple(dims)[:dims_len] != tuple(info.attrs["dims"]):
            raise error(Status.BAD_PARAM, f"sum: calculate dims {list(dims)} differ from create's {list(info.attrs['dims'])}")
    if dims_len is not None and dims_len != len(info.attrs["dims"]):
        raise error(Status.BAD_PARAM, f"sum: calculate dims_len {dims_len} differs from create's {len(info.attrs['dims'])}")
    if keepdim is not None and bool(keepdim) != bool(info.attrs["keepdim"]):
        raise error(Status.BAD_PARAM, f"sum: calculate keepdim {keepdim} differs from create's {info.attrs['keepdim']}")


_cpu = cpu_factory("sum")
_gpu = nvidia_factory("sum", F)


def cpu(info):
    run = _cpu(info)

    def checked(views, ws, rt):
        check_runtime_repeat(info, rt)
        run(views, ws, rt)

    return checked


def nvidia(info, handle):
    kernel = _gpu(info, handle)
    inner = kernel.launch

    def launch(ptrs, ws_ptr, rt, stream):
        check_runtime_repeat(info, rt)
        inner(ptrs, ws_ptr, rt, stream)

    kernel.launch = launch
    return kernel


nvidia.reduction = _gpu.reduction
nvidia.compile_units = _gpu.compile_units


def reference(input, dims=(), keepdim=False, dims_len=None, **_runtime):
    import torch

    dims = list(dims) if dims else list(range(input.ndim))
    if input.ndim == 0:
        return input.clone()
    return torch.sum(input, dim=dims, keepdim=keepdim)


def infer(input, dims=(), keepdim=False, dims_len=None):
    from infiniop_py.tensor import create_tensor_descriptor

    return {"output": create_tensor_descriptor(reduced_shape(input.shape, dims, keepdim), None, input.dtype)}


SPEC = declare(
    globals(),
    name="sum",
    stem="Sum",
    tensors=(out("output"), inp("input")),
    attrs=(
        Attr("dims", "ints", (), aliases=("dim",), doc="dims to reduce (negative ok); empty: all"),
        Attr("keepdim", "bool", False),
        Attr("dims_len", "int", None, doc="C-style only: len(dims)"),
    ),
    runtime=(  # the C-style calculate repeats create's values (positional); checked, then unused
        Attr("calc_dims", "ints", None),
        Attr("calc_dims_len", "int", None),
        Attr("calc_keepdim", "bool", None),
    ),
    c_attrs=("dims", "dims_len", "keepdim"),
    dtypes=F,
    torch="torch.sum(input, dim=dims, keepdim=keepdim)",
    summary="sum over a list of dims (empty: all), keepdim",
)
