"""Test and profile `causal_softmax`: python test/infiniop/causal_softmax.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("causal_softmax"))
