"""Issue 4, round 8B A/B: softmax / log_softmax (4096, N) f16 / bf16 for the mid rows N = 2048,
2049, 4096, 4097: the one-row-per-warp kernel (``old``: ``row_softmax_warp``, the default)
against ``row_softmax_wpipe`` variants (``IOP_ROWWISE_PIPE=1`` plus its switches: rows per
warp with the next row loaded during the write pass, two warps per row, cache hints), in one
process (the harness of ``tools.bench.suites.reductions``: interleaved, alternating order,
CUDA events per call, CUDA-graph replay for kernel-only time, results checked against torch),
then a torch copy of the same bytes timed by the same graph replay (the kernel-only ceiling of
one launch of that size).

    python3 -m tools.bench.ab_softmax8 --reps 50 [--match TEXT] [--out FILE] [--minb | --short | --short2 | --r10 | --f32warp | --ce | --align | --shift]

Round 9C (``--short``): short rows N = 17 ... 1000, f32 / f16 / bf16: ``row_softmax_short`` (L
lanes per row, P packs per lane; ``new`` is the default rule) against the earlier kernels
(``old``: ``IOP_ROWWISE_SHORT=0``) and its lane / pack / block-size switches; ``--short2`` is
the confirmation run (old vs the default rule, and nc loads).
"""

from __future__ import annotations

import sys

from .suites import reductions as red

PIPE = {"IOP_ROWWISE_PIPE": "1"}
OLD = {"IOP_ROWWISE_PIPE": "0"}  # row_softmax_warp, 4 warps per block (the round-6 default)
MID2K = {  # N = 2048 / 2049: 8 packs per lane
    "old": OLD,
    "nc": {**PIPE, "IOP_ROWWISE_PIPE_H": "9"},  # wpipe, no loop, ld.global.nc.L1::no_allocate
    "w1": {**OLD, "IOP_ROWWISE_WARPS": "1"},  # one warp per block
    "w2": {**OLD, "IOP_ROWWISE_WARPS": "2"},
    "ncw1": {**PIPE, "IOP_ROWWISE_PIPE_H": "9", "IOP_ROWWISE_WARPS": "1"},
}
MID4K = {  # N = 4096 / 4097: 16 packs per lane, or 8 with two warps per row
    "old": OLD,
    "new": {},  # default: two warps per row (s2) on unaligned rows (4097), old on 4096
    "s2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "8"},
    "s2w2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "8", "IOP_ROWWISE_WARPS": "2"},
    "s2nc": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "9"},
    "w1": {**OLD, "IOP_ROWWISE_WARPS": "1"},
}
MINB4K = {  # aligned 4096, 16 packs per lane: launch bound 5 (default, 96 registers, 1.55 waves) vs 4 / 3
    "old": OLD,
    "m4": {**OLD, "IOP_ROWWISE_WARP_MINB": "4"},
    "m3": {**OLD, "IOP_ROWWISE_WARP_MINB": "3"},
    "m6": {**OLD, "IOP_ROWWISE_WARP_MINB": "6"},
}


SHORT_OLD = {"IOP_ROWWISE_SHORT": "0"}  # the block kernel / row_softmax_warp (round 8B rule)
SHORT_ALL = {"IOP_ROWWISE_SHORT": "all"}  # the short kernel at any N that fits (rule's L / P)
SHORT128 = {  # N = 128: f32 32 packs, 16-bit 16 packs
    "old": SHORT_OLD,
    "new": SHORT_ALL,  # 2 packs per lane: f32 16 lanes, 16-bit 8 lanes
    "p1": {**SHORT_ALL, "IOP_ROWWISE_SHORT_P": "1"},  # f32 32 lanes, 16-bit 16 lanes
    "p4": {**SHORT_ALL, "IOP_ROWWISE_SHORT_P": "4"},  # f32 8 lanes, 16-bit 4 lanes
    "w2": {**SHORT_ALL, "IOP_ROWWISE_SHORT_W": "2"},  # 64-thread blocks
    "w1": {**SHORT_ALL, "IOP_ROWWISE_SHORT_W": "1"},
}
SHORT_N = {  # other N: the rule's L / P and its neighbours
    "old": SHORT_OLD,
    "new": SHORT_ALL,
    "p1": {**SHORT_ALL, "IOP_ROWWISE_SHORT_P": "1"},
    "p4": {**SHORT_ALL, "IOP_ROWWISE_SHORT_P": "4"},
}


