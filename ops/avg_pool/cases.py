from infiniop_py.pool.cases import forward_cases

CASES = forward_cases("avg_pool")
