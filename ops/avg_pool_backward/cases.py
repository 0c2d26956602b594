from infiniop_py.testing.pool_cases import cases

CASES = cases("avg_pool_backward")
