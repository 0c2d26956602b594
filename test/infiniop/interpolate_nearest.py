"""Test and profile `interpolate_nearest`: python test/infiniop/interpolate_nearest.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("interpolate_nearest"))
