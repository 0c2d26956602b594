"""Test and profile `leaky_relu`: python test/infiniop/leaky_relu.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("leaky_relu"))
