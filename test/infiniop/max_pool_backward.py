"""Test and profile `max_pool_backward`: python test/infiniop/max_pool_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("max_pool_backward"))
