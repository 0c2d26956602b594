"""NVIDIA backend plumbing: lazy CuPy access, the compile cache and a thin launcher."""
