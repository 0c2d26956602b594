"""sigmoid: output = 1/(1+e^-x) (ops.md §1.2)."""

import numpy as np

from infiniop_py.dtypes import F, H
from infiniop_py.elementwise import elementwise_op, make_cpu


def _numpy(x):
    return 1 / (1 + np.exp(-x))


ACCURATE = "if constexpr (sizeof(T) == 8) { return T(1) / (T(1) + exp(-input)); } else { return __frcp_rn(1.0f + expf(-input)); }"

SPEC = elementwise_op(
    name="sigmoid",
    stem="Sigmoid",
    out="output",
    ins=("input",),
    # f32: __frcp_rn is the correctly rounded 1/y, the same bits as the IEEE division, cheaper;
    # f16/bf16 outputs: __expf (relative error <= (2 + 1.16|x|) 2^-24, far below 2^-11)
    cuda=ACCURATE,
    cuda_variant=lambda dt, _: "return __frcp_rn(1.0f + __expf(-input));" if dt in H else ACCURATE,
    numpy=_numpy,
    dtypes=F,
    reference=lambda input: __import__("torch").sigmoid(input),
    torch="torch.sigmoid(input)",
    summary="output = 1/(1+e^-x)",
    tensor_aliases={"x": "input", "y": "output"},
)


def _cpu(info):
    """f32/f64: four in-place ufuncs on the output (no temporaries); halves via the framework."""
    generic = make_cpu(_numpy, ())(info)
    if info.tensors["output"].dtype in H:
        return generic

    def run(views, ws, rt):
        x, dst = views["input"], views["output"]
        if dst.size:
            with np.errstate(all="ignore"):
                np.negative(x, out=dst)
                np.exp(dst, out=dst)
                np.add(dst, 1, out=dst)
                np.reciprocal(dst, out=dst)

    return run


SPEC.cpu = _cpu
