"""avg_pool_backward: grad_input of avg_pool (count_include_pad=True), 1-3 spatial dims (ops.md
§6.6). Each grad_input element gathers grad_output / divisor over the windows covering it in a
fixed order (no atomics); positions no window covers get 0. ``input`` only gives the shape."""

from infiniop_py.pool import ATTRS, DTYPES, infer_backward, reference_backward, validate_backward
from infiniop_py.pool.cpu import backward
from infiniop_py.pool.cuda import AVG_BWD, nvidia_factory
from infiniop_py.spec import OpSpec, inp, out

SPEC = OpSpec(
    name="avg_pool_backward",
    stem="AvgPoolBackward",
    tensors=(out("grad_input"), inp("grad_output"), inp("input")),
    attrs=ATTRS,
    validate=validate_backward,
    dtypes=DTYPES,
    cpu=backward("avg"),
    nvidia=nvidia_factory(AVG_BWD, "grad_input", ("grad_output", "input")),
    reference=reference_backward("avg"),
    infer=infer_backward,
    torch="autograd of F.avg_pool{n}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad=True)",
    summary="gradient of avg_pool with respect to its input (deterministic gather)",
    gguf_names=("averagepool_backward",),
    kernel_sources=("../../infiniop_py/pool/pool.cu", "../../infiniop_py/pool/pool_fast.cu"),
)
