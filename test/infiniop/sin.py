"""Test and profile `sin`: python test/infiniop/sin.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("sin"))
