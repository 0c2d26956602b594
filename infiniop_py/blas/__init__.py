"""GEMMs on cuBLAS for the operators that multiply matrices (gemm, linear, linear_backward):
:mod:`.gemm` (layouts, ``GemmPlan``, the GemmEx path) and :mod:`.lt` (the cuBLASLt path)."""

from .gemm import Blas, GemmPlan, blas_for, has_unit_stride, layout
from .lt import LtPlan, lt_plan

__all__ = ["Blas", "GemmPlan", "LtPlan", "blas_for", "has_unit_stride", "layout", "lt_plan"]
