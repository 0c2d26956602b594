"""Test and profile `conv_backward`: python test/infiniop/conv_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("conv_backward"))
