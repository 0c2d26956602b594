from infiniop_py.pool.cases import backward_cases

CASES = backward_cases("max_pool_backward")
