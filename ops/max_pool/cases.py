from infiniop_py.pool.cases import forward_cases

CASES = forward_cases("max_pool")
