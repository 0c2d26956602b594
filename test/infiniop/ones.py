"""Test and profile `ones`: python test/infiniop/ones.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("ones"))
