"""Test and profile `linear_backward`: python test/infiniop/linear_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("linear_backward"))
