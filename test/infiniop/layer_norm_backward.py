"""Test and profile `layer_norm_backward`: python test/infiniop/layer_norm_backward.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("layer_norm_backward"))
