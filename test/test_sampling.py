"""Sampling & routing (random_sample, topksoftmax, topkrouter): bad input, C-style short
creates, GGUF files, and a NumPy port of the random_sample GPU algorithm checked against the
float64 reference (the GPU kernel itself runs in test_ops on a GPU machine)."""

import numpy as np
import pytest
from conftest import cupy_with_env, status_of

import infiniop_py as iop
from infiniop_py import Status

D = iop.create_tensor_descriptor


@pytest.fixture
def h():
    return iop.create_handle("cpu")


# -- random_sample -------------------------------------------------------------------------
def test_random_sample_bad_input(h):
    r0 = D((), None, iop.int64)
    p = D((10,), None, iop.float32)
    mk = lambda r, x: iop.create_descriptor("random_sample", h, r, x)  # noqa: E731
    assert status_of(lambda: mk(r0, D((2, 5), None, iop.float32))) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: mk(r0, D((0,), None, iop.float32))) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: mk(r0, D((10,), (2,), iop.float32))) == Status.BAD_TENSOR_STRIDES
    assert status_of(lambda: mk(D((1,), None, iop.int64), p)) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: mk(D((), None, iop.float32), p)) == Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: mk(r0, D((10,), None, iop.int32))) == Status.BAD_TENSOR_DTYPE
    d = mk(r0, p)
    x = np.linspace(-1, 1, 10).astype(np.float32)
    out = np.zeros((), np.int64)
    assert status_of(lambda: d.calculate(None, out, x, 0.5, 0.9, 5, float("nan"))) == Status.BAD_PARAM
    assert status_of(lambda: d.calculate(None, out, x, 0.5, 0.9, 5, -1.0)) == Status.BAD_PARAM
    assert status_of(lambda: d.calculate(None, out, x, float("nan"), 0.9, 5, 1.0)) == Status.BAD_PARAM
    assert status_of(lambda: d.calculate(None, out, x, 0.5, 0.9)) == Status.BAD_PARAM  # missing scalars
    d.calculate(None, out, x, 0.0, 0.9, 5, 1.0)
    assert out == 9  # greedy: the maximum
    d.calculate(None, out, x, random_val=1e-9, topp=0.9, topk=5, temperature=1.0)
    assert out == 9  # a tiny random_val takes the first ranked entry


def test_random_sample_rule_examples(h):
    from ops.random_sample import sample_rule

    x = np.array([1.0, 3.0, 3.0, 2.0, 0.0], np.float32)
    assert sample_rule(x, 0.0, 0.9, 3, 1.0, np.float32) == 1  # greedy: lowest index among maxima
    # ranked 1, 2, 3, 0, 4 with cum 1, 2, 2+e^-1, ...; topk 2: limit = r * 2
    assert sample_rule(x, 0.49, 1.0, 2, 1.0, np.float32) == 1
    assert sample_rule(x, 0.51, 1.0, 2, 1.0, np.float32) == 2
    assert sample_rule(x, 0.99, 1.0, 2, 1.0, np.float32) == 2  # never beyond the top-k'
    assert sample_rule(x, 5.0, 1.0, 2, 1.0, np.float32) == 2  # random_val > 1 clamps


def _keys(a):
    a = a + a.dtype.type(0)
    if a.dtype == np.float64:
        b, top, bits = a.view(np.uint64), np.uint64(1 << 63), 64
    else:
        b, top, bits = a.astype(np.float32).view(np.uint32), np.uint32(1 << 31), 32
    return np.where(b & top, ~b, b | top).astype(np.uint64), bits


