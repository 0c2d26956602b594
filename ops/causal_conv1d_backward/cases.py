from infiniop_py.dtypes import DType
from infiniop_py.testing.cases import Case, T
from infiniop_py.testing.causal_cases import BF16, F16, F32, X3, make_data, seed_configs, strides

DATA = make_data()
I32, I64 = DType.I32, DType.I64


def bwd(B, D, L, W=4, x="cf", g=None, o=None, wdt=None, bias=True, init=None, dinit=None, seq=None, wstr=None):  # noqa: N803
    """Tensors of one backward case: x layout ``x``, dout layout ``g``, dx layout ``o`` (both
    default to x's); ``init``/``dinit`` are layouts of (B, D, W-1) tensors or None (absent)."""
    st = strides(B, D, L, x)
    return {
        "dx": T((B, D, L), strides(B, D, L, o) if o else st),
        "dweight": T((D, W), wstr, wdt),
        "dbias": T((D,), None, wdt) if bias else None,
        "dinitial_states": None if dinit is None else T((B, D, W - 1), strides(B, D, W - 1, dinit)),
        "x": T((B, D, L), st),
        "weight": T((D, W), wstr, wdt),
        "bias": T((D,), None, wdt) if bias else None,
        "dout": T((B, D, L), strides(B, D, L, g) if g else st),
        "initial_states": None if init is None else T((B, D, W - 1), strides(B, D, W - 1, init)),
        "seq_idx": None if seq is None else T((B, L), None, seq),
    }


# f32 dweight / dbias sum B·L products of values up to 4 and more in magnitude: their f32
# rounding (and the float64 reference's exactness) allow ~1e-4 of relative error on sums that
# cancel, the seed report's bar for dx in f32 (1e-4) and no looser.
F32_SUMS = {"atol": 1e-4, "rtol": 1e-4}


def C(tensors, desc, dtypes=X3, silu=False, suites=("quick",), det=None, **kw):  # noqa: N802
    attrs = {"activation": "silu"} if silu else {}
    if det is not None:
        attrs["deterministic"] = det
    cases = []
    if tensors["dweight"].dtype not in (None, F32):  # half dweight: its own dtype's bar
        return [Case(tensors, dtypes, desc, attrs=attrs, data=DATA, suites=suites, **kw)]
    rest = tuple(d for d in dtypes if d is not F32)
    if rest:
        cases.append(Case(tensors, rest, desc, attrs=attrs, data=DATA, suites=suites, **kw))
    if F32 in dtypes:
        cases.append(Case(tensors, (F32,), desc + " (f32 sums 1e-4)", attrs=attrs, data=DATA, suites=suites, **F32_SUMS, **kw))
    return cases


CASES = [c for size, lay, silu, desc, suites in seed_configs() for c in C(bwd(*size, 4, x=lay), desc, silu=silu, suites=suites)]

for _args, _kw, _desc in [
    ((2, 5, 63, 2), {}, "W2 L63 cf"),
    ((3, 7, 64, 3), {"x": "cl", "silu": True}, "W3 L64 cl"),
    ((2, 9, 65, 4), {}, "W4 L65 cf"),
    ((2, 33, 127, 5), {"x": "cl"}, "W5 L127 cl"),
    ((2, 6, 128, 6), {"silu": True}, "W6 L128 cf"),
    ((2, 70, 129, 7), {"x": "cl", "silu": True}, "W7 L129 cl"),
    ((2, 3, 256, 8), {}, "W8 L256 cf"),
    ((2, 40, 257, 8), {"x": "cl", "silu": True}, "W8 L257 cl"),
    ((1, 3, 1100, 5), {"silu": True}, "W5 L1100 cf, several tiles per row"),
    ((2, 260, 20, 4), {"x": "cl"}, "W4 L20 cl, 260 channels (partial channel pack, three blocks)"),
    ((1, 1, 7, 3), {}, "one channel, 7 steps"),
    ((2, 6, 40, 9), {}, "W9 (generic path)"),
    ((2, 5, 100, 33), {"x": "cl", "silu": True}, "W33 cl (generic path)"),
    ((1, 3, 70, 64), {"init": "cf", "dinit": "cf"}, "W64 with initial states and their gradient"),
    ((2, 12, 130, 4), {"wdt": BF16, "dtypes": (F32,), "silu": True}, "f32 x, bf16 weight"),
    ((2, 12, 130, 4), {"x": "cl", "wdt": F32, "dtypes": (F16,)}, "f16 x, f32 weight, cl"),
    ((2, 12, 130, 4), {"wdt": F16, "dtypes": (BF16,)}, "bf16 x, f16 weight"),
    ((2, 12, 130, 33), {"wdt": F32, "dtypes": (BF16,), "silu": True}, "bf16 x, f32 weight, W33"),
    ((2, 9, 65, 4), {"init": "cf", "dinit": "cf"}, "initial states and their gradient"),
    ((2, 16, 129, 6), {"x": "cl", "init": "cl", "dinit": "cl", "silu": True}, "initial states, channel-last"),
    ((2, 9, 300, 8), {"init": "gap", "dinit": "bmajor", "bias": False}, "strided states, no bias"),
    ((2, 9, 65, 4), {"init": "cf"}, "initial states without their gradient"),
    ((2, 5, 2, 6), {"init": "cf", "dinit": "cf", "silu": True}, "L=2 < W-1 with initial states"),
    ((2, 4, 0, 4), {"init": "cf", "dinit": "cf"}, "L=0: every gradient is zero"),
    ((2, 12, 300, 4), {"seq": I32, "silu": True}, "seq_idx i32"),
    ((2, 36, 129, 3), {"x": "cl", "seq": I64}, "seq_idx i64, cl"),
    ((2, 5, 520, 8), {"seq": I32, "bias": False}, "seq_idx W8, no bias"),
    ((2, 5, 140, 33), {"seq": I64, "silu": True}, "seq_idx W33 (generic path)"),
    ((2, 8, 600, 4), {"x": "cl", "seq": I32, "silu": True}, "seq_idx cl, long"),
    ((2, 6, 70, 4), {"x": "gap", "o": "cf", "g": "cl"}, "gapped x, channel-last dout"),
    ((3, 5, 70, 4), {"x": "bmajor", "silu": True}, "batch-innermost tensors (strided path)"),
    ((2, 10, 70, 4), {"x": "cf_pad", "o": "cl_pad", "g": "cf_pad"}, "padded channel-first, padded channel-last dx"),
    ((2, 10, 80, 5), {"x": "cl_pad", "init": "bmajor", "dinit": "gap"}, "padded channel-last, strided states"),
    ((2, 10, 80, 4), {"wstr": (1, 10)}, "transposed weight and dweight"),
    ((2, 10, 200, 4), {"det": False, "silu": True}, "deterministic=false"),
    ((0, 4, 8, 4), {}, "empty batch: dweight = dbias = 0"),
]:
    _kw = dict(_kw)
    _c = {k: _kw.pop(k) for k in ("dtypes", "silu", "det") if k in _kw}
    CASES += C(bwd(*_args, **_kw), _desc, **_c)
