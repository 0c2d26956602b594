"""Test and profile `logical_and`: python test/infiniop/logical_and.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("logical_and"))