def emulate_gpu(x, random_val, topp, topk, temperature):
    """ops/random_sample/kernel.cu step by step: fixed-point weights, 4-bit radix selects
    (count, then weight), ties resolved by index."""
    acc = np.float64 if x.dtype == np.float64 else np.float32
    a = x.astype(acc)
    n = a.size
    k, bits = _keys(a)
    i0 = int(np.flatnonzero(k == k.max())[0])
    if random_val == 0 or topp <= 0 or topk <= 1 or temperature == 0 or n == 1:
        return i0
    scale = 2.0 ** (62 - int(n).bit_length())
    with np.errstate(all="ignore"):
        e = np.exp((a - a[i0]) / acc(temperature)).astype(acc)
    e = np.minimum(np.where(e >= 0, e, 0), 1)
    w = np.floor(e.astype(np.float64) * scale + 0.5).astype(np.uint64)
    W = int(w.sum(dtype=np.uint64))
    kp = max(1, min(int(topk), n))

    def select(mode, need):
        prefix, ac, aw = 0, 0, 0
        for shift in range(bits - 4, -1, -4):
            inr = np.ones(n, bool) if shift + 4 >= bits else ((k ^ np.uint64(prefix)) >> np.uint64(shift + 4)) == 0
            d = ((k >> np.uint64(shift)) & np.uint64(15)).astype(np.int64)
            tc = np.bincount(d[inr], minlength=16)
            tw = [int(w[inr & (d == b)].sum(dtype=np.uint64)) for b in range(16)]
            pick, last = -1, -1
            for b in range(15, -1, -1):
                if tc[b] == 0:
                    continue
                if (ac + tc[b] >= need) if mode == 0 else (aw + tw[b] >= need):
                    pick = b
                    break
                ac, aw, last = ac + int(tc[b]), aw + tw[b], b
            if pick < 0:
                pick = max(last, 0)
                if last >= 0:
                    ac, aw = ac - int(tc[last]), aw - tw[last]
            prefix |= pick << shift
            bc, bw = int(tc[pick]), tw[pick]
            if bc <= 1:
                break
        return prefix, shift, ac, aw, bc, bw

    S = W
    if kp < n:
        _, _, ac, aw, bc, bw = select(0, kp)
        S = aw + max(kp - ac, 0) * (bw // bc if bc else 0)
    lim = random_val * min(float(S), topp * float(W))
    need = min(int(np.ceil(lim)) if lim > 0 else 0, S)
    prefix, shift, ac, aw, bc, bw = select(1, need)
    j = 0
    if bc > 1 and aw < need:
        each = bw // bc
        j = (need - aw + each - 1) // each - 1 if each > 0 else 0
        j = min(max(j, 0), bc - 1)
    match = np.flatnonzero(((k ^ np.uint64(prefix)) >> np.uint64(shift)) == 0)
    return int(match[j]) if j < match.size else i0


def test_random_sample_gpu_algorithm_matches_reference():
    from infiniop_py.registry import get_cases, get_spec
    from infiniop_py.testing.compare import compare_index
    from infiniop_py.testing.run import hash_case, make_inputs
    from ops.random_sample import sample_rule

    spec = get_spec("random_sample")
    for case in get_cases("random_sample"):
        if "quick" not in case.suites:
            continue
        for dt in case.dtypes:
            for seed in range(3):
                rng = np.random.Generator(np.random.PCG64(seed * 7919 + hash_case(case)))
                _, data = make_inputs(spec, case, dt, rng)
                x = np.asarray(data["probs"])
                r = case.runtime
                got = emulate_gpu(x, r["random_val"], r["topp"], r["topk"], r["temperature"])
                want = sample_rule(x, r["random_val"], r["topp"], r["topk"], r["temperature"], np.float64)
                assert compare_index(np.array(got), np.array(want), x).ok, (case.description, dt, seed, got, want)


# The multi-block path (multiblock.cu, sampled.cu) modelled in NumPy: the 11-bit top histogram,
# the compacted 64-bit composites (value key << 32 | ~index) and the radix select over them,
# either with the fixed 8-bit windows of rm_select (sel 0: f32) or with rm_select2's windows from
# the highest bit varying across the list down to a varying bit (sel 1: f16 / bf16).
def _mb_pick(c, w, need, ac, aw, mode):
    """rm_pick: bins descending, the first non-empty one where the running count / weight
    reaches need, else the last non-empty one (above = everything before it)."""
    last, lac, law = -1, ac, aw
    for b in range(len(c) - 1, -1, -1):
        if c[b] == 0:
            continue
        if (ac + c[b] >= need) if mode == 0 else (aw + w[b] >= need):
            return b, ac, aw, c[b], w[b]
        lac, law, last = ac, aw, b
        ac, aw = ac + c[b], aw + w[b]
    b = last if last >= 0 else len(c) - 1
    return b, lac, law, c[b], w[b]


def _mb_hist(dig, wts, nb):
    c = np.bincount(dig, minlength=nb).astype(object)
    w = [0] * nb
    for d, wt in zip(dig.tolist(), wts.tolist()):
        w[d] += wt
    return [int(v) for v in c], w


def _mb_select(comp, wts, need, mode, bucket, sel):
    """rm_select (sel 0) / rm_select2 (sel 1) on one list; returns (composite, weight above)."""
    comp = [int(v) for v in comp]
    wts = [int(v) for v in wts]
    vand, vor = (1 << 64) - 1, 0
    for v in comp:
        vand &= v
        vor |= v
    var = vand ^ vor
    prefix, ac, aw, bc, shift = bucket << 53, 0, 0, len(comp), 53
    while True:
        if sel == 0:
            if not (bc > 1 and shift > 0):
                break
            d = min(8, shift)
            lo = shift - d
            fixed = 0
        else:
            vb = var & ((1 << shift) - 1)
            if bc <= 1 or vb == 0:
                break
            h = vb.bit_length() - 1
            win = vb & ~((1 << max(h - 7, 0)) - 1)
            lo = (win & -win).bit_length() - 1  # the window's lowest bit varies too
            d = h - lo + 1
            fixed = vand & ((1 << shift) - 1) & ~((2 << h) - 1)
        idx = [q for q, v in enumerate(comp) if (v >> shift) == (prefix >> shift)]
        dig = np.array([(comp[q] >> lo) & ((1 << d) - 1) for q in idx], dtype=np.int64)
        c, w = _mb_hist(dig, np.array([wts[q] for q in idx], dtype=object), 256)
        b, ac, aw, bc, _ = _mb_pick(c, w, need, ac, aw, mode)
        prefix |= fixed | (b << lo)
        shift = lo
    hits = [v for v in comp if (v >> shift) == (prefix >> shift)]
    assert len(hits) == 1
    return hits[0], aw


def _fixed_point_weights(x, temperature):
    """(f32 logits, n, ordered keys, 64-bit fixed-point weights) as kernel.cu computes them:
    exp((x - max) / T) clamped to [0, 1], times 2^(62 - bits(n)), rounded."""
    a = np.asarray(x).astype(np.float32)
    n = a.size
    k, _ = _keys(a)
    i0 = int(np.flatnonzero(k == k.max())[0])
    scale = 2.0 ** (62 - int(n).bit_length())
    with np.errstate(all="ignore"):
        e = np.exp((a - a[i0]) / np.float32(temperature)).astype(np.float32)
    e = np.minimum(np.where(e >= 0, e, 0), 1)
    w = np.floor(e.astype(np.float64) * scale + 0.5).astype(np.uint64)
    return a, n, k, w


def emulate_multi_block(x, random_val, topp, topk, temperature, sel):
    """The multi-block path (sampled calls) step by step; returns the index."""
    a, n, k, w = _fixed_point_weights(x, temperature)
    comp = (k << np.uint64(32)) | (~np.arange(n, dtype=np.uint64) & np.uint64(0xFFFFFFFF))
    top = (k >> np.uint64(21)).astype(np.int64)
    hc, hw = _mb_hist(top, w.astype(object), 2048)
    W = sum(hw)
    kp = max(1, min(int(topk), n))

    def need_of(s_mass):
        lim = random_val * min(float(s_mass), topp * float(W))
        return min(int(np.ceil(lim)) if lim > 0 else 0, s_mass)

    def listed(b):
        m = top == b
        return comp[m], w[m]

    if kp < n:
        b0, ac0, aw0, _, _ = _mb_pick(hc, hw, kp, 0, 0, 0)
        ans, aw = _mb_select(*listed(b0), kp - ac0, 0, b0, sel)
        S = aw0 + aw + int(w[(~ans) & 0xFFFFFFFF])
    else:
        S = W
    need = need_of(S)
    b1, _, aw1, _, _ = _mb_pick(hc, hw, need, 0, 0, 1)
    ans, _ = _mb_select(*listed(b1), need - aw1, 1, b1, sel)
    return (~ans) & 0xFFFFFFFF


def _direct_fixed_point(x, random_val, topp, topk, temperature):
    """The rule on the same fixed-point weights, by sorting (what both selects must return)."""
    a, n, k, w = _fixed_point_weights(x, temperature)
    order = np.lexsort((np.arange(n), -k.astype(np.float64)))  # key descending, index ascending
    assert np.all(np.diff(k[order].astype(np.int64)) <= 0)
    cum = np.cumsum(w[order].astype(object))
    kp = max(1, min(int(topk), n))
    W = int(cum[-1])
    S = int(cum[kp - 1])
    lim = random_val * min(float(S), topp * float(W))
    need = min(int(np.ceil(lim)) if lim > 0 else 0, S)
    pos = next(q for q, v in enumerate(cum) if v >= need)
    return int(order[min(pos, kp - 1)])


def _half_data(kind, n, dt, rng):
    import ml_dtypes

    npdt = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dt]
    if kind == "uniform":
        return rng.uniform(-8.0, 8.0, n).astype(np.float32).astype(npdt)
    if kind == "ties":
        return rng.integers(-3, 3, n).astype(npdt)
    return (rng.standard_normal(n) * 3).astype(np.float32).astype(npdt)


