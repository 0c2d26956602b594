"""Create the thin profile script ``test/infiniop/<op>.py`` for every registered operator lacking one.

    python tools/new_op_scripts.py          # write the missing scripts, list them
    python tools/new_op_scripts.py --check  # only list them; exit 1 if any is missing

Each script is a few lines that hand the operator's name to ``test/infiniop/_common.py``
(flags: --cpu --nvidia --profile --debug --num_prerun --num_iterations --full).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCRIPTS = ROOT / "test" / "infiniop"

TEMPLATE = '''"""Test and profile `{op}`: python test/infiniop/{op}.py [--cpu] [--nvidia] [--profile] [--debug] (see _common.py)."""

from _common import main

if __name__ == "__main__":
    raise SystemExit(main("{op}"))
'''


def script_text(op: str) -> str:
    return TEMPLATE.format(op=op)


def missing() -> list[str]:
    import infiniop_py as iop

    return [op for op in iop.list_ops() if not (SCRIPTS / f"{op}.py").is_file()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="list missing scripts without writing; exit 1 if any")
    args = ap.parse_args(argv)
    todo = missing()
    if args.check:
        for op in todo:
            print(f"missing: test/infiniop/{op}.py")
        return 1 if todo else 0
    SCRIPTS.mkdir(parents=True, exist_ok=True)
    for op in todo:
        (SCRIPTS / f"{op}.py").write_text(script_text(op))
        print(f"wrote test/infiniop/{op}.py")
    if not todo:
        print("every registered operator has its profile script")
    return 0


if __name__ == "__main__":
    sys.exit(main())
