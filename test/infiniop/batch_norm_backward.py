"""Test and profile `batch_norm_backward`: python test/infiniop/batch_norm_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("batch_norm_backward"))