SEL_PARAMS = [(0.8, 0.9, 50, 0.8), (0.95, 1.0, 10**9, 1.0), (0.3, 0.5, 1, 1.0), (0.999, 0.9, 50, 0.5), (0.5, 1.0, 10**9, 2.0)]


@pytest.mark.parametrize("dt", ["bf16", "f16", "f32"])
def test_random_sample_multi_block_select_windows_model(dt):
    """rm_select2's windows over the varying bits pick the same composite as rm_select's fixed
    windows and as the rule on the same fixed-point weights (NumPy model of sampled.cu)."""
    rng = np.random.default_rng(11)
    for n in (2, 7, 300, 4097, 20011):
        for kind in ("uniform", "ties", "normal"):
            x = _half_data(kind, n, dt, rng)
            for rv, topp, topk, T in SEL_PARAMS[:2] + SEL_PARAMS[3:]:
                want = _direct_fixed_point(x, rv, topp, topk, T)
                for sel in (0, 1):
                    got = emulate_multi_block(x, rv, topp, topk, T, sel)
                    assert got == want, (dt, n, kind, rv, topp, topk, T, sel, got, want)


def _block_pick(c, w, need, mode, threads):
    """sampled.cu rm_pick_hist: per-thread bins, block scan, the first thread where the running
    count / weight reaches need walks its bins; else the last thread with entries."""
    nb = len(c)
    per = nb // threads
    ranks = [list(range(nb - 1 - t * per, nb - 1 - t * per - per, -1)) for t in range(threads)]
    lc = [sum(c[b] for b in r) for r in ranks]
    lw = [sum(w[b] for b in r) for r in ranks]
    tc, tw = sum(lc), sum(lw)

    def reach(cc, ww):
        return cc > 0 and (cc >= need if mode == 0 else ww >= need)

    pc = pw = 0
    if tc == 0:
        return nb // 32 - 1, 0, 0, 0, 0
    for t in range(threads):
        ic, iw = pc + lc[t], pw + lw[t]
        if reach(tc, tw):
            if reach(ic, iw) and not reach(pc, pw):
                ac, aw = pc, pw
                for b in ranks[t]:
                    if c[b] == 0:
                        continue
                    if (ac + c[b] >= need) if mode == 0 else (aw + w[b] >= need):
                        return b, ac, aw, c[b], w[b]
                    ac, aw = ac + c[b], aw + w[b]
                raise AssertionError("the reaching thread holds the bin")
        elif lc[t] > 0 and ic == tc:
            ac, aw, out = pc, pw, None
            for b in ranks[t]:
                if c[b]:
                    out = (b, ac, aw, c[b], w[b])
                    ac, aw = ac + c[b], aw + w[b]
            return out
        pc, pw = ic, iw
    raise AssertionError("no thread answered")


