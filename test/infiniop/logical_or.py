"""Test and profile `logical_or`: python test/infiniop/logical_or.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("logical_or"))
