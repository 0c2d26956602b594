"""Test and profile `causal_conv1d`: python test/infiniop/causal_conv1d.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("causal_conv1d"))
