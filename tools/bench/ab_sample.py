"""Issue 4, round 9E: random_sample's select over 16-bit keys. Old (IOP_SAMPLE_SEL=0: fixed
8-bit windows from the top of the 64-bit composites, one-warp histogram picks) against the
flags of IOP_SAMPLE_SEL (1: rm_select2, windows from the highest bit that varies across the
compacted list; 2: survivors gathered into shared memory; 4: the 2048-bin histogram picked by
the whole block; 8: batched loads in rm_hist / rm_compact; s3, s12, s13, s15 below) on the bench
suite's sampled cases, f32 / f16 / bf16, in one process
(the harness of ``tools.bench.suites.reductions``: interleaved, alternating order, CUDA events
per call, CUDA-graph replay for kernel-only time, each result checked exactly against torch).

    python3 -m tools.bench.ab_sample --reps 60 [--match TEXT] [--out FILE] [--profile FILE]

``--profile FILE``: before the A/B, per-kernel device time (torch.profiler, CUPTI) of 30 calls
of s0 / s12 / s15 on the three n = 151936 / 32000 cases, bf16 and f32, written as text to FILE.
"""

from __future__ import annotations

import sys

from .suites import reductions as red

# IOP_SAMPLE_SEL bit flags (ops/random_sample): 1 select2, 2 gather, 4 block histogram pick, 8 batched loads
SEL = {f"s{v}": {"IOP_SAMPLE_SEL": str(v)} for v in (0, 3, 12, 13, 15)}
PROFILE = ("s0", "s12", "s15")
PARAMS = (
    (32000, (0.8, 0.9, 50, 0.8)),
    (151936, (0.8, 0.9, 50, 0.8)),
    (151936, (0.95, 1.0, 151936, 1.0)),
)


def cases():
    out = []
    for n, rt in PARAMS:
        for dt in ("bf16", "f16", "f32"):
            out.append((red.sample_case(dt, n, rt), SEL, True))
    return out


def profile(path: str) -> None:
    from .core import ours_call, switches
    from .env import make_env

    env = make_env(False)
    torch = env.torch
    lines = []
    for n, rt in PARAMS:
        for dt in ("bf16", "f32"):
            case = red.sample_case(dt, n, rt)
            for name in PROFILE:
                envs = SEL[name]
                with switches(envs):
                    w = case.build(env)
                f = ours_call(env, w)
                for i in range(5):
                    f(i % w.nsets)
                env.sync()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for i in range(30):
                        f(i % w.nsets)
                    env.sync()
                tot = {}
                for ev in prof.events():
                    if ev.device_type == torch.autograd.DeviceType.CUDA:
                        key = ev.name.split("(")[0][:60]
                        t, c = tot.get(key, (0.0, 0))
                        tot[key] = (t + ev.device_time, c + 1)
                total = sum(t for t, _ in tot.values()) / 30
                lines.append(f"{dt} {case.case} {name}: {total:.2f} us device per call")
                for key, (t, c) in sorted(tot.items(), key=lambda kv: -kv[1][0]):
                    lines.append(f"    {key:<60} {t / c:8.2f} us x {c / 30:.0f}")
                w.release()
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--profile" in argv:
        i = argv.index("--profile")
        try:
            profile(argv[i + 1])
        except Exception as exc:  # the A/B still runs
            print(f"# profile failed: {type(exc).__name__}: {exc}", flush=True)
        del argv[i : i + 2]
    red.ab_cases = cases
    raise SystemExit(red.ab_main(argv))
