"""cross_entropy_loss_backward: grad_logits = (probs - target) / N, N = numel / C (ops.md §2.7).

probs are already softmaxed, target is one-hot with probs' shape and dtype; the class dim is
the last dim. Inputs may carry zero strides. NVIDIA: the shared elementwise kernels with the
scale 1/N as a scalar.
"""

from infiniop_py.dtypes import F, acc_numpy, to_numpy
from infiniop_py.elementwise.cuda import make_nvidia
from infiniop_py.spec import Checker, Info, declare, inp, out
from infiniop_py.status import Status

EXPR = "(probs - target) * inv_n"


def validate(check: Checker) -> Info:
    p = check["probs"]
    check.dtype_in("probs", F)
    check.same_dtype("probs", "target", "grad_logits")
    check.same_shape("probs", "target", "grad_logits")
    if p.ndim < 1:
        check.fail(Status.BAD_TENSOR_SHAPE, "tensor 'probs' must have a class dim (ndim >= 1)")
    check.writable("grad_logits")
    C = p.shape[-1]
    n = p.numel // C if C else 0
    return Info(check.op, check.tensors, check.attrs, n_rows=n)


def cpu(info: Info):
    dtype = info.tensors["probs"].dtype
    acc = acc_numpy(dtype)
    n = info.n_rows

    def run(views, ws, rt):
        g = views["grad_logits"]
        if g.size == 0:
            return
        inv = acc(1.0) / acc(n)
        g[...] = ((views["probs"].astype(acc) - views["target"].astype(acc)) * inv).astype(to_numpy(dtype))

    return run


_ew = make_nvidia("ce_loss_bwd", EXPR, ("probs", "target"), ("inv_n",), lambda: [(d, (d, d)) for d in sorted(F)])


def nvidia(info: Info, handle):
    ew = Info(info.op, info.tensors, {"inv_n": 1.0 / max(info.n_rows, 1)}, out_name="grad_logits", reads=("probs", "target"))
    return _ew(ew, handle)


nvidia.compile_units = _ew.compile_units


def reference(probs, target):
    n = probs.numel() // probs.shape[-1]
    return (probs - target) / n


SPEC = declare(
    globals(),
    name="cross_entropy_loss_backward",
    stem="CrossEntropyLossBackward",
    tensors=(out("grad_logits"), inp("probs"), inp("target")),
    dtypes=F,
    infer=lambda probs, target: {"grad_logits": probs},
    torch="(probs - target) / (probs.numel() // probs.shape[-1])",
    summary="(probs - one_hot) / N, class dim last",
)
