"""Test and profile `index_copy`: python test/infiniop/index_copy.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("index_copy"))
