"""Test and profile `cross_entropy_loss`: python test/infiniop/cross_entropy_loss.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("cross_entropy_loss"))
