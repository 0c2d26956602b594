"""Issue 4 A/B: reduce_rows16 (f16 / bf16 rows, raw words, packed max) against the old
reduce_rows and its tuning switches on 8192^2 full and last-dim sum / max / mean, in one
process (the harness of ``tools.bench.suites.reductions``: interleaved, alternating order,
CUDA events per call, CUDA-graph replay for kernel-only time, results checked against torch).

    python3 -m tools.bench.ab_reduce16 --reps 50 [--match TEXT] [--out FILE] [--set rows|full|round8|round8b|round9|round9b]

``--set round9`` (round 9D): last-dim sum / max / mean of (4, 512, 896) f32 / f16 / bf16 and
rows of 896 .. 2048 (4096 / 2048 / 1024 / 64 rows), the warp-per-row plan (reduce_rows_warp) against
the old 64-thread row blocks, without the load-dependency trick, 2 / 8 rows per block, 2 packs
per lane per batch; rows of 512 with IOP_REDUCE_RW=all.
``--set round9b``: the final rule against the old plans (DEP forced 0 / 1 on the main shape),
rows of 512 / 128 / 64 and of 2048 (round 7's warp rule before).
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


# round 9D: short last-dim rows (reduce_rows_warp: a warp per row, all NP loads of a lane issued
# before any combine) against the old plan (64-thread blocks, one row each) and its switches
RW_OLD = {"IOP_REDUCE_RW": "0"}
RW9 = {
    "old": RW_OLD,
    "new": {},
    "nodep": {"IOP_REDUCE_RWDEP": "0"},
    "rpb2": {"IOP_REDUCE_RWB": "2"},
    "rpb8": {"IOP_REDUCE_RWB": "8"},
    "np2": {"IOP_REDUCE_RWNP": "2"},
}
RW9_SHORT = {"old": RW_OLD, "new": {}, "nodep": {"IOP_REDUCE_RWDEP": "0"}, "rpb8": {"IOP_REDUCE_RWB": "8"}}


def cases_round9():
    out = []
    for op in ("sum", "reduce_max", "reduce_mean"):
        for dt in ("f32", "f16", "bf16"):
            out.append((red.reduce_case(op, dt, (4, 512, 896), (-1,)), RW9, True))
    for shape in ((4096, 896), (2048, 1024), (64, 896), (1024, 2048)):
        for dt in ("f32", "f16"):
            if shape == (1024, 2048) and dt == "f32":
                continue  # 512 f32 packs: not in the rule's range
            out.append((red.reduce_case("sum", dt, shape, (-1,)), RW9_SHORT, True))
    # round 7's warp rule (reduce_rows16, >= 8 rows per SM) against reduce_rows_warp (RW=all)
    out.append((red.reduce_case("sum", "f16", (2048, 2048), (-1,)), {"old": {}, "all": {"IOP_REDUCE_RW": "all"}}, True))
    out.append((red.reduce_case("reduce_max", "bf16", (4096, 896), (-1,)), RW9_SHORT, True))
    for dt in ("f32", "f16"):  # rows of 512: the 8-rows-per-block plan against IOP_REDUCE_RW=all
        out.append((red.reduce_case("sum", dt, (8192, 512), (-1,)), {"old": {}, "all": {"IOP_REDUCE_RW": "all"}}, True))
    return out


# round 9D, second run: the final rule (rows of <= 512 and round 7's rows of 2048 too; DEP by op)
# against the old plans, DEP forced either way, and the short / 2048-element rows
def cases_round9b():
    v = {"old": RW_OLD, "new": {}, "dep1": {"IOP_REDUCE_RWDEP": "1"}, "dep0": {"IOP_REDUCE_RWDEP": "0"}}
    on = {"old": RW_OLD, "new": {}}
    out = []
    for op in ("sum", "reduce_max", "reduce_mean"):
        for dt in ("f32", "f16", "bf16"):
            out.append((red.reduce_case(op, dt, (4, 512, 896), (-1,)), v, True))
    for shape, dts in (
        ((8192, 512), ("f32", "f16")),
        ((8192, 128), ("f32", "f16")),
        ((16384, 64), ("f16",)),
        ((2048, 2048), ("f16",)),
        ((8192, 2048), ("f16", "bf16")),
        ((4096, 896), ("f32", "bf16")),
    ):
        for dt in dts:
            out.append((red.reduce_case("sum", dt, shape, (-1,)), on, True))
    for shape in ((8192, 512), (8192, 2048)):
        out.append((red.reduce_case("reduce_max", "f16", shape, (-1,)), on, True))
    return out


if __name__ == "__main__":
    argv = sys.argv[1:]
    which = "round8b"
    if "--set" in argv:
        i = argv.index("--set")
        which = argv[i + 1]
        del argv[i : i + 2]
    red.ab_cases = {
        "rows": cases,
        "full": cases,
        "round8": cases_round8,
        "round8b": cases_round8b,
        "round9": cases_round9,
        "round9b": cases_round9b,
    }[which]
    raise SystemExit(red.ab_main(argv))
