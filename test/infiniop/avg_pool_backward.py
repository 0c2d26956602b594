"""Test and profile `avg_pool_backward`: python test/infiniop/avg_pool_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("avg_pool_backward"))
