"""Does timing a call right after the peer's change it? Device time per call (queued) of one
suite case: ours and torch interleaved call by call (the harness default), and each in blocks
of 16 calls of one implementation; also CUDA-graph replay of ours alone.

    python3 -m tools.bench.probe_interleave --suite pointwise --ops rope [--match TEXT]
"""

import argparse
import statistics

from tools.bench.core import Options, ours_call
from tools.bench.env import make_env
from tools.bench.suites import discover


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="pointwise")
    ap.add_argument("--ops", default="rope")
    ap.add_argument("--match", default="")
    ap.add_argument("--reps", type=int, default=96)
    args = ap.parse_args()
    env = make_env(False, 0)
    mod = discover()[args.suite]
    ops = set(args.ops.split(","))
    for case in mod.cases(env):
        if case.op not in ops or args.match not in case.case:
            continue
        work = case.build(env)
        ours, peer = ours_call(env, work), work.torch_eager
        n = work.nsets
        for fn in (ours, peer):
            for i in range(max(10, n)):
                fn(i % n)
        env.sync()
        calls, labels = [], []
        for r in range(args.reps):
            for name, fn in (("ours", ours), ("torch", peer)) if r % 2 == 0 else (("torch", peer), ("ours", ours)):
                calls.append((name, lambda fn=fn, s=len(calls) % n: fn(s)))
                labels.append(name)
        t, held = env.time_calls_queued(calls)
        inter = {k: statistics.median([x for x, lab in zip(t, labels) if lab == k]) for k in ("ours", "torch")}
        block = {}
        for name, fn in (("ours", ours), ("torch", peer)):
            seq = []
            for b in range(args.reps // 16):
                seq += [(name, lambda fn=fn, s=(16 * b + i) % n: fn(s)) for i in range(16)]
            tb, _ = env.time_calls_queued(seq)
            block[name] = statistics.median(tb)
        from tools.bench.core import graph_replay

        g = graph_replay(env, work, Options())
        print(
            f"{case.op} {case.case} {case.dtype}: interleaved ours {inter['ours']:.2f} torch {inter['torch']:.2f} | "
            f"blocks ours {block['ours']:.2f} torch {block['torch']:.2f} | graph ours {g.get('ours', float('nan')):.2f} "
            f"(held {held:.2f})",
            flush=True,
        )
        work.release()


if __name__ == "__main__":
    main()