def test_random_sample_block_histogram_pick_model():
    """rm_pick_hist (the top-level picks) picks what rm_pick does on the 2048-bin histogram:
    sparse / dense bins, zero weights, need 0, need beyond the total, 512 and 1024 threads."""
    rng = np.random.default_rng(4)
    for trial in range(100):
        nz = int(rng.integers(1, 2048)) if trial % 3 else int(rng.integers(1, 8))
        c = [0] * 2048
        w = [0] * 2048
        for b in rng.choice(2048, nz, replace=False).tolist():
            c[b] = int(rng.integers(1, 50))
            w[b] = 0 if rng.random() < 0.1 else int(rng.integers(1, 1 << 40)) * c[b]
        tc, tw = sum(c), sum(w)
        for mode in (0, 1):
            tot = tc if mode == 0 else tw
            for need in (0, 1, int(rng.integers(0, tot + 1)), tot, tot + 1):
                want = _mb_pick(c, w, need, 0, 0, mode)
                for threads in (512, 1024):
                    assert _block_pick(c, w, need, mode, threads) == want, (trial, mode, need, threads)


def test_random_sample_rules_and_compile_set():
    """The planner's choices per dtype and vocabulary size, and the compile list: exactly the
    kernels the rules can choose (one select per dtype, both greedy kernels, no two-pass greedy)."""
    rs = iop.registry.get_spec("random_sample").module
    F32, F16, BF16, F64 = iop.float32, iop.float16, iop.bfloat16, iop.float64
    assert [rs.plan(rs.PATH_RULES, d) for d in (F64, F32, F16, BF16)] == ["one_block"] + ["multi_block"] * 3
    assert [rs.plan(rs.SELECT_RULES, d) for d in (F32, F16, BF16)] == ["select", "select2", "select2"]
    assert rs.plan(rs.GREEDY_RULES, F32, 65536) == "one_block" and rs.plan(rs.GREEDY_RULES, F32, 65537) == "last_block"
    names = [n for _, ns in iop.registry.get_spec("random_sample").nvidia.compile_units() for n in ns]
    assert len(names) == len(set(names))
    assert not any(n.startswith("rm_greedy<") for n in names)
    assert "rm_compact<float, 0, 0>" in names and "rm_compact<float, 0, 1>" not in names
    assert {n for n in names if n.startswith("rm_final<iop_bf16, int64_t")} == {"rm_final<iop_bf16, int64_t, 1>"}


