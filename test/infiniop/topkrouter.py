"""Test and profile `topkrouter`: python test/infiniop/topkrouter.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("topkrouter"))
