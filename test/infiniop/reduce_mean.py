"""Test and profile `reduce_mean`: python test/infiniop/reduce_mean.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("reduce_mean"))
