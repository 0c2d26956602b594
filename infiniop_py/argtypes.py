"""argparse types shared by the command-line tools (profile scripts, run_profiles, the benchmark)."""

from __future__ import annotations

import argparse


def int_at_least(low: int):
    """An argparse ``type``: an integer >= ``low`` (a usage error, exit 2, otherwise)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return n

    parse.__name__ = f"integer >= {low}"
    return parse
