"""Test and profile `relu_backward`: python test/infiniop/relu_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("relu_backward"))
