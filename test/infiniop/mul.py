"""Test and profile `mul`: python test/infiniop/mul.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("mul"))
