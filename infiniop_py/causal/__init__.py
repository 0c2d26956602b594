"""What causal_conv1d, causal_conv1d_backward and causal_conv1d_update share (ops.md §7).

- ``common``: the family's attributes, validation, the NumPy backend's arithmetic and the
  float64 references.
- ``plan`` and ``common.cuh``: the NVIDIA side: the packed launch arguments (``CcArgs``), the
  kernel path per layout, grid sizes, the aligned/unaligned launch pair and the kernel base
  class; each operator's ``kernel.cu`` follows ``common.cuh`` in its source.
"""