SAMPLE_NS = (1, 2, 7, 31, 1000, 4097, 20011, 32000, 50001, 65536, 65537, 151936)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["bf16", "f16", "f32"])
def test_random_sample_nvidia_multi_block(monkeypatch, dt):
    """The multi-block path on f32 / f16 / bf16, n = 1 .. 151936 (odd n, ties, both greedy
    kernels), greedy and topk 1 / 50 / n, topp 0.5 / 0.9 / 1, T 0.5 / 1 / 2, several random_val:
    the index is the CPU backend's (or an equal value) and repeats exactly."""
    import ml_dtypes

    cp = cupy_with_env(monkeypatch, {})
    iop_dt = {"f32": iop.float32, "f16": iop.float16, "bf16": iop.bfloat16}[dt]
    hg, hc = iop.create_handle("nvidia"), iop.create_handle("cpu")
    rng = np.random.default_rng(5)
    params = [(0.8, 0.9, 50, 0.8), (0.95, 1.0, None, 1.0), (0.3, 0.5, 1, 1.0), (0.999, 0.9, 50, 0.5)]
    params += [(0.5, 1.0, None, 2.0), (0.1, 0.9, None, 0.5), (0.7, 0.5, 50, 2.0), (1.5, 0.9, 50, 1.0), (0.0, 0.9, 50, 0.8)]
    for n in SAMPLE_NS:
        for kind in ("uniform", "ties", "normal"):
            x = _half_data(kind, n, dt, rng)
            if dt == "bf16":
                assert x.dtype == ml_dtypes.bfloat16
            d = iop.create_descriptor("random_sample", hg, D((), None, iop.int64), D((n,), None, iop_dt))
            dc = iop.create_descriptor("random_sample", hc, D((), None, iop.int64), D((n,), None, iop_dt))
            ws = cp.empty(max(1, d.workspace_size), cp.uint8)
            xd = cp.asarray(x)
            for rv, topp, topk, T in params:
                topk = n if topk is None else topk
                tag = (dt, n, kind, rv, topp, topk, T)
                outs = []
                for _ in range(2):
                    r = cp.full((), -1, cp.int64)
                    d.calculate(ws, r, xd, rv, topp, topk, T)
                    cp.cuda.get_current_stream().synchronize()
                    outs.append(int(r))
                assert outs[0] == outs[1], tag
                rc = np.zeros((), np.int64)
                dc.calculate(None, rc, x, rv, topp, topk, T)
                a = x.astype(np.float64)
                assert outs[0] == int(rc) or a[outs[0]] == a[int(rc)], (tag, outs[0], int(rc))


