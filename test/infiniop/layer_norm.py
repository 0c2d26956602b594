"""Test and profile `layer_norm`: python test/infiniop/layer_norm.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("layer_norm"))