def cases_short():
    """Round 9C, run 1: the short-row kernel's variants at N = 128 (every dtype) and its range
    (N = 17, 64, 256, 512, 1000)."""
    out = []
    for n in (128, 1000, 17, 64, 256, 512):
        for dt in ("f32", "f16", "bf16"):
            if dt == "bf16" and n not in (128, 1000):
                continue  # bf16 moves the bytes of f16; its rule is the same
            for op in ("softmax", "log_softmax"):
                var = SHORT128 if n == 128 else SHORT_N
                if n == 17:
                    var = {k: v for k, v in var.items() if k in ("old", "new")}  # 4 lanes either way
                out.append((red.softmax_case(op, dt, (4096, n)), var, True))
    return out


def cases_short2():
    """Round 9C, run 2: old vs the default rule (no switches) and nc loads (``IOP_ROWWISE_SHORT_H=1``)."""
    var = {"old": SHORT_OLD, "new": {}, "nc": {"IOP_ROWWISE_SHORT_H": "1"}}
    out = []
    for n in (128, 1000, 17, 64, 256, 512):
        for dt in ("f32", "f16", "bf16"):
            if dt == "bf16" and n not in (128, 1000):
                continue
            for op in ("softmax", "log_softmax"):
                out.append((red.softmax_case(op, dt, (4096, n)), var, True))
    return out


MID4K_R10 = {  # session 2026-11-22 (third), after the branch-free write pass: S2 vs the warp kernel
    "w4": {**OLD, "IOP_ROWWISE_WARPS": "4"},  # row_softmax_warp, 4 warps per block (the earlier default)
    "w1": {**OLD, "IOP_ROWWISE_WARPS": "1"},
    "s2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "8"},
    "s2nc": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "9"},
    "ncw1": {**PIPE, "IOP_ROWWISE_PIPE_H": "9", "IOP_ROWWISE_WARPS": "1"},  # one warp per row, nc loads
}


def cases_r10():
    """Session 2026-11-22 (third): N = 4096 / 4097 after ``st16_if`` (``--r10``)."""
    return [
        (red.softmax_case(op, dt, (4096, n)), MID4K_R10, True)
        for n in (4096, 4097)
        for dt in ("f16", "bf16")
        for op in ("softmax", "log_softmax")
    ]


F32_WARP = {  # f32 rows of 257-512 packs: the block kernel (default) vs row_softmax_short with 16 packs per lane
    "old": {},
    "short": SHORT_ALL,  # 32 lanes (a warp) per row, 16 packs per lane, 4 warps per block
    "sw1": {**SHORT_ALL, "IOP_ROWWISE_SHORT_W": "1"},
    "sw1nc": {**SHORT_ALL, "IOP_ROWWISE_SHORT_W": "1", "IOP_ROWWISE_SHORT_H": "1"},
    "snc": {**SHORT_ALL, "IOP_ROWWISE_SHORT_H": "1"},
}


ALIGN128 = {"h0": {}, "h8": {"IOP_ROWWISE_SHORT_H": "8"}}  # packs from a 16- vs 128-byte boundary


ALIGN128W = {"h0": {}, "al": {"IOP_ROWWISE_WARP_AL": "1"}}  # row_softmax_warp, the same


def cases_align():
    """Session 2026-11-22 (fourth): unaligned rows, packs from a 128-byte boundary (``--align``):
    f32 2049 (row_softmax_short), half 4097 / 4096 (row_softmax_warp; f16 log_softmax 4097
    takes two warps per row by default, so it is measured with IOP_ROWWISE_PIPE=0 too)."""
    out = [(red.softmax_case(op, "f32", (4096, 2049)), ALIGN128, True) for op in ("softmax", "log_softmax")]
    w = {**ALIGN128W, "w0": {"IOP_ROWWISE_PIPE": "0"}, "w0al": {"IOP_ROWWISE_PIPE": "0", "IOP_ROWWISE_WARP_AL": "1"}}
    for n in (4097, 4096):
        for dt in ("f16", "bf16"):
            for op in ("softmax", "log_softmax"):
                var = w if (n, dt, op) == (4097, "f16", "log_softmax") else ALIGN128W
                out.append((red.softmax_case(op, dt, (4096, n)), var, True))
    return out


