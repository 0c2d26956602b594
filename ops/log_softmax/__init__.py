"""log_softmax: torch.log_softmax(input, dim), any strides, in-place ok (ops.md §2.3)."""

from infiniop_py.reduce.softmax_ops import softmax_spec

SPEC = softmax_spec("log_softmax", "LogSoftmax", log=True, gguf_names=("logsoftmax",))
