"""max_pool: maximum over the in-bounds part of each window, 1-3 spatial dims (ops.md §6.4,
§6.7); padding never wins and a NaN in the window gives NaN. Shared code: infiniop_py/pool."""

from infiniop_py.pool import ATTRS, DTYPES, infer_forward, reference_forward, validate_forward
from infiniop_py.pool.cpu import forward
from infiniop_py.pool.cuda import MAX_FWD, nvidia_factory
from infiniop_py.spec import OpSpec, inp, out

SPEC = OpSpec(
    name="max_pool",
    stem="MaxPool",
    tensors=(out("output"), inp("input")),
    attrs=ATTRS,
    validate=validate_forward,
    dtypes=DTYPES,
    cpu=forward("max"),
    nvidia=nvidia_factory(MAX_FWD, "output", ("input",)),
    reference=reference_forward("max"),
    infer=infer_forward,
    torch="F.max_pool{n}d(input, kernel_size, stride, padding, ceil_mode=ceil_mode)",
    summary="max pooling over 1-3 spatial dims (dilation 1, no indices)",
    gguf_names=("maxpool",),
    kernel_sources=("../../infiniop_py/pool/pool.cu", "../../infiniop_py/pool/pool_fast.cu"),
)
