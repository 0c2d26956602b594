"""Test and profile `cross_entropy_loss_backward`: python test/infiniop/cross_entropy_loss_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("cross_entropy_loss_backward"))