SHIFT = {"sh0": {"IOP_ROWWISE_WARP_SH": "0"}, "sh1": {"IOP_ROWWISE_WARP_SH": "1"}}


def cases_shift():
    """Session 2026-11-22 (fifth): row_softmax_warp's exponentials as exp_ftz(v - m) vs one FFMA
    and one ex2 (ShiftExp), half rows of 4096 / 4097 / 8192 (``--shift``)."""
    return [
        (red.softmax_case(op, dt, (4096, n)), SHIFT, True)
        for n in (4096, 4097, 8192)
        for dt in ("f16", "bf16")
        for op in ("softmax", "log_softmax")
    ]


def cases_f32warp():
    """Session 2026-11-22 (third): f32 N = 1100 ... 2051 with a warp per row (``--f32warp``)."""
    return [
        (red.softmax_case(op, "f32", (4096, n)), F32_WARP, True)
        for n in (2048, 2049, 1536, 1100)
        for op in ("softmax", "log_softmax")
    ]


LSE = {  # cross entropy: row_softmax with the row cached (old) vs row_lse (streamed) and its switches
    "old": {"IOP_ROWWISE_LSE": "0"},
    "new": {},
    "u2": {"IOP_ROWWISE_LSE_U": "2"},
    "u8": {"IOP_ROWWISE_LSE_U": "8"},
    "g32": {"IOP_ROWWISE_LSE_G": "32"},
    "g64": {"IOP_ROWWISE_LSE_G": "64"},
    "g128": {"IOP_ROWWISE_LSE_G": "128"},
    "g256": {"IOP_ROWWISE_LSE_G": "256"},
}


def cases_ce():
    """Session 2026-11-22 (fourth): cross entropy rows, cached vs streamed (``--ce``)."""
    shapes = [(8192, 32000), (8192, 4096), (8192, 2048), (8192, 1000), (1024, 32000), (128, 32000)]
    return [(red.ce_case(dt, sh), LSE, True) for sh in shapes for dt in ("f32", "f16", "bf16") if dt != "bf16" or sh[0] == 8192]


def cases_minb():
    """Lead's follow-up: the warp kernel's launch bound at N = 4096 (waves per grid)."""
    return [(red.softmax_case(op, dt, (4096, 4096)), MINB4K, True) for dt in ("f16", "bf16") for op in ("softmax", "log_softmax")]


def cases():
    """Round 8B, run 2 (run 1's list: ``cases_run1``)."""
    out = []
    for n in (2048, 2049, 4096, 4097):
        for dt in ("f16", "bf16"):
            for op in ("softmax", "log_softmax"):
                out.append((red.softmax_case(op, dt, (4096, n)), MID2K if n < 4096 else MID4K, True))
    return out


RUN1_2K = {  # run 1, N = 2048 / 2049
    "old": {},
    "nc": {**PIPE, "IOP_ROWWISE_PIPE_H": "9"},  # no loop, ld.global.nc.L1::no_allocate
    "cs": {**PIPE, "IOP_ROWWISE_PIPE_H": "12"},  # no loop, st.global.cs
    "p2": {**PIPE, "IOP_ROWWISE_PIPE_RPW": "2"},  # 2 rows per warp, 80 registers
    "p1.35": {**PIPE, "IOP_ROWWISE_PIPE_RPW": "1.35"},  # ~23 warps per SM, one wave
    "s2p2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_RPW": "2"},
}
RUN1_4K = {  # run 1, N = 4096 / 4097
    "old": {},
    "nc": {**PIPE, "IOP_ROWWISE_PIPE_H": "9"},
    "cs": {**PIPE, "IOP_ROWWISE_PIPE_H": "12"},
    "p2": {**PIPE, "IOP_ROWWISE_PIPE_RPW": "2"},  # 125 registers, 16 warps per SM, one wave
    "s2": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_H": "8"},  # 64 registers, 1.94 waves
    "s2p3": {**PIPE, "IOP_ROWWISE_PIPE_S": "2", "IOP_ROWWISE_PIPE_RPW": "3"},  # 80 registers, ~21 warps per SM
}


