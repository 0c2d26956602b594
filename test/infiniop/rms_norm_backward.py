"""Test and profile `rms_norm_backward`: python test/infiniop/rms_norm_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("rms_norm_backward"))