# -- topksoftmax / topkrouter ----------------------------------------------------------------
def test_topksoftmax_bad_input(h):
    x = D((4, 16), None, iop.float16)
    v, i = D((4, 3), None, iop.float32), D((4, 3), None, iop.int32)
    mk = lambda v, i, x: iop.create_descriptor("topksoftmax", h, v, i, x)  # noqa: E731
    assert status_of(lambda: mk(D((4, 3), None, iop.float16), i, x)) == Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: mk(v, D((4, 3), None, iop.int64), x)) == Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: mk(v, i, D((4, 16), None, iop.int32))) == Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: mk(v, i, D((2, 4, 16), None, iop.float16))) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: mk(D((5, 3), None, iop.float32), D((5, 3), None, iop.int32), x)) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: mk(v, D((4, 2), None, iop.int32), x)) == Status.BAD_TENSOR_SHAPE
    assert (
        status_of(lambda: mk(D((4, 17), None, iop.float32), D((4, 17), None, iop.int32), x)) == Status.BAD_PARAM
    )  # topk > nexpert
    assert status_of(lambda: mk(D((4, 3), (0, 1), iop.float32), i, x)) == Status.BAD_TENSOR_STRIDES
    d = mk(v, i, x)
    xs = np.zeros((4, 16), np.float16)
    vo, io = np.empty((4, 3), np.float32), np.empty((4, 3), np.int32)
    assert status_of(lambda: d.calculate(None, vo, io, xs, 2, False)) == Status.BAD_PARAM


def test_topkrouter_bad_input(h):
    x, b = D((4, 256), None, iop.bfloat16), D((256,), None, iop.float32)
    v, i = D((4, 8), None, iop.float32), D((4, 8), None, iop.int32)
    mk = lambda *t: iop.create_descriptor("topkrouter", h, *t)  # noqa: E731
    assert status_of(lambda: mk(v, i, D((4, 128), None, iop.bfloat16), b)) == Status.BAD_PARAM
    assert status_of(lambda: mk(v, i, D((4, 256), (1, 4), iop.bfloat16), b)) == Status.BAD_TENSOR_STRIDES
    assert status_of(lambda: mk(v, i, x, D((256,), None, iop.float16))) == Status.BAD_TENSOR_DTYPE
    assert status_of(lambda: mk(v, i, x, D((128,), None, iop.float32))) == Status.BAD_TENSOR_SHAPE
    assert status_of(lambda: mk(D((4, 257), None, iop.float32), D((4, 257), None, iop.int32), x, b)) in (
        Status.BAD_PARAM,
        Status.BAD_TENSOR_SHAPE,
    )
    d = mk(v, i, x, b)
    import ml_dtypes

    xs = np.zeros((4, 256), ml_dtypes.bfloat16)
    bs = np.zeros(256, np.float32)
    vo, io = np.empty((4, 8), np.float32), np.empty((4, 8), np.int32)
    assert status_of(lambda: d.calculate(None, vo, io, xs, bs, 2.5, 4)) == Status.BAD_PARAM
    d.calculate(None, vo, io, xs, bs, 2.5, 8)
    # all scores equal: groups 0-3 kept, experts 0..7 in order, values 2.5/8 each
    assert io[0].tolist() == list(range(8))
    np.testing.assert_allclose(vo, 2.5 / 8, rtol=1e-6)