def cases_run1():
    """Round 8B, run 1 (``old`` was the default then: row_softmax_warp everywhere)."""
    out = []
    for n in (2048, 2049, 4096, 4097):
        for dt in ("f16", "bf16"):
            for op in ("softmax", "log_softmax"):
                var = RUN1_2K if n < 4096 else RUN1_4K
                if dt == "bf16":  # cache hints: f16 only (the same bytes; fewer modules to compile)
                    var = {k: v for k, v in var.items() if k not in ("nc", "cs")}
                out.append((red.softmax_case(op, dt, (4096, n)), var, True))
    return out


def prewarm(items) -> None:
    """Compile every variant's module before timing, several at a time (NVRTC in threads):
    descriptors are created once with the module lookup recorded instead of compiled."""
    from concurrent.futures import ThreadPoolExecutor

    import infiniop_py as iop
    import infiniop_py.reduce.rowwise as rw
    from infiniop_py.cuda.compiler import get_module

    from .core import switches

    h = iop.create_handle("nvidia")
    keys = set()
    orig = rw.get_module

    class _StopError(Exception):
        pass

    def record(src, names, dev):
        keys.add((src, tuple(names), dev))
        raise _StopError

    rw.get_module = record
    try:
        for case, variants, *_ in items:
            dt = {"f16": iop.float16, "bf16": iop.bfloat16, "f32": iop.float32}[case.dtype]
            for envs in variants.values():
                try:
                    with switches(envs):
                        d = iop.create_tensor_descriptor(case.shape, None, dt)
                        iop.create_descriptor(case.op, h, d, d, dim=-1)
                except Exception:  # noqa: BLE001 - the recorder stops creation on purpose
                    pass
    finally:
        rw.get_module = orig
    with ThreadPoolExecutor(12) as ex:
        list(ex.map(lambda k: get_module(*k), sorted(keys, key=lambda k: k[1])))
    print(f"# prewarmed {len(keys)} modules", flush=True)


def copy_ceiling(reps: int = 30) -> None:
    """Kernel-only (graph replay) and per-call time of a torch copy of the bytes one softmax
    of (4096, 2048) / (4096, 4096) half moves (read + write)."""
    import numpy as np

    from .core import _same_bytes_copy
    from .env import make_env

    env = make_env(False)
    bw = env.copy_bandwidth()["GBps"]
    for n in (2048, 4096):
        nbytes = 2 * 4096 * n * 2
        call, nsets = _same_bytes_copy(env, nbytes)
        for i in range(10):
            call(i % nsets)
        env.sync()
        t = env.time_calls([("copy", lambda s=i % nsets, f=call: f(s)) for i in range(reps * 2)])
        g = red.graph_times(env, {"copy": lambda s, st, f=call: f(s)}, nsets)
        ev = float(np.median(t))
        pct = lambda us, b=nbytes: 100.0 * b / (us * 1e-6) / 1e9 / bw  # noqa: E731
        print(
            f"copy {nbytes / 1e6:.1f} MB (= softmax 4096x{n} half): graph {g['copy']:.2f}us {pct(g['copy']):.0f}%"
            f" | events {ev:.2f}us {pct(ev):.0f}% (copy BW {bw:.0f} GB/s)",
            flush=True,
        )


if __name__ == "__main__":
    red.ab_cases = cases
    case_sets = {  # flag -> the case list it selects (the last one given wins)
        "--minb": cases_minb,  # the launch-bound follow-up
        "--r10": cases_r10,
        "--f32warp": cases_f32warp,
        "--ce": cases_ce,
        "--align": cases_align,
        "--shift": cases_shift,
        "--short": cases_short,
        "--short2": cases_short2,
    }
    for flag, fn in case_sets.items():
        if flag in sys.argv:
            sys.argv.remove(flag)
            red.ab_cases = fn
    if "--no-copy" in sys.argv:
        sys.argv.remove("--no-copy")
        copy_ceiling = lambda: None  # noqa: E731
    if "--no-prewarm" in sys.argv:
        sys.argv.remove("--no-prewarm")
    else:
        try:
            prewarm(red.ab_cases())
        except Exception as exc:  # noqa: BLE001 - timing compiles what is missing
            print(f"# prewarm failed: {type(exc).__name__}: {exc}", flush=True)
    rc = red.ab_main()
    copy_ceiling()
    raise SystemExit(rc)
