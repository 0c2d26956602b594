"""Test and profile `random_sample`: python test/infiniop/random_sample.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("random_sample"))
