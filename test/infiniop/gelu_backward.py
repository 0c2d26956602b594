"""Test and profile `gelu_backward`: python test/infiniop/gelu_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("gelu_backward"))
