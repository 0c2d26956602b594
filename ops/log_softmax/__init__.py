"""log_softmax: torch.log_softmax(input, dim), any strides, in-place ok (ops.md §2.3)."""

from infiniop_py.reduce.softmax_ops import softmax_op

SPEC = softmax_op(
    name="log_softmax",
    stem="LogSoftmax",
    log=True,
    torch="log_softmax",
    summary="log-softmax along dim (any strides, in-place ok)",
    gguf_names=("logsoftmax",),
)
