"""CPU backend machinery shared by the operators: the thread pool (:mod:`.pool`) and the
optional compiled kernels (:mod:`.jit`, numba from the ``cpu-fast`` extra)."""
