"""``python -m infiniop_py.bench``: the same as ``infiniop-bench`` (see cli.py)."""

import sys

from infiniop_py.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
