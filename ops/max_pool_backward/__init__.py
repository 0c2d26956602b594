"""max_pool_backward: grad_input of max_pool, 1-3 spatial dims (ops.md §6.8). The argmax is
recomputed from ``input``: the first maximum in row-major window order wins ties, the last NaN
wins when there is one (torch's rule). Overlapping windows accumulate in a fixed order (each
grad_input element gathers over its covering windows; no atomics); other positions get 0."""

from infiniop_py.pool import ATTRS, DTYPES, infer_backward, reference_backward, validate_backward
from infiniop_py.pool.cpu import backward
from infiniop_py.pool.cuda import MAX_BWD_TILED, nvidia_factory
from infiniop_py.spec import OpSpec, inp, out

SPEC = OpSpec(
    name="max_pool_backward",
    stem="MaxPoolBackward",
    tensors=(out("grad_input"), inp("grad_output"), inp("input")),
    attrs=ATTRS,
    validate=validate_backward,
    dtypes=DTYPES,
    cpu=backward("max"),
    nvidia=nvidia_factory(MAX_BWD_TILED, "grad_input", ("grad_output", "input")),
    reference=reference_backward("max"),
    infer=infer_backward,
    torch="autograd of F.max_pool{n}d(input, kernel_size, stride, padding, ceil_mode=ceil_mode)",
    summary="gradient of max_pool with respect to its input (argmax recomputed; deterministic gather)",
    gguf_names=("maxpool_backward",),
    kernel_sources=("../../infiniop_py/pool/pool.cu", "../../infiniop_py/pool/pool_fast.cu"),
)
