"""avg_pool: average over each window with count_include_pad=True, 1-3 spatial dims (ops.md
§6.4-6.5). The divisor counts zero-padding positions but not the positions past L + p that only
ceil_mode reaches. Shared code: infiniop_py/pool (NumPy backend, CUDA kernels in pool.cu)."""

from infiniop_py.pool import ATTRS, DTYPES, infer_forward, reference_forward, validate_forward
from infiniop_py.pool.cpu import forward
from infiniop_py.pool.cuda import AVG_FWD, nvidia_factory
from infiniop_py.spec import OpSpec, inp, out

SPEC = OpSpec(
    name="avg_pool",
    stem="AvgPool",
    tensors=(out("output"), inp("input")),
    attrs=ATTRS,
    validate=validate_forward,
    dtypes=DTYPES,
    cpu=forward("avg"),
    nvidia=nvidia_factory(AVG_FWD, "output", ("input",)),
    reference=reference_forward("avg"),
    infer=infer_forward,
    torch="F.avg_pool{n}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad=True)",
    summary="average pooling over 1-3 spatial dims (count_include_pad=True)",
    gguf_names=("averagepool",),
    kernel_sources=("../../infiniop_py/pool/pool.cu", "../../infiniop_py/pool/pool_fast.cu"),
)
