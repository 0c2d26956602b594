"""Test and profile `batch_norm`: python test/infiniop/batch_norm.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("batch_norm"))
