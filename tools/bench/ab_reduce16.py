"""Issue 4 A/B: reduce_rows16 (f16 / bf16 rows, raw words, packed max) against the old
reduce_rows and its tuning switches on 8192^2 full and last-dim sum / max / mean, in one
process (the harness of ``tools.bench.suites.reductions``: interleaved, alternating order,
CUDA events per call, CUDA-graph replay for kernel-only time, results checked against torch).

    python3 -m tools.bench.ab_reduce16 --reps 50 [--match TEXT] [--out FILE] [--set rows|full|round8|round8b]

``--set round8b`` (the default): round 8A's final A/B, the default plan (grid-stride sweep +
flagged-slot finish) against round 7's (contiguous chunks + fence ticket) and the sweep with
the other finishes, 512-thread blocks and the nc load.
``--set round8`` (round 8A, first run): the one-launch finish of full reductions (fence +
atomic ticket, acq_rel ticket, flagged slots) x grids (528 / 1056 / 2112 blocks, one block of
512 / 1024 threads per SM) x access (contiguous chunk per block, grid-stride sweep) on 8192^2
half sum and the 1-D 2^26 max / mean, plus f32 and (4,512,896) full sums, old vs new.
"""

from __future__ import annotations

import sys

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

# round 8A: the one-launch finish (IOP_REDUCE_LASTMODE) and the full-reduction grid / access
FENCE = {"IOP_REDUCE_LASTMODE": "fence"}
FLAG = {"IOP_REDUCE_LASTMODE": "flag"}
FULL8 = {
    "fence": FENCE,  # round 7: __threadfence + atomicAdd ticket per block, 528 x 256 threads
    "acqrel": {"IOP_REDUCE_LASTMODE": "acqrel"},
    "flag": FLAG,
    "flag2k": {**FLAG, "IOP_REDUCE_TPS": "2048"},
    "flag4k": {**FLAG, "IOP_REDUCE_TPS": "4096"},
    "acq4k": {"IOP_REDUCE_LASTMODE": "acqrel", "IOP_REDUCE_TPS": "4096"},
    "g512": {**FLAG, "IOP_REDUCE_GMAX": "512"},
    "g1k": {**FLAG, "IOP_REDUCE_GMAX": "1024"},
    "ilv": {**FLAG, "IOP_REDUCE_ILV": "1"},
    "ilv2k": {**FLAG, "IOP_REDUCE_ILV": "1", "IOP_REDUCE_TPS": "2048"},
    "ilvg1k": {**FLAG, "IOP_REDUCE_ILV": "1", "IOP_REDUCE_GMAX": "1024"},
}
OLD_NEW = {"fence": FENCE, "flag": FLAG, "default": {}}
# with contiguous chunks per block, as before round 8A: explicit, now that the default differs
for v in FULL8.values():
    v.setdefault("IOP_REDUCE_ILV", "0")
FULL8_SHORT = {k: FULL8[k] for k in ("fence", "acqrel", "flag", "flag4k", "g1k")}
FULL8_SHORT.update({"ilv": FULL8["ilv"], "ilvg1k": FULL8["ilvg1k"]})

# round 8A, second run: the default (grid-stride sweep + flagged-slot finish) against round 7
# and the sweep with the other finishes / block sizes / load instruction
OLD = {"IOP_REDUCE_ILV": "0", "IOP_REDUCE_LASTMODE": "fence"}
ILV8 = {
    "old": OLD,
    "new": {},
    "ilvfence": {"IOP_REDUCE_LASTMODE": "fence"},
    "ilvacq": {"IOP_REDUCE_LASTMODE": "acqrel"},
    "ilvg512": {"IOP_REDUCE_GMAX": "512"},
    "ilvldk1": {"IOP_REDUCE_LDK": "1"},
}


def cases():
    out = []
    for op, axes in (("sum", (1,)), ("sum", None), ("reduce_max", (1,)), ("reduce_mean", (1,))):
        for dt in ("f16", "bf16"):
            var = FULL if axes is None else ROWS
            out.append((red.reduce_case(op, dt, (8192, 8192), axes), var, True))
    return out


def cases_round8():
    out = []
    for dt in ("f16", "bf16"):
        out.append((red.reduce_case("sum", dt, (8192, 8192), None), FULL8, True))
    for op in ("reduce_max", "reduce_mean"):  # a full max / mean: the 1-D view of the same bytes
        for dt in ("f16", "bf16"):
            out.append((red.reduce_case(op, dt, (8192 * 8192,), (0,)), FULL8_SHORT, True))
    for dt in ("f16", "bf16"):  # reference: the last-dim plan on the same bytes
        out.append((red.reduce_case("sum", dt, (8192, 8192), (1,)), {"default": {}}, True))
    out.append((red.reduce_case("sum", "f32", (8192, 8192), None), OLD_NEW, True))
    for dt in ("f32", "f16", "bf16"):
        out.append((red.reduce_case("sum", dt, (4, 512, 896), None), OLD_NEW, True))
    return out


def cases_round8b():
    out = []
    for dt in ("f16", "bf16"):
        out.append((red.reduce_case("sum", dt, (8192, 8192), None), ILV8, True))
    for op in ("reduce_max", "reduce_mean"):
        for dt in ("f16", "bf16"):
            out.append((red.reduce_case(op, dt, (8192 * 8192,), (0,)), ILV8, True))
    for dt in ("f16", "bf16"):
        out.append((red.reduce_case("sum", dt, (8192, 8192), (1,)), {"default": {}}, True))
    out.append((red.reduce_case("sum", "f16", (8191, 8193), None), {"old": OLD, "new": {}}, True))
    for dt in ("f32", "f16", "bf16"):
        out.append((red.reduce_case("sum", dt, (4, 512, 896), None), {"old": OLD, "new": {}}, True))
    out.append((red.reduce_case("sum", "f32", (8192, 8192), None), {"old": OLD, "new": {}}, True))
    return out


if __name__ == "__main__":
    argv = sys.argv[1:]
    which = "round8b"
    if "--set" in argv:
        i = argv.index("--set")
        which = argv[i + 1]
        del argv[i : i + 2]
    red.ab_cases = {"rows": cases, "full": cases, "round8": cases_round8, "round8b": cases_round8b}[which]
    raise SystemExit(red.ab_main(argv))
