"""Issue 4 A/B: reduce_rows16 (f16 / bf16 rows, raw words, packed max) against the old
reduce_rows and its tuning switches on 8192^2 full and last-dim sum / max / mean, in one
process (the harness of ``tools.bench.suites.reductions``: interleaved, alternating order,
CUDA events per call, CUDA-graph replay for kernel-only time, results checked against torch).

    python3 -m tools.bench.ab_reduce16 --reps 50 [--match TEXT] [--out FILE]
"""

from __future__ import annotations

from .suites import reductions as red

# run 1 (variants of the 64-thread row plan): old, new (LDK 0), ldk1, ldk2, ldk3, u16, warp
ROWS = {
    "old": {"IOP_REDUCE_H16": "0"},
    "g64": {"IOP_REDUCE_WARP": "0"},
    "new": {},
    "wu16": {"IOP_REDUCE_U": "16"},
    "wldk1": {"IOP_REDUCE_LDK": "1"},
    "wldk3": {"IOP_REDUCE_LDK": "3"},
}
FULL = {
    "old": {"IOP_REDUCE_H16": "0"},
    "new": {},
    "ldk1": {"IOP_REDUCE_LDK": "1"},
    "tps4096": {"IOP_REDUCE_TPS": "4096"},
    "tps8192": {"IOP_REDUCE_TPS": "8192"},
}


def cases():
    out = []
    for op, axes in (("sum", (1,)), ("sum", None), ("reduce_max", (1,)), ("reduce_mean", (1,))):
        for dt in ("f16", "bf16"):
            var = FULL if axes is None else ROWS
            out.append((red.reduce_case(op, dt, (8192, 8192), axes), var, True))
    return out


if __name__ == "__main__":
    red.ab_cases = cases
    raise SystemExit(red.ab_main())
