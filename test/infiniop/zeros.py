"""Test and profile `zeros`: python test/infiniop/zeros.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("zeros"))
