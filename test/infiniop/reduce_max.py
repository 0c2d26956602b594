"""Test and profile `reduce_max`: python test/infiniop/reduce_max.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("reduce_max"))