def test_topksoftmax_cstyle_short_create(h):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 24)).astype(np.float32)
    xd = D(x.shape, None, iop.float32)
    d = iop.infiniopCreateTopksoftmaxDescriptor(h, xd)
    assert iop.infiniopGetTopksoftmaxWorkspaceSize(d) == 0
    for k, norm in ((4, True), (2, False)):
        v, i = np.empty((5, k), np.float32), np.empty((5, k), np.int32)
        iop.infiniopTopksoftmax(d, None, 0, v, i, x, k, norm, None)
        full = iop.create_descriptor("topksoftmax", h, D((5, k), None, iop.float32), D((5, k), None, iop.int32), xd)
        v2, i2 = np.empty_like(v), np.empty_like(i)
        full.calculate(None, v2, i2, x, k, norm)
        np.testing.assert_array_equal(i, i2)
        np.testing.assert_array_equal(v, v2)
        np.testing.assert_array_equal(i[:, 0], np.argmax(x, axis=1))
    big = np.empty((5, 25), np.float32)
    assert status_of(lambda: iop.infiniopTopksoftmax(d, None, 0, big, big.view(np.int32), x, 25, False, None)) == Status.BAD_PARAM
    iop.infiniopDestroyTopksoftmaxDescriptor(d)
    assert status_of(lambda: iop.infiniopTopksoftmax(d, None, 0, v, i, x, 2, False, None)) == Status.BAD_PARAM
    # the full form still works through the C-style create
    d2 = iop.infiniopCreateTopksoftmaxDescriptor(h, D((5, 2), None, iop.float32), D((5, 2), None, iop.int32), xd)
    iop.infiniopTopksoftmax(d2, None, 0, v2[:, :2].copy(), i2[:, :2].copy(), x, 2, False, None)
    # bad x at the short create
    assert status_of(lambda: iop.infiniopCreateTopksoftmaxDescriptor(h, D((5, 24), None, iop.int32))) == Status.BAD_TENSOR_DTYPE


def test_topkrouter_cstyle_short_create(h):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    b = (rng.standard_normal(256) * 0.1).astype(np.float32)
    d = iop.infiniopCreateTopkrouterDescriptor(h, D(x.shape, None, iop.float32), D((256,), None, iop.float32))
    v, i = np.empty((3, 8), np.float32), np.empty((3, 8), np.int32)
    iop.infiniopTopkrouter(d, None, 0, v, i, x, b, 2.5, 8, None)
    from ops.topkrouter import route

    want_v, want_i = route(x, b, 8, 2.5)
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_allclose(v, want_v, rtol=1e-6)
    np.testing.assert_allclose(v.sum(1), 2.5, rtol=1e-5)
    assert status_of(lambda: iop.infiniopTopkrouter(d, None, 0, v, i, x, b, 2.5, 300, None)) == Status.BAD_PARAM
    iop.infiniopDestroyTopkrouterDescriptor(d)


def test_gguf_files_run(tmp_path):
    pytest.importorskip("gguf")
    from gguf_cases import generator_for
    from infiniop_py.cli import main
    from infiniop_py.gguf import GGUFFile

    for op in ("random_sample", "topksoftmax", "topkrouter"):
        path = tmp_path / f"{op}.gguf"
        assert generator_for(op).write(path, "quick") > 0
        with GGUFFile(path) as f:
            names = set(f.tensors)
        if op == "random_sample":
            assert "test.0.data" in names and "test.0.result" in names
        else:
            assert "test.0.lable_values" in names and "test.0.lable_indices" in names
        assert main([str(path), "--cpu", "--quiet"]) == 0


