"""Test and profile `rms_norm`: python test/infiniop/rms_norm.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("rms_norm"))
