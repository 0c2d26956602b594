"""What conv, conv_transpose and conv_backward share (ops.md §6.0-§6.3).

- ``geometry``: the family's attributes, every create-time check and the frozen ``Geometry``.
- ``cpu``: the NumPy backend (im2col / col2im and stacked BLAS GEMMs).
- ``declare``: ``conv_op`` (what the three ``OpSpec`` share) and the declarations' helpers.
- NVIDIA: ``problem`` (what a planner sees: a convolution stage or a weight gradient),
  ``kernels`` (our kernels of kernel.cu and wgrad.cu as configs), ``cudnn_plans`` (cuDNN as
  configs), ``configs`` (the named one-stage configs and the GEMM rule table the three
  operators share) and ``planner`` (the kernel object, pinned and measured plans, the
  one-stage planner). Each operator's ``cuda.py`` states its own rule table.
"""
