"""Issue 4, round 8B A/B: softmax / log_softmax (4096, N) f16 / bf16 for the mid rows N = 2048,
2049, 4096, 4097: the one-row-per-warp kernel (``old``: ``row_softmax_warp``, the default)
against ``row_softmax_wpipe`` variants (``IOP_ROWWISE_PIPE=1`` plus its switches: rows per
warp with the next row loaded during the write pass, two warps per row, cache hints), in one
process (the harness of ``tools.bench.suites.reductions``: interleaved, alternating order,
CUDA events per call, CUDA-graph replay for kernel-only time, results checked against torch),
then a torch copy of the same bytes timed by the same graph replay (the kernel-only ceiling of
one launch of that size).

    python3 -m tools.bench.ab_softmax8 --reps 50 [--match TEXT] [--out FILE]
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
    import os
    from concurrent.futures import ThreadPoolExecutor

    import infiniop_py as iop
    import infiniop_py.reduce.rowwise as rw
    from infiniop_py.cuda.compiler import get_module

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
                saved = {k: os.environ.get(k) for k in envs}
                os.environ.update(envs)
                try:
                    d = iop.create_tensor_descriptor(case.shape, None, dt)
                    iop.create_descriptor(case.op, h, d, d, dim=-1)
                except Exception:  # noqa: BLE001 - the recorder stops creation on purpose
                    pass
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
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
    if "--no-prewarm" in sys.argv:
        sys.argv.remove("--no-prewarm")
    else:
        try:
            prewarm(cases())
        except Exception as exc:  # noqa: BLE001 - timing compiles what is missing
            print(f"# prewarm failed: {type(exc).__name__}: {exc}", flush=True)
    rc = red.ab_main()
    copy_ceiling()
    raise SystemExit(rc)
