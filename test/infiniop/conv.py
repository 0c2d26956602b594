"""Test and profile `conv`: python test/infiniop/conv.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("conv"))
