from infiniop_py.pool.cases import backward_cases

CASES = backward_cases("avg_pool_backward")
