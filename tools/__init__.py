"""Developer tools, run from the repository root.

``python tools/compile_check.py`` (every CUDA kernel compiles without a GPU),
``python tools/new_op_scripts.py`` (the per-operator profile scripts under test/infiniop/),
``python tools/gen_docs.py`` (the operator reference table).
"""
