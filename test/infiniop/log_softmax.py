"""Test and profile `log_softmax`: python test/infiniop/log_softmax.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("log_softmax"))
