"""Test and profile `sigmoid_backward`: python test/infiniop/sigmoid_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("sigmoid_backward"))