def test_topkrouter_misspelled_bias_strides(tmp_path):
    pytest.importorskip("gguf")
    from gguf_cases import generator_for
    from infiniop_py.cli import main
    from infiniop_py.gguf import write_file

    gen = generator_for("topkrouter")
    recs = [r for r in gen.build("quick") if "strided correction_bias" in r.keys["description"][1]]
    assert recs
    for r in recs:
        r.rename("correction_bias.strides", "correction_bias_strides.strides")
        assert "correction_bias_strides.strides" in r.keys
    write_file(tmp_path / "tr.gguf", recs, "misspelled strides")
    assert main([str(tmp_path / "tr.gguf"), "--cpu", "--quiet"]) == 0


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_topkrouter_rounds_sigmoid_to_x_dtype(device, dt):
    """s = sigmoid(x) is rounded to x's dtype before the bias is added (ops.md §8.3): two
    adjacent x whose f32 sigmoids differ but round to one f16/bf16 value tie (lower index
    first, equal values) instead of ranking by the f32 sigmoid."""
    import ml_dtypes

    from infiniop_py.testing.device import backend_for
    from ops.topkrouter import route

    npd = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dt]
    f32 = np.float32
    start = int(np.array(0.5, npd).view(np.uint16))
    grid = np.arange(start, start + 256, dtype=np.uint16).view(npd)
    sig = f32(1) / (f32(1) + np.exp(-grid.astype(f32)))
    same = (sig[:-1] < sig[1:]) & (sig[:-1].astype(npd) == sig[1:].astype(npd))
    k = int(np.flatnonzero(same)[0])
    x = np.full((3, 256), -10.0, npd)
    x[:, 0], x[:, 1] = grid[k], grid[k + 1]
    b = np.zeros(256, f32)
    unrounded_v, unrounded_i = route(x.astype(f32), b, 2, 1.0)
    assert unrounded_i[0].tolist() == [1, 0] and unrounded_v[0, 0] != unrounded_v[0, 1]

    be = backend_for(device)
    h = iop.create_handle(device)
    dtype = {"f16": iop.float16, "bf16": iop.bfloat16}[dt]
    d = iop.create_descriptor(
        "topkrouter",
        h,
        D((3, 2), None, iop.float32),
        D((3, 2), None, iop.int32),
        D((3, 256), None, dtype),
        D((256,), None, iop.float32),
    )
    v, i = be.upload(np.zeros(6, f32)), be.upload(np.zeros(6, np.int32))
    d.calculate(None, v, i, be.upload(x.reshape(-1)), be.upload(b), 1.0, 2)
    be.synchronize()
    v, i = be.download(v, f32).reshape(3, 2), be.download(i, np.int32).reshape(3, 2)
    assert i.tolist() == [[0, 1]] * 3, (device, dt, i.tolist())
    assert v.tolist() == [[0.5, 0.5]] * 3, (device, dt, v.tolist())


def test_random_sample_planner_reaches_exactly_its_compile_list(fake_nvidia):
    """Descriptors of every logits and result dtype, on vocabularies either side of the one-block
    greedy limit, on a fake device request exactly the kernels of compile_units()."""
    rs = iop.registry.get_spec("random_sample").module
    h = iop.create_handle("nvidia")
    for pdt in rs.SPEC.dtypes:
        for rdt in rs.OUT_DTYPES:
            for n in (1, 5000, rs.GREEDY1_MAX, rs.GREEDY1_MAX + 1):
                iop.create_descriptor("random_sample", h, D((), None, rdt), D((n,), None, pdt)).destroy()
    compiled = {n for _, names in rs.nvidia.compile_units() for n in names}
    requested = set(fake_nvidia)
    assert requested == compiled, (sorted(compiled - requested), sorted(requested - compiled))
