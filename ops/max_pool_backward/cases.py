from infiniop_py.testing.pool_cases import cases

CASES = cases("max_pool_backward")
